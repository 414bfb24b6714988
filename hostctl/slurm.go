// The slurm driver (docs/slurm.md): a host is a Slurm cluster reached at its login node over SSH;
// a point is a batch job (sbatch) that asks for tp GPUs on one node and runs the server there. The
// job's state (scontrol) and its output file (on a file system the login node shares with the
// compute nodes) play the parts of the unit's state and journal, so readiness, classification and
// the stop are the shared instance code (instance.go) over a jobProc.

package hostctl

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/specsweep/specsweep/sweep"
)

// SlurmOptions configure a cluster.
type SlurmOptions struct {
	Name string
	// SSH reaches the login node, where sbatch, squeue, scontrol and scancel run as the login user
	// (never under sudo: jobs belong to that user). Local runs them on this machine instead (specsweep
	// on the login node), as the user running specsweep.
	SSH   SSHOptions
	Local bool
	// Sweep names the sweep: every job's comment is specsweep:sweep=SWEEP:point=POINT (its name,
	// for people, specsweep.SWEEP.POINT), so a later run or a restore finds the jobs a killed
	// specsweep left, and only those (docs/slurm.md).
	Sweep      string
	Partition  string
	Account    string
	TimeLimit  time.Duration // --time; 0: the partition's default
	SbatchArgs []string
	// OutputDir holds the jobs' output files; relative paths are under the login user's home. It
	// must be shared by the login node and the compute nodes (the log is read on the login node).
	OutputDir string
	// Poll is how often a pending job's state is read (default 500 ms).
	Poll time.Duration
	// Event, if set, receives notable events (a job pending, leftovers cancelled).
	Event func(kind, detail string)
	// Clock times the polls, a job's pending time and start, its readiness and stop, and is the
	// login node's SSH connection's too (it replaces SSH.Clock); nil: the real clock.
	Clock Clock
	// GPUsPerNode and MaxNodes: a launch whose tp exceeds GPUsPerNode runs over tp/GPUsPerNode
	// nodes (at most MaxNodes), one SGLang rank each (docs/slurm.md, "Points over several nodes");
	// GPUsPerNode 0: every job is one node's. DistInitPort is --dist-init-addr's port (0: a free one
	// on the job's first node).
	GPUsPerNode, MaxNodes, DistInitPort int
}

// jobNodes is how many nodes a job of l takes: 1 within a node, else tp/GPUsPerNode whole nodes, at
// most MaxNodes (launchNodes).
func (o SlurmOptions) jobNodes(l Launch) (int, error) {
	if o.GPUsPerNode <= 0 {
		return 1, nil
	}
	return launchNodes(l, sweep.Host{GPUs: o.GPUsPerNode, Slurm: &sweep.Slurm{MaxNodes: o.MaxNodes}})
}

// Slurm is a cluster; Slot(k) is the handle of its k-th job in flight.
type Slurm struct {
	o     SlurmOptions
	shell loginShell

	sweepMu sync.Mutex // held while the leftovers of a killed run are cancelled

	mu     sync.Mutex
	outDir string            // OutputDir resolved on the login node
	addrs  map[string]string // node name -> NodeAddr
	slots  map[int]*SlurmSlot
	swept  bool          // the jobs a killed run left were cancelled
	kill   time.Duration // the cluster's KillWait, once read
}

var (
	_ Host = (*Slurm)(nil)
	_ Host = (*SlurmSlot)(nil)
)

// reJobName is what a job name may hold of the sweep's name and the point's tag.
var reJobName = regexp.MustCompile(`[^A-Za-z0-9._@-]`)

// DialSlurm connects to the cluster's login node.
func DialSlurm(ctx context.Context, o SlurmOptions) (*Slurm, error) {
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.OutputDir == "" {
		o.OutputDir = "specsweep-jobs"
	}
	for _, a := range o.SbatchArgs {
		if strings.ContainsAny(a, "\n\r\x00") {
			return nil, fmt.Errorf("slurm: sbatch argument %q holds a newline or NUL", a)
		}
	}
	o.Clock = orRealClock(o.Clock)
	var sh loginShell = localShell{}
	if !o.Local {
		o.SSH.Clock = o.Clock
		c, err := DialSSH(ctx, o.SSH)
		if err != nil {
			return nil, err
		}
		sh = sshShell{c}
	}
	return newSlurm(o, sh), nil
}

func newSlurm(o SlurmOptions, sh loginShell) *Slurm {
	o.Clock = orRealClock(o.Clock)
	return &Slurm{o: o, shell: sh, addrs: map[string]string{}, slots: map[int]*SlurmSlot{}}
}

// Name implements Host.
func (s *Slurm) Name() string { return s.o.Name }

// Close implements Host.
func (s *Slurm) Close() error { return s.shell.close() }

// sh runs a shell script where the Slurm commands are, as the login user.
func (s *Slurm) sh(ctx context.Context, script string, stdin []byte, timeout time.Duration) (Output, error) {
	return s.shell.sh(ctx, script, stdin, timeout)
}

// loginShell runs scripts where the cluster's commands are: on the login node over SSH, or here.
type loginShell interface {
	sh(ctx context.Context, script string, stdin []byte, timeout time.Duration) (Output, error)
	close() error
}

type sshShell struct{ c *Conn }

// sh runs script in the login user's persistent shell: a poll is then a round trip, not a new SSH
// session (sshd, PAM and the login shell for each: about 0.15 s of every poll on the test cluster,
// docs/benchmarks.md, "Slurm against SSH hosts").
func (s sshShell) sh(ctx context.Context, script string, stdin []byte, timeout time.Duration) (Output, error) {
	return s.c.RunUserShell(ctx, script, stdin, timeout, 1<<20)
}

func (s sshShell) close() error { return s.c.Close() }

// localShell runs scripts on this machine (specsweep on the login node), output bounded as over SSH.
type localShell struct{}

func (localShell) sh(ctx context.Context, script string, stdin []byte, timeout time.Duration) (Output, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	stdout, stderr := &capWriter{max: 1 << 20}, &capWriter{max: 1 << 20}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err := cmd.Run()
	out := Output{Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes(), Truncated: stdout.truncated || stderr.truncated}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ctx.Err() == nil {
		out.Code = ee.ExitCode()
		return out, &ExitError{Line: script, Out: out}
	}
	if err != nil {
		return out, fmt.Errorf("running %q here: %w", firstLineOf([]byte(script)), err)
	}
	return out, nil
}

func (localShell) close() error { return nil }

// jobName is a job's name, for people (squeue, the output file): specsweep.SWEEP.POINT. It is not
// how specsweep finds its jobs (a sweep's name may be another's prefix): jobComment is.
func (s *Slurm) jobName(tag string) string {
	return "specsweep." + reJobName.ReplaceAllString(s.o.Sweep, "_") + "." + reJobName.ReplaceAllString(tag, "_")
}

// jobComment is the comment (sbatch --comment) that marks a job as the sweep's point tag:
// specsweep:sweep=SWEEP:point=POINT, each value escaped (commentEscape) so that the fields split
// at ':' exactly and one sweep's comment is never another's.
func (s *Slurm) jobComment(tag string) string {
	return "specsweep:sweep=" + commentEscape(s.o.Sweep) + ":point=" + commentEscape(tag)
}

// commentEscape writes each byte outside [A-Za-z0-9._-] as %XX (upper-case hex): injective, so
// two names are equal exactly when their escapes are; sweep names and point ids never need it.
func commentEscape(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// commentUnescape reverses commentEscape; ok is false for anything commentEscape does not write.
func commentUnescape(v string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			b.WriteByte(v[i])
			continue
		}
		if i+3 > len(v) {
			return "", false
		}
		n, err := strconv.ParseUint(v[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(n))
		i += 2
	}
	out := b.String()
	return out, commentEscape(out) == v // the one form commentEscape writes
}

// legacyPoint is a point id (sweep.PointID: 12 hex digits), the last part of the name in the
// comments specsweep wrote before jobComment (specsweep:specsweep.SWEEP.POINT).
var legacyPoint = regexp.MustCompile(`^[0-9a-f]{12}$`)

// jobOf reads a job's comment: the point of the sweep it was submitted for, ok false when it is no
// job of this sweep (another sweep's, a job specsweep did not make, a comment it cannot parse).
// The comment must be exactly what jobComment writes for this sweep; a comment of the earlier form
// (specsweep:specsweep.SWEEP.POINT) counts when, read back with POINT a point id, its SWEEP is
// this sweep's name as that form wrote it.
func (s *Slurm) jobOf(comment string) (point string, ok bool) {
	if rest, ok := strings.CutPrefix(comment, "specsweep:sweep="); ok {
		sw, pt, ok := strings.Cut(rest, ":point=")
		if !ok || sw != commentEscape(s.o.Sweep) || strings.Contains(pt, ":") {
			return "", false
		}
		return commentUnescape(pt)
	}
	if rest, ok := strings.CutPrefix(comment, "specsweep:specsweep."); ok {
		i := strings.LastIndexByte(rest, '.')
		if i < 0 || !legacyPoint.MatchString(rest[i+1:]) || rest[:i] != reJobName.ReplaceAllString(s.o.Sweep, "_") {
			return "", false
		}
		return rest[i+1:], true
	}
	return "", false
}

// Slot is the handle of the cluster's k-th job in flight (k from 0).
func (s *Slurm) Slot(k int) *SlurmSlot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl := s.slots[k]; sl != nil {
		return sl
	}
	sl := &SlurmSlot{s: s, k: k}
	s.slots[k] = sl
	return sl
}

// Start implements Host: slot 0's.
func (s *Slurm) Start(ctx context.Context, l Launch) (Instance, error) {
	return s.Slot(0).Start(ctx, l)
}

// outputDir resolves (and creates) the output directory on the login node, once.
func (s *Slurm) outputDir(ctx context.Context) (string, error) {
	s.mu.Lock()
	dir := s.outDir
	s.mu.Unlock()
	if dir != "" {
		return dir, nil
	}
	out, err := s.sh(ctx, "cd && mkdir -p -- "+ShellQuote(s.o.OutputDir)+" && cd -- "+ShellQuote(s.o.OutputDir)+" && pwd -P", nil, 30*time.Second)
	if err != nil {
		return "", fmt.Errorf("slurm: the output directory %s on %s: %w", s.o.OutputDir, s.o.Name, err)
	}
	dir = strings.TrimSpace(string(out.Stdout))
	if !strings.HasPrefix(dir, "/") || strings.ContainsAny(dir, " \t\n%") {
		return "", fmt.Errorf("slurm: the output directory %q on %s must be an absolute path without spaces or %%", dir, s.o.Name)
	}
	s.mu.Lock()
	s.outDir = dir
	s.mu.Unlock()
	return dir, nil
}

// queued lists the sweep's jobs in the queue (pending, running, completing): id -> name. Only the
// login user's jobs are listed (a job of another user is never cancelled, even by root), and of
// those only the ones whose comment is the sweep's (jobOf): not a job whose name merely looks like
// one, nor another sweep's whose name starts with this one's.
func (s *Slurm) queued(ctx context.Context) (map[string]string, error) {
	out, err := s.sh(ctx, "squeue -h -u \"$(id -un)\" -t PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED,REQUEUED -o '%i|%k'", nil, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("slurm: listing the jobs of %s: %w", s.o.Name, err)
	}
	return s.parseQueue(string(out.Stdout)), nil
}

// parseQueue reads squeue's "ID|COMMENT" lines: the sweep's jobs, id -> name. The id comes first
// (digits only: specsweep submits no arrays) and the comment is the rest of the line, whole.
func (s *Slurm) parseQueue(out string) map[string]string {
	jobs := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		id, comment, ok := strings.Cut(strings.TrimRight(l, "\r"), "|")
		if !ok || id == "" || strings.Trim(id, "0123456789") != "" {
			continue
		}
		if point, ok := s.jobOf(comment); ok {
			jobs[id] = s.jobName(point)
		}
	}
	return jobs
}

// cancel cancels jobs and waits (bounded) until none is in the queue any more.
func (s *Slurm) cancel(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := s.sh(ctx, "scancel -- "+shellJoin(ids), nil, 30*time.Second); err != nil {
		return fmt.Errorf("slurm: scancel %s: %w", strings.Join(ids, " "), err)
	}
	deadline := s.o.Clock.Now().Add(2 * time.Minute)
	for {
		left, err := s.queued(ctx)
		if err != nil {
			return err
		}
		n := 0
		for _, id := range ids {
			if _, ok := left[id]; ok {
				n++
			}
		}
		if n == 0 {
			return nil
		}
		if s.o.Clock.Now().After(deadline) {
			return fmt.Errorf("slurm: %d cancelled job(s) still in the queue after 2 min", n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.o.Clock.After(s.o.Poll):
		}
	}
}

// sweepLeftovers cancels, once, the jobs of the sweep a killed specsweep left (none of this
// process's slots runs them).
func (s *Slurm) sweepLeftovers(ctx context.Context) error {
	// One sweep at a time, and every slot's first Start waits for it: a job a slot submitted
	// meanwhile would look like a leftover.
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	s.mu.Lock()
	swept := s.swept
	mine := map[string]bool{}
	for _, sl := range s.slots {
		if id := sl.jobID(); id != "" {
			mine[id] = true
		}
	}
	s.mu.Unlock()
	if swept {
		return nil
	}
	jobs, err := s.queued(ctx)
	if err != nil {
		return err
	}
	var ids []string
	for id, name := range jobs {
		if !mine[id] {
			ids = append(ids, id)
			if s.o.Event != nil {
				s.o.Event("stopped_leftover", fmt.Sprintf("job %s (%s) of an earlier run: cancelled", id, name))
			}
		}
	}
	if err := s.cancel(ctx, ids); err != nil {
		return err
	}
	s.mu.Lock()
	s.swept = true
	s.mu.Unlock()
	return nil
}

// Restore implements Host: every job of the sweep is cancelled; nothing else was changed.
func (s *Slurm) Restore(ctx context.Context) error {
	jobs, err := s.queued(ctx)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	return s.cancel(ctx, ids)
}

// Leftovers lists the sweep's jobs still in the queue ("job 123 specsweep.NAME.POINT").
func (s *Slurm) Leftovers(ctx context.Context) ([]string, error) {
	jobs, err := s.queued(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for id, name := range jobs {
		out = append(out, "job "+id+" "+name)
	}
	return out, nil
}

// Provenance implements Host: the cluster used as one host runs its points in slot 0 (Start), so
// theirs is slot 0's: the job, its node and GPUs, beside the cluster's Slurm version. (It was the
// version alone, so a cluster of max_jobs 1 recorded no job nor node.)
func (s *Slurm) Provenance(ctx context.Context) (Provenance, error) { return s.Slot(0).Provenance(ctx) }

// clusterProvenance is what every point on the cluster shares: the driver and the Slurm version.
func (s *Slurm) clusterProvenance(ctx context.Context) (Provenance, error) {
	p := Provenance{Driver: sweep.DriverSlurm}
	out, err := s.sh(ctx, "scontrol --version", nil, 15*time.Second)
	if err != nil {
		return p, err
	}
	p.SlurmVersion = strings.TrimSpace(string(out.Stdout))
	return p, nil
}

// killWait is the cluster's KillWait (scontrol show config; cached): how long after scancel's SIGTERM
// Slurm sends SIGKILL. 0 when it cannot be read.
func (s *Slurm) killWait(ctx context.Context) time.Duration {
	s.mu.Lock()
	k := s.kill
	s.mu.Unlock()
	if k > 0 {
		return k
	}
	out, err := s.sh(ctx, "scontrol show config | grep -m1 '^KillWait'", nil, 15*time.Second)
	if err != nil {
		return 0
	}
	// "KillWait                = 30 sec"
	_, v, _ := strings.Cut(string(out.Stdout), "=")
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 {
		return 0
	}
	k = time.Duration(n) * time.Second
	s.mu.Lock()
	s.kill = k
	s.mu.Unlock()
	return k
}

// nodeAddr is the address of node, from scontrol (cached).
func (s *Slurm) nodeAddr(ctx context.Context, node string) (string, error) {
	s.mu.Lock()
	a := s.addrs[node]
	s.mu.Unlock()
	if a != "" {
		return a, nil
	}
	out, err := s.sh(ctx, "scontrol show node -o -- "+ShellQuote(node), nil, 15*time.Second)
	if err != nil {
		return "", fmt.Errorf("slurm: the address of node %s: %w", node, err)
	}
	a = scontrolFields(string(out.Stdout))["NodeAddr"]
	if a == "" {
		a = node
	}
	s.mu.Lock()
	s.addrs[node] = a
	s.mu.Unlock()
	return a, nil
}

// doctorSlurm checks a cluster at its login node (connected as c): the Slurm commands, the partition
// and its nodes' GPUs, the output directory, and jobs of the sweep left in the queue.
func doctorSlurm(ctx context.Context, sh loginShell, t DoctorTarget) []Check {
	var out []Check
	add := func(name string, st CheckStatus, format string, a ...any) {
		out = append(out, Check{Host: t.Name, Name: name, Status: st, Detail: fmt.Sprintf(format, a...)})
	}
	o := SlurmOptions{}
	if t.Slurm != nil {
		o = *t.Slurm
	}
	s := newSlurm(o, sh)
	if o.OutputDir == "" {
		s.o.OutputDir = "specsweep-jobs"
	}
	run := func(script string) (string, error) {
		res, err := s.sh(ctx, script, nil, 8*time.Second)
		return strings.TrimSpace(string(res.Stdout)), err
	}
	ver, err := run("for c in sbatch squeue scontrol scancel; do command -v $c >/dev/null || echo missing $c; done; scontrol --version; id -un")
	user := ""
	if i := strings.LastIndexByte(ver, '\n'); i >= 0 {
		ver, user = ver[:i], ver[i+1:]
	}
	switch {
	case err != nil:
		add("slurm", CheckFail, "%v", err)
		return out
	case strings.Contains(ver, "missing"):
		add("slurm", CheckFail, "%s on the login node's PATH for %s", strings.ReplaceAll(ver, "\n", ", "), user)
		return out
	default:
		add("slurm", CheckOK, "%s, as %s", ver, user)
	}
	p := "-p " + ShellQuote(o.Partition)
	if o.Partition == "" {
		p = ""
	}
	nodes, err := run("sinfo -h " + p + " -N -o '%N %t %G'")
	switch {
	case err != nil:
		add("partition", CheckFail, "sinfo: %v", err)
	case nodes == "":
		add("partition", CheckFail, "no node in partition %q", o.Partition)
	default:
		fit, up, all := 0, 0, 0
		for _, l := range strings.Split(nodes, "\n") {
			f := strings.Fields(l)
			if len(f) < 3 {
				continue
			}
			all++
			if !strings.HasPrefix(f[1], "down") && !strings.HasPrefix(f[1], "drain") && !strings.HasSuffix(f[1], "*") {
				up++
			}
			if g := gresGPUs(f[2]); g >= t.GPUs {
				fit++
			}
		}
		st := CheckOK
		if up == 0 || fit == 0 {
			st = CheckFail
		}
		add("partition", st, "%d node(s), %d up, %d with >= %d GPUs (gpus: %d in the spec)", all, up, fit, t.GPUs, t.GPUs)
	}
	if dir, err := s.outputDir(ctx); err != nil {
		add("output_dir", CheckFail, "%v", err)
	} else {
		add("output_dir", CheckOK, "%s (it must be shared with the compute nodes)", dir)
	}
	if o.Sweep != "" {
		left, err := s.Leftovers(ctx)
		switch {
		case err != nil:
			add("leftovers", CheckWarn, "cannot list the sweep's jobs: %v", err)
		case len(left) == 0:
			add("leftovers", CheckOK, "no job of the sweep in the queue")
		default:
			add("leftovers", CheckFail, "in the queue (expected only while a sweep runs): %s; run `specsweep restore SPEC` to cancel them", strings.Join(left, ", "))
		}
	}
	return out
}

// gresGPUs is the GPU count of a node's Gres (gpu:4, gpu:a100:8(S:0-1)), 0 for none.
func gresGPUs(g string) int {
	n := 0
	for _, part := range strings.Split(g, ",") {
		if !strings.HasPrefix(part, "gpu:") {
			continue
		}
		fs := strings.Split(strings.SplitN(part, "(", 2)[0], ":")
		if v, err := strconv.Atoi(fs[len(fs)-1]); err == nil {
			n += v
		}
	}
	return n
}

// SlurmSlot runs one job at a time on the cluster.
type SlurmSlot struct {
	s *Slurm
	k int

	mu      sync.Mutex
	current *jobInstance
}

// Name implements Host.
func (sl *SlurmSlot) Name() string { return sl.s.o.Name }

// Close implements Host: the cluster's connection stays open.
func (sl *SlurmSlot) Close() error { return nil }

// Restore implements Host: the slot's job, if one is still in the queue, is cancelled.
func (sl *SlurmSlot) Restore(ctx context.Context) error {
	if id := sl.liveJob(); id != "" {
		return sl.s.cancel(ctx, []string{id})
	}
	return nil
}

func (sl *SlurmSlot) jobID() string {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.current == nil {
		return ""
	}
	return sl.current.proc.id
}

// liveJob is the slot's job unless its last state read was final (nothing to cancel).
func (sl *SlurmSlot) liveJob() string {
	sl.mu.Lock()
	in := sl.current
	sl.mu.Unlock()
	if in == nil {
		return ""
	}
	in.proc.mu.Lock()
	last := in.proc.last
	in.proc.mu.Unlock()
	if last["JobState"] != "" && !jobStateOf(last, sl.s.o.Clock.Now()).Running() {
		return ""
	}
	return in.proc.id
}

// Provenance implements Host: the node, the job, its GPUs and the Slurm version.
func (sl *SlurmSlot) Provenance(ctx context.Context) (Provenance, error) {
	p, err := sl.s.clusterProvenance(ctx)
	sl.mu.Lock()
	in := sl.current
	sl.mu.Unlock()
	if in == nil {
		return p, err
	}
	p.SlurmJob = in.proc.id
	p.Argv = in.launch.Argv
	out, jerr := sl.s.sh(ctx, "scontrol show job -d -o -- "+ShellQuote(in.proc.id), nil, 15*time.Second)
	if jerr == nil {
		f := scontrolFields(string(out.Stdout))
		p.Hostname = f["BatchHost"]
		sub, serr := time.ParseInLocation(scontrolTime, f["SubmitTime"], time.Local)
		start, terr := time.ParseInLocation(scontrolTime, f["StartTime"], time.Local)
		if serr == nil && terr == nil && !start.Before(sub) {
			q := start.Sub(sub).Seconds()
			p.SlurmQueued = &q
		}
		p.SlurmGPUs = f["GRES"]
		if p.SlurmGPUs == "" {
			p.SlurmGPUs = f["JOB_GRES"]
		}
	}
	if in.inner != nil {
		p.EngineVer = in.inner.engineVersion(ctx)
	}
	if in.nodes > 1 && jerr == nil {
		p.Ranks, p.DistInit = sl.rankProvenance(ctx, in, scontrolFields(string(out.Stdout))["NodeList"])
	}
	return p, errors.Join(err, jerr)
}

// rankProvenance is where each rank of a job over several nodes ran (its nodes in allocation order,
// SLURM_NODEID's), with NCCL's transport from the lines NCCL prefixes with the node's hostname, and
// the --dist-init-addr the job printed.
func (sl *SlurmSlot) rankProvenance(ctx context.Context, in *jobInstance, nodeList string) ([]RankProvenance, string) {
	nodes, err := in.nodeNames(ctx, nodeList)
	if err != nil {
		return nil, ""
	}
	lines, _ := in.Logs(ctx)
	dist := ""
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, distInitLine); ok {
			dist = v
			break
		}
	}
	var ranks []RankProvenance
	for r, node := range nodes {
		rp := RankProvenance{Rank: r, Node: node, Hostname: node, Argv: in.launch.Argv}
		rp.Address, _ = sl.s.nodeAddr(ctx, node)
		var own []string
		for _, l := range lines {
			if strings.HasPrefix(l, node+":") {
				own = append(own, l)
			}
		}
		rp.Transport = NCCLTransport(own)
		ranks = append(ranks, rp)
	}
	return ranks, dist
}

// Start implements Host: the point's job is submitted (a job of the point that a killed run left is
// cancelled first); the instance follows it from pending to running to ready.
func (sl *SlurmSlot) Start(ctx context.Context, l Launch) (Instance, error) {
	l = l.withDefaults()
	if err := l.Validate(); err != nil {
		return nil, &Failure{Class: ClassBadArgs, Detail: "invalid launch: " + err.Error(), Err: err}
	}
	s := sl.s
	if err := s.sweepLeftovers(ctx); err != nil {
		return nil, wrapUnreachable(err)
	}
	if prev := sl.liveJob(); prev != "" {
		if err := s.cancel(ctx, []string{prev}); err != nil {
			return nil, wrapUnreachable(err)
		}
	}
	dir, err := s.outputDir(ctx)
	if err != nil {
		return nil, wrapUnreachable(err)
	}
	name := s.jobName(l.Tag)
	outFile := dir + "/" + name + ".%j.out"
	script, err := jobScript(s.o, l, name, s.jobComment(l.Tag), outFile)
	if err != nil {
		return nil, &Failure{Class: ClassBadArgs, Detail: "invalid launch: " + err.Error(), Err: err}
	}
	out, err := s.sh(ctx, "sbatch --parsable", script, 60*time.Second)
	if err != nil {
		var ee *ExitError
		if errors.As(err, &ee) {
			// Slurm refused the job as asked (a partition, an account, more GPUs than a node has).
			return nil, &Failure{Class: ClassBadArgs, Detail: "sbatch refused the job: " + firstLineOf(ee.Out.Stderr),
				Evidence: strings.Split(strings.TrimSpace(string(ee.Out.Stderr)), "\n"), Err: err}
		}
		return nil, wrapUnreachable(fmt.Errorf("slurm: sbatch on %s: %w", s.o.Name, err))
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(out.Stdout)), ";")
	if _, err := strconv.Atoi(id); err != nil {
		return nil, fmt.Errorf("slurm: sbatch printed %q, not a job id", out.Stdout)
	}
	nodes, _ := s.o.jobNodes(l) // jobScript read it
	p := &jobProc{s: s, id: id, file: strings.ReplaceAll(outFile, "%j", id), kill: l.Kill, nodes: nodes}
	now := s.o.Clock.Now()
	in := &jobInstance{slot: sl, proc: p, launch: l, submitted: now, pending: now, nodes: nodes}
	sl.mu.Lock()
	sl.current = in
	sl.mu.Unlock()
	if s.o.Event != nil {
		s.o.Event("job_submitted", fmt.Sprintf("job %s (%s) submitted to %s", id, name, s.o.Name))
	}
	return in, nil
}

func firstLineOf(b []byte) string {
	l, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return l
}

// jobScript is the batch script of a launch: sbatch options as #SBATCH lines (read by sbatch, never
// by a shell), the environment, then the server in place of the shell (it gets scancel's signals).
func jobScript(o SlurmOptions, l Launch, name, comment, outFile string) ([]byte, error) {
	tp, err := launchTP(l)
	if err != nil {
		return nil, err
	}
	k, err := o.jobNodes(l)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("#!/bin/sh\n")
	opt := func(s string) { b.WriteString("#SBATCH " + s + "\n") }
	opt("--job-name=" + name)
	opt("--comment=" + comment)
	opt("--nodes=" + strconv.Itoa(k))
	opt("--ntasks=" + strconv.Itoa(k)) // one per node (srun asks for that too)
	opt("--gres=gpu:" + strconv.Itoa(tp/k))
	opt("--output=" + outFile)
	opt("--no-requeue")
	if o.Partition != "" {
		opt("--partition=" + o.Partition)
	}
	if o.Account != "" {
		opt("--account=" + o.Account)
	}
	if o.TimeLimit > 0 {
		opt("--time=" + strconv.Itoa(int((o.TimeLimit+time.Minute-1)/time.Minute)))
	}
	for _, a := range o.SbatchArgs {
		opt(a)
	}
	b.WriteString("# Written by specsweep for one sweep point (docs/slurm.md).\n")
	if k > 1 {
		return multiNodeScript(&b, o, l, k), nil
	}
	writeJobFiles(&b, l.Files)
	writeJobEnv(&b, l.Env)
	b.WriteString("exec " + shellJoin(ExpandArgv(l.Argv, l.Env)) + "\n")
	return b.Bytes(), nil
}

// distInitLine starts the line a multi-node job prints with its --dist-init-addr (provenance).
const distInitLine = "specsweep: dist-init-addr "

// multiNodeScript ends the script of a job over k nodes: the environment, rank 0's node (the job's
// first, where the batch script runs) and a port free there, then srun starts one task per node,
// each writing the launch's files on its node and running the server as rank $SLURM_NODEID. srun's
// --kill-on-bad-exit ends every rank when one fails, so the job's state follows the first failure.
func multiNodeScript(b *bytes.Buffer, o SlurmOptions, l Launch, k int) []byte {
	writeJobEnv(b, l.Env)
	b.WriteString("specsweep_head=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n")
	if o.DistInitPort > 0 {
		b.WriteString("specsweep_port=" + strconv.Itoa(o.DistInitPort) + "\n")
	} else {
		// The first run of distInitPorts ports from 29500 that nothing listens on here (state 0A of
		// /proc/net/tcp, ports in hex): torch's store binds the first, SGLang's dp attention the rest.
		b.WriteString("specsweep_port=" + strconv.Itoa(distInitFirst) + "\n" +
			"while [ \"$specsweep_port\" -le " + strconv.Itoa(65535-distInitPorts+1) + " ]; do\n" +
			"\tspecsweep_busy=\n" +
			"\tfor specsweep_i in 0 1 2 3 4 5; do\n" +
			"\t\tif grep -q \":$(printf '%04X' $((specsweep_port + specsweep_i))) [0-9A-F]*:[0-9A-F]* 0A \" /proc/net/tcp /proc/net/tcp6 2>/dev/null; then specsweep_busy=1; break; fi\n" +
			"\tdone\n" +
			"\t[ -z \"$specsweep_busy\" ] && break\n" +
			"\tspecsweep_port=$((specsweep_port + specsweep_i + 1))\n" +
			"done\n")
	}
	b.WriteString("SPECSWEEP_DIST_INIT=\"$specsweep_head:$specsweep_port\"\nexport SPECSWEEP_DIST_INIT\n")
	b.WriteString("echo \"" + distInitLine + "$SPECSWEEP_DIST_INIT\"\n")
	var rank bytes.Buffer
	writeJobFiles(&rank, l.Files)
	rank.WriteString("exec " + shellJoin(ExpandArgv(l.Argv, l.Env)) + " --nnodes " + strconv.Itoa(k) +
		" --node-rank \"$SLURM_NODEID\" --dist-init-addr \"$SPECSWEEP_DIST_INIT\"\n")
	b.WriteString("exec srun --nodes=" + strconv.Itoa(k) + " --ntasks-per-node=1 --kill-on-bad-exit=1 sh -c " + ShellQuote(rank.String()) + "\n")
	return b.Bytes()
}

// writeJobEnv exports the launch's environment (but CUDA_VISIBLE_DEVICES, Slurm's for the job's GPUs).
func writeJobEnv(b *bytes.Buffer, env map[string]string) {
	keys := make([]string, 0, len(env))
	for k := range env {
		if k == "CUDA_VISIBLE_DEVICES" {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString("export " + k + "=" + ShellQuote(env[k]) + "\n")
	}
}

// fileWriteFailed starts the line a job prints when it cannot write a launch's file (the path
// follows); the classification reads it as launch_failed.
const fileWriteFailed = "specsweep: cannot write launch file "

// fileEnd ends a file's base64 here-document: '-' is no base64 character, so no line of the data
// can end it early.
const fileEnd = "SPECSWEEP-FILE-END"

// writeJobFiles writes the script lines that write the launch's files on the job's node (the login
// node's file system may not be the node's), before the server starts: each file's data as base64
// in a here-document, decoded into a temp file in its directory (created 0755), made 0644 and moved
// over the path. A file that cannot be written ends the job with fileWriteFailed's line and exit
// 203 (systemd's status for a program it could not start): the point's launch_failed.
func writeJobFiles(b *bytes.Buffer, files []File) {
	if len(files) == 0 {
		return
	}
	b.WriteString("specsweep_file() (\n" +
		"\tumask 022\n" +
		"\tmkdir -p -- \"$1\" && t=$(mktemp -- \"$1/.specsweep-file.XXXXXX\") || exit 1\n" +
		"\tbase64 -d >\"$t\" && chmod 644 -- \"$t\" && mv -f -- \"$t\" \"$2\" || { rm -f -- \"$t\"; exit 1; }\n" +
		")\n")
	for _, f := range files {
		q := ShellQuote(f.Path)
		b.WriteString("specsweep_file " + ShellQuote(filepath.Dir(f.Path)) + " " + q + " <<'" + fileEnd + "' || { printf '%s%s\\n' " +
			ShellQuote(fileWriteFailed) + " " + q + " >&2; exit 203; }\n")
		enc := base64.StdEncoding.EncodeToString(f.Data)
		for len(enc) > 76 {
			b.WriteString(enc[:76] + "\n")
			enc = enc[76:]
		}
		if enc != "" {
			b.WriteString(enc + "\n")
		}
		b.WriteString(fileEnd + "\n")
	}
}

// scontrolTime is how scontrol writes times (the login node's local time).
const scontrolTime = "2006-01-02T15:04:05"

// scontrolFields parses scontrol's one-line KEY=VALUE output (values hold no spaces in the fields
// read here: specsweep's own names and comments have none).
func scontrolFields(s string) map[string]string {
	f := map[string]string{}
	for _, w := range strings.Fields(s) {
		if k, v, ok := strings.Cut(w, "="); ok {
			if _, dup := f[k]; !dup {
				f[k] = v
			}
		}
	}
	return f
}

// jobProc is a job as the shared instance code follows a server process.
type jobProc struct {
	s     *Slurm
	id    string
	file  string // the job's output file on the login node
	kill  bool   // the stop is SIGKILL at once (Launch.Kill)
	nodes int    // the nodes the job spans (its ranks are step 0 when more than one)

	mu      sync.Mutex
	off     int64 // bytes of the output read
	partial []byte
	last    map[string]string // the last fields read
}

var _ serverProc = (*jobProc)(nil)

const logSep = "@@specsweep-output@@"

// read reads the job's fields and the output that is new.
func (p *jobProc) read(ctx context.Context) (map[string]string, []string, error) {
	p.mu.Lock()
	off := p.off
	p.mu.Unlock()
	out, err := p.s.sh(ctx, "scontrol show job -o -- "+ShellQuote(p.id)+" 2>&1; echo "+logSep+"; tail -c +"+strconv.FormatInt(off+1, 10)+
		" -- "+ShellQuote(p.file)+" 2>/dev/null | head -c 1000000; true", nil, 15*time.Second)
	if err != nil {
		return nil, nil, err
	}
	head, body, _ := bytes.Cut(out.Stdout, []byte(logSep+"\n"))
	fields := scontrolFields(string(head))
	p.mu.Lock()
	defer p.mu.Unlock()
	if fields["JobState"] == "" {
		// Purged from slurmctld's memory (MinJobAge): the last state read stands.
		fields = p.last
	} else {
		p.last = fields
	}
	p.off += int64(len(body))
	data := append(p.partial, body...)
	var lines []string
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, strings.TrimRight(string(data[:i]), "\r"))
		data = data[i+1:]
	}
	p.partial = append([]byte(nil), data...)
	return fields, lines, nil
}

func (p *jobProc) poll(ctx context.Context) (State, []string, error) {
	f, lines, err := p.read(ctx)
	if err != nil {
		return State{}, lines, err
	}
	st := jobStateOf(f, p.s.o.Clock.Now())
	if lost := nodeLost(f); lost != "" {
		return st, lines, &UnreachableError{Addr: p.s.o.Name, Err: errors.New(lost)}
	}
	return st, lines, nil
}

func (p *jobProc) follow(ctx context.Context, wake func()) (stop func(), watching <-chan struct{}) {
	return func() {}, nil
}

// sendStop: scancel, the job's cancel: slurmd sends SIGTERM, then SIGKILL after KillWait. A kill
// (Launch.Kill) cannot be that cancel: on Slurm 22.05 `scancel --signal=KILL`, with or without
// --full, is the same SIGTERM and KillWait (a server ignoring SIGTERM ended 15 s later). It signals
// the server's own step, which slurmd kills at once: the batch step (the server, exec'd by the
// script) of a one-node job; step 0, srun's ranks, of a job over several nodes (--batch would kill
// srun alone and leave the ranks to the cancel). The job then ends by itself and frees its nodes
// (docs/slurm.md, "Killed at the stop"). Without that step (srun has not started the ranks yet)
// the job is cancelled.
func (p *jobProc) sendStop(ctx context.Context) error {
	script := "scancel -- " + ShellQuote(p.id)
	if p.kill {
		target := "--batch -- " + ShellQuote(p.id)
		if p.nodes > 1 {
			target = "-- " + ShellQuote(p.id+".0")
		}
		script = "scancel --signal=KILL " + target + " 2>/dev/null || " + script
	}
	_, err := p.s.sh(ctx, script, nil, 30*time.Second)
	return err
}

func (p *jobProc) afterStop(ctx context.Context) {}

// nodeLost says why the job ended with its node (NODE_FAIL, BOOT_FAIL, PREEMPTED: host trouble,
// the point is retried), or "".
func nodeLost(f map[string]string) string {
	switch s := f["JobState"]; s {
	case "NODE_FAIL", "BOOT_FAIL", "PREEMPTED", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED":
		return fmt.Sprintf("job %s %s on node %s (Reason=%s)", f["JobId"], s, f["NodeList"], f["Reason"])
	}
	return ""
}

// jobStateOf maps a job's state, read at at, to the unit states the classification reads
// (docs/slurm.md).
func jobStateOf(f map[string]string, at time.Time) State {
	st := State{At: at, InvocationID: f["JobId"], LoadState: "loaded"}
	code, sig := exitCode(f["ExitCode"])
	set := func(active, sub, result string) { st.ActiveState, st.SubState, st.Result = active, sub, result }
	switch f["JobState"] {
	case "PENDING", "CONFIGURING", "REQUEUED":
		set("activating", "pending", "")
	case "RUNNING", "SUSPENDED":
		set("active", "running", "")
	case "COMPLETING", "SIGNALING", "STAGE_OUT":
		set("deactivating", "stop-sigterm", "")
	case "COMPLETED":
		set("inactive", "dead", "success")
	case "OUT_OF_MEMORY":
		set("failed", "failed", "oom-kill")
	case "TIMEOUT", "DEADLINE":
		set("failed", "failed", "timeout")
	case "CANCELLED":
		set("failed", "failed", "signal")
		if sig == 0 {
			sig = 15
		}
	case "":
		set("", "", "")
	default: // FAILED, NODE_FAIL, BOOT_FAIL, PREEMPTED, ...
		set("failed", "failed", "exit-code")
	}
	switch {
	case st.Result == "timeout":
		// The job's time limit ended it: left without an exit code, a failure's detail says "result timeout".
	case sig != 0:
		st.ExecMainCode, st.ExecMainStatus = CodeKilled, sig
		if st.Result == "exit-code" {
			st.Result = "signal"
		}
	case !st.Running() && st.ActiveState != "":
		st.ExecMainCode, st.ExecMainStatus = CodeExited, code
	}
	return st
}

// exitCode reads scontrol's ExitCode=CODE:SIGNAL.
func exitCode(v string) (code, sig int) {
	a, b, _ := strings.Cut(v, ":")
	code, _ = strconv.Atoi(a)
	sig, _ = strconv.Atoi(b)
	return code, sig
}

// jobInstance follows a job: pending (its reason reported, no readiness clock yet), then running on
// a node, where the shared instance (inner) takes over, its ready_timeout counted from the job's start.
type jobInstance struct {
	slot      *SlurmSlot
	proc      *jobProc
	launch    Launch
	submitted time.Time
	nodes     int // the nodes the job spans, one rank each

	mu      sync.Mutex
	inner   *instance
	lines   []string  // output seen before the job ran
	pending time.Time // the last poll that saw the job pending (or its submission)
	names   []string  // the job's nodes in allocation order (nodeNames), once read
}

// nodeNames are the job's nodes in allocation order (SLURM_NODEID's), read once from its NodeList.
func (j *jobInstance) nodeNames(ctx context.Context, nodeList string) ([]string, error) {
	j.mu.Lock()
	names := j.names
	j.mu.Unlock()
	if names != nil {
		return names, nil
	}
	out, err := j.slot.s.sh(ctx, "scontrol show hostnames -- "+ShellQuote(nodeList), nil, 15*time.Second)
	if err != nil {
		return nil, err
	}
	names = strings.Fields(string(out.Stdout))
	j.mu.Lock()
	j.names = names
	j.mu.Unlock()
	return names, nil
}

var _ Instance = (*jobInstance)(nil)

func (j *jobInstance) ID() string { return "slurm-" + j.proc.id }

func (j *jobInstance) getInner() *instance {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.inner
}

// WaitReady: see Instance. A pending job is reported (event job_pending, each reason once), never
// timed out by ready_timeout: that counts from the job's start.
func (j *jobInstance) WaitReady(ctx context.Context) (Ready, error) {
	s := j.slot.s
	reason := ""
	for {
		f, lines, err := j.proc.read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return Ready{}, ctx.Err()
			}
			return Ready{}, wrapUnreachable(err)
		}
		j.mu.Lock()
		j.lines = append(j.lines, lines...)
		j.mu.Unlock()
		if lost := nodeLost(f); lost != "" {
			return Ready{}, unreachable(&UnreachableError{Addr: s.o.Name, Err: errors.New(lost)}, jobStateOf(f, s.o.Clock.Now()))
		}
		switch {
		case f["JobState"] == "PENDING" || f["JobState"] == "CONFIGURING":
			j.mu.Lock()
			j.pending = s.o.Clock.Now()
			j.mu.Unlock()
			if r := f["Reason"]; r != reason && s.o.Event != nil {
				s.o.Event("job_pending", fmt.Sprintf("job %s pending (Reason=%s) since %v", j.proc.id, r, s.o.Clock.Now().Sub(j.submitted).Round(time.Second)))
			}
			reason = f["Reason"]
		default:
			// Running (or already ended): the shared instance reads the rest.
			node := f["BatchHost"]
			if node == "" {
				node = f["NodeList"]
			}
			addr, err := s.nodeAddr(ctx, node)
			if err != nil {
				return Ready{}, wrapUnreachable(err)
			}
			in := j.start(addr, f)
			if j.nodes < 2 {
				return in.WaitReady(ctx)
			}
			r, err := j.waitRanks(ctx, in, f["NodeList"])
			return r, j.rankNamed(ctx, err)
		}
		select {
		case <-ctx.Done():
			return Ready{}, ctx.Err()
		case <-s.o.Clock.After(s.o.Poll):
		}
	}
}

// start makes the shared instance of the running job, on node address addr.
func (j *jobInstance) start(addr string, f map[string]string) *instance {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.inner != nil {
		return j.inner
	}
	// The start: scontrol's StartTime has whole seconds, so it may be up to a second early; the last
	// poll that saw the job pending bounds it from below.
	clock := j.slot.s.o.Clock
	started := clock.Now()
	if t, err := time.ParseInLocation(scontrolTime, f["StartTime"], time.Local); err == nil && t.Before(started) && started.Sub(t) < time.Hour {
		started = t
	}
	if j.pending.After(started) {
		started = j.pending
	}
	hp := net.JoinHostPort(addr, strconv.Itoa(j.launch.Port))
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 2, IdleConnTimeout: 30 * time.Second, DisableCompression: true}}
	in := newInstance(j.proc, clock, j.proc.id, j.launch, started, client, "http://"+hp, hp)
	in.appendLines(j.lines)
	j.inner = in
	return in
}

// HostLost reports an error when the job's node does not answer at all on the server's port (a
// timeout, no route): the node is gone, not the server, which would refuse the connection.
func (j *jobInstance) HostLost(ctx context.Context) error {
	addr := j.Address()
	if addr == "" {
		return nil
	}
	d := net.Dialer{Timeout: 3 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.Close()
		return nil
	}
	if errors.Is(err, syscall.ECONNREFUSED) || ctx.Err() != nil {
		return nil
	}
	return &UnreachableError{Addr: addr, Err: fmt.Errorf("the node of job %s does not answer: %w", j.proc.id, err)}
}

// errJobLog: a job's output file is read at the job's polls, not offered as a sequence during load
// (the accept length comes from the server's metrics).
var errJobLog = errors.New("slurm: a job's log is not followed during load")

// LogMark implements Instance: not offered (errJobLog).
func (j *jobInstance) LogMark(context.Context) (int, error) { return 0, errJobLog }

// LogsSince implements Instance: not offered (errJobLog).
func (j *jobInstance) LogsSince(context.Context, int) ([]string, error) { return nil, errJobLog }

func (j *jobInstance) Check(ctx context.Context) (*Failure, error) {
	if in := j.getInner(); in != nil {
		f, err := in.Check(ctx)
		if f != nil {
			named, _ := AsFailure(j.rankNamed(ctx, f))
			return named, err
		}
		return f, err
	}
	return nil, nil
}

// waitRanks waits for a job over several nodes to be ready (rank 0's server) while it watches its
// ranks meet at torch's rendezvous (watchJoin): a rank that does not fails the point after
// server.join_timeout.
func (j *jobInstance) waitRanks(ctx context.Context, in *instance, nodeList string) (Ready, error) {
	names := make([]string, j.nodes)
	for i := range names {
		names[i] = fmt.Sprintf("node %d of the job", i)
	}
	if got, err := j.nodeNames(ctx, nodeList); err == nil && len(got) == j.nodes {
		names = got
	}
	tp, _ := launchTP(j.launch)
	perNode := max(tp/j.nodes, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	joined := make(chan *Failure, 1)
	go func() {
		dist := "the job's first node"
		joined <- watchJoin(wctx, j.slot.s.o.Clock, j.launch.JoinTimeout, func(ctx context.Context) [][]string {
			lines, _ := j.Logs(ctx)
			out := make([][]string, j.nodes)
			for _, l := range lines {
				if v, ok := strings.CutPrefix(l, distInitLine); ok {
					dist = v
				}
				// The ranks share the job's output: a line is its node's by its scheduler's TP rank.
				if m := reTPRank.FindStringSubmatch(l); m != nil {
					if n, _ := strconv.Atoi(m[1]); n/perNode < j.nodes {
						out[n/perNode] = append(out[n/perNode], l)
					}
				}
			}
			return out
		}, names, func() string { return dist })
	}()
	type result struct {
		r   Ready
		err error
	}
	ready := make(chan result, 1)
	go func() {
		r, err := in.WaitReady(wctx)
		ready <- result{r, err}
	}()
	select {
	case res := <-ready:
		cancel()
		<-joined
		return res.r, res.err
	case f := <-joined:
		if f == nil { // ctx ended, or every rank met: readiness decides
			res := <-ready
			return res.r, res.err
		}
		cancel()
		<-ready
		return Ready{}, f
	}
}

// reSrunTask is srun's line for a task that ended badly: "srun: error: NODE: task N: Exited with exit
// code 1" (or "Killed"). With --kill-on-bad-exit every rank ends, in an order srun does not keep
// (the test cluster reported rank 0, which only followed, first).
var reSrunTask = regexp.MustCompile(`^srun: error: (\S+): task (\d+): (.*)`)

// rankNamed names, in a failure of a job over several nodes, the rank (srun's task) and node that
// failed first; other errors pass as they are.
func (j *jobInstance) rankNamed(ctx context.Context, err error) error {
	f, ok := AsFailure(err)
	if !ok || j.nodes < 2 || f.Class == ClassHostUnreachable {
		return err
	}
	lines, _ := j.Logs(ctx)
	tp, _ := launchTP(j.launch)
	followers := peerLostNodes(lines, tp/j.nodes)
	var first []string // the first srun task line, and the first of a rank that did not follow another
	for _, l := range lines {
		m := reSrunTask.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if first == nil {
			first = m
		}
		if task, _ := strconv.Atoi(m[2]); !followers[task] {
			first = m
			break
		}
	}
	if first == nil {
		return err
	}
	g := *f
	g.Detail = fmt.Sprintf("rank %s on %s: %s", first[2], first[1], f.Detail)
	g.Evidence = append(slices.Clone(f.Evidence), first[0])
	return &g
}

// reTPRank is the TP rank in the prefix of an SGLang scheduler's log line ("[2026-12-06 08:53:08
// TP4] ...").
var reTPRank = regexp.MustCompile(`^\[[^\]]* TP(\d+)\]`)

// peerLostNodes are the nodes (task ids: one task per node) whose schedulers logged that a peer went
// away (rePeerLost): followers of another rank's failure. A job's ranks share one output, so a line
// is the rank's of the last line with a TP prefix before it (a traceback's lines follow its
// "[... TPn] Scheduler hit an exception" line); a node holds ranksPerNode TP ranks.
func peerLostNodes(lines []string, ranksPerNode int) map[int]bool {
	out := map[int]bool{}
	cur := -1
	for _, l := range lines {
		if m := reTPRank.FindStringSubmatch(l); m != nil {
			cur, _ = strconv.Atoi(m[1])
		}
		if cur >= 0 && ranksPerNode > 0 && rePeerLost.MatchString(l) {
			out[cur/ranksPerNode] = true
		}
	}
	return out
}

func (j *jobInstance) State(ctx context.Context) (State, error) {
	if in := j.getInner(); in != nil {
		return in.State(ctx)
	}
	st, _, err := j.proc.poll(ctx)
	return st, err
}

func (j *jobInstance) Logs(ctx context.Context) ([]string, error) {
	if in := j.getInner(); in != nil {
		return in.Logs(ctx)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.lines...), nil
}

// Stop: see Instance. scancel: SIGTERM, then Slurm's KillWait, then SIGKILL (a stop that ends in
// SIGKILL is stop_timeout_sigkill, as systemd's stop timeout is for a unit). With Launch.Kill the
// server's step is SIGKILLed at once (jobProc.sendStop): a clean stop.
func (j *jobInstance) Stop(ctx context.Context, progress func(State)) (StopResult, error) {
	in := j.getInner()
	if in == nil {
		clock := j.slot.s.o.Clock
		t0 := clock.Now()
		if err := j.slot.s.cancel(ctx, []string{j.proc.id}); err != nil {
			return StopResult{}, err
		}
		return StopResult{Duration: clock.Now().Sub(t0), Clean: true}, nil
	}
	res, err := in.Stop(ctx, progress)
	if j.launch.Kill {
		// The SIGKILL is the stop's own, never KillWait's, however long a loaded cluster took. A job
		// over several nodes ends with srun's exit code for its killed ranks, 137 (128 + SIGKILL).
		if err == nil && !res.Already && res.Final.ExecMainCode == CodeExited && res.Final.ExecMainStatus == 128+9 {
			res.SIGKILL = true
		}
		return res, err
	}
	// A SIGKILL is Slurm's only once its kill wait passed: SGLang ends its own SIGTERM path with a
	// SIGKILL of itself, which the job's ExitCode (0:9) shows the same way.
	if kw := j.slot.s.killWait(ctx); err == nil && res.SIGKILL && kw > 0 && res.Duration >= slurmKillAfter(kw) {
		res.Class, res.Clean = ClassStopTimeoutSIGKILL, false
	}
	return res, err
}

// slurmKillAfter is how long after a stop began a SIGKILL is Slurm's, for the cluster's KillWait:
// slurmd waits at least 5 s whatever KillWait says, and Slurm counts these in whole seconds, so its
// SIGKILL can land up to a second before the stop has lasted that long (14.9 s measured with
// KillWait=15 on the test cluster, once the stop's scancel was a round trip away): docs/slurm.md.
func slurmKillAfter(killWait time.Duration) time.Duration {
	return max(killWait, 5*time.Second) - time.Second
}

func (j *jobInstance) HTTPClient() *http.Client {
	if in := j.getInner(); in != nil {
		return in.HTTPClient()
	}
	return http.DefaultClient
}

func (j *jobInstance) BaseURL() string {
	if in := j.getInner(); in != nil {
		return in.BaseURL()
	}
	return ""
}

func (j *jobInstance) Address() string {
	if in := j.getInner(); in != nil {
		return in.Address()
	}
	return ""
}
