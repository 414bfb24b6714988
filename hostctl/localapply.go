// Applied configuration on the local driver (`specsweep apply` on a host with driver local): the
// server a detached process of its own, outliving specsweep, its record, rollback record and log
// in a state directory (docs/hostctl.md "Applied configuration", "Local driver").

package hostctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var _ Applier = (*openLocal)(nil)

// ErrAppliedNotRunning is wrapped by a local host's Applied when the applied server's process is
// gone (it returns the record too).
var ErrAppliedNotRunning = errors.New("the applied server is not running")

// The files of a local host's applied configuration, in its state directory.
const (
	localAppliedFile   = "applied.json"        // localApplied, 0600 (the launch's environment)
	localRollbackFile  = "apply-rollback.json" // localRollback, 0600, while an apply is not committed
	localSuspendedFile = "suspended.json"      // a sweep stopped the applied server: its Restore starts it again
	localAppliedLog    = "applied.log"         // the applied server's stdout and stderr, appended, 0600
)

// localApplied is the record of a local host's applied server: what to start it again with, and
// which process it is (the pid and the start time of /proc/PID/stat, so a reused pid is never ours).
type localApplied struct {
	Record AppliedRecord `json:"record"`
	// Launch is the launch as started: its command resolved, its files with their bytes.
	Launch    Launch    `json:"launch"`
	PID       int       `json:"pid"`
	StartTime uint64    `json:"start_time"` // /proc/PID/stat field 22, clock ticks since boot
	StartedAt time.Time `json:"started_at"`
}

// localRollback is a local host's rollback record: the applied configuration before the apply.
type localRollback struct {
	Prev *localApplied `json:"prev,omitempty"`
	// Writing are the files of the apply (and of any apply that died before it).
	Writing   []string  `json:"writing,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	By        string    `json:"by,omitempty"`
}

// stateDir is where the host's applied configuration is kept: Options.StateDir, else
// $XDG_STATE_HOME/specsweep, else ~/.local/state/specsweep; one folder per host name.
func (d *openLocal) stateDir() (string, error) {
	base := d.o.StateDir
	if base == "" {
		getenv := d.o.Getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		if x := getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
			base = filepath.Join(x, "specsweep")
		} else {
			home := getenv("HOME")
			if home == "" {
				var err error
				if home, err = os.UserHomeDir(); err != nil {
					return "", fmt.Errorf("local: no state directory for the applied configuration (set XDG_STATE_HOME or HOME): %w", err)
				}
			}
			base = filepath.Join(home, ".local", "state", "specsweep")
		}
	}
	return filepath.Join(base, stateName(d.h.Name)), nil
}

// stateName is a host name fit for one path element.
func stateName(name string) string {
	s := strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			return c
		}
		return '_'
	}, name)
	if s == "" || s == "." || s == ".." {
		s = "_" + s
	}
	return s
}

func (d *openLocal) statePath(name string) (string, error) {
	dir, err := d.stateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// readState reads the JSON file name of the state directory into v; false when there is none.
func (d *openLocal) readState(name string, v any) (bool, error) {
	p, err := d.statePath(name)
	if err != nil {
		return false, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("local: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("local: %s: %w", p, err)
	}
	return true, nil
}

// writeState writes v as the JSON file name of the state directory, atomically, 0600 (the
// directory made 0700).
func (d *openLocal) writeState(name string, v any) error {
	p, err := d.statePath(name)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("local: the state directory %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+name+".tmp-*") // 0600
	if err != nil {
		return fmt.Errorf("local: cannot write %s: %w", p, err)
	}
	_, err = tmp.Write(encodeJSON(v))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("local: cannot write %s: %w", p, err)
	}
	return nil
}

func (d *openLocal) removeState(names ...string) error {
	for _, n := range names {
		p, err := d.statePath(n)
		if err != nil {
			return err
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("local: %w", err)
		}
	}
	return nil
}

func (d *openLocal) appliedState() (*localApplied, error) {
	var a localApplied
	ok, err := d.readState(localAppliedFile, &a)
	if !ok || err != nil {
		return nil, err
	}
	return &a, nil
}

func (d *openLocal) rollbackState() (*localRollback, error) {
	var rb localRollback
	ok, err := d.readState(localRollbackFile, &rb)
	if !ok || err != nil {
		return nil, err
	}
	return &rb, nil
}

// noSweep refuses while a sweep has stopped the applied server (its marker is there).
func (d *openLocal) noSweep(what string) error {
	p, err := d.statePath(localSuspendedFile)
	if err != nil {
		return err
	}
	if _, err := os.Stat(p); err == nil {
		return fmt.Errorf("%s on %s: %w (%s is there): run `specsweep restore` first", what, d.h.Name, ErrSweepOnHost, p)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("local: %w", err)
	}
	return nil
}

// procStat reads the state letter and the start time (field 22) of /proc/PID/stat.
func procStat(pid int) (state byte, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may hold anything: fields 3.. follow the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unreadable", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unreadable", pid)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unreadable", pid)
	}
	return f[0][0], start, nil
}

// procAlive says whether pid is the process that started at start and has not exited (a zombie
// has).
func procAlive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	st, s, err := procStat(pid)
	return err == nil && s == start && st != 'Z' && st != 'X'
}

func (a *localApplied) running() bool { return a != nil && procAlive(a.PID, a.StartTime) }

// stopApplied stops the recorded applied server if it runs: SIGTERM to its process group,
// SIGKILL after the launch's stop timeout, then waits until it is gone (polling /proc: it may be
// a process of an earlier specsweep, not a child of this one).
func (d *openLocal) stopApplied(ctx context.Context, a *localApplied) error {
	if !a.running() {
		return nil
	}
	clk := d.Local.o.Clock
	if err := syscall.Kill(-a.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("local: stopping the applied server (pid %d): %w", a.PID, err)
	}
	timeout := a.Launch.withDefaults().StopTimeout
	t0 := clk.Now()
	killed := false
	wait := 20 * time.Millisecond
	for a.running() {
		if el := clk.Now().Sub(t0); !killed && el >= timeout {
			_ = syscall.Kill(-a.PID, syscall.SIGKILL)
			killed = true
		} else if killed && el >= timeout+30*time.Second {
			return fmt.Errorf("local: the applied server (pid %d) is still there 30s after SIGKILL", a.PID)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clk.After(wait):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
	// KillMode=control-group: whatever the server left in its group goes too.
	_ = syscall.Kill(-a.PID, syscall.SIGKILL)
	return nil
}

// startApplied starts l as a detached process: its own session (setsid), no parent-death signal,
// stdout and stderr appended to the state directory's log, so it outlives specsweep. The returned
// instance follows it while this process lives (reaping it when it exits); the record says which
// process it is.
func (d *openLocal) startApplied(ctx context.Context, l Launch, rec AppliedRecord) (Instance, *localApplied, error) {
	if err := d.Local.gpuFree(ctx, l); err != nil {
		return nil, nil, err
	}
	for _, f := range l.Files {
		if err := writeLocalFile(f); err != nil {
			return nil, nil, filesFailed(err)
		}
	}
	logPath, err := d.statePath(localAppliedLog)
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return nil, nil, fmt.Errorf("local: the state directory %s: %w", filepath.Dir(logPath), err)
	}
	logf, err := openServerLog(logPath)
	if err != nil {
		return nil, nil, err
	}
	defer logf.Close() // the child has its own descriptor
	tail, err := os.Open(logPath)
	if err != nil {
		return nil, nil, fmt.Errorf("local: %w", err)
	}
	if _, err := tail.Seek(0, io.SeekEnd); err != nil {
		tail.Close()
		return nil, nil, fmt.Errorf("local: %w", err)
	}
	argv := ExpandArgv(l.Argv, l.Env)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	for k, v := range l.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logf, logf // stdin: /dev/null
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		tail.Close()
		return nil, nil, &Failure{Class: ClassLaunchFailed, Detail: "cannot start the server: " + err.Error(), Err: err}
	}
	pid := cmd.Process.Pid
	_, start, err := procStat(pid)
	if err != nil { // it died already (and was not reaped: it is our child): start time unknown
		start = 0
	}
	a := &localApplied{Record: rec, Launch: l, PID: pid, StartTime: start, StartedAt: d.Local.o.Clock.Now().UTC()}
	werr := d.writeState(localAppliedFile, a)

	id := fmt.Sprintf("local-applied-%d", pid)
	host, _ := serverEndpoint(l.Argv, l.Port)
	p := &detachedProc{localProc: &localProc{clock: d.Local.o.Clock, cmd: cmd, pgid: pid, id: id,
		exited: make(chan struct{}), stopTimeout: l.StopTimeout}, tail: tail}
	in := newInstance(p, d.Local.o.Clock, id, l, d.Local.o.Clock.Now(),
		&http.Client{Transport: &http.Transport{MaxIdleConns: 2, IdleConnTimeout: 30 * time.Second, DisableCompression: true}},
		"http://"+hostPort(host, l.Port), hostPort(host, l.Port))
	p.notify = in.notify
	go func() {
		err := cmd.Wait()
		p.readTail(true) // all output read before the exit is visible
		tail.Close()
		p.exit(err)
	}()
	if werr != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return nil, nil, werr
	}
	return in, a, nil
}

// detachedProc is an applied server started by this process: a localProc whose output is read
// from its log file (the server must not write to a pipe that ends with specsweep).
type detachedProc struct {
	*localProc
	tailMu  sync.Mutex
	tail    *os.File
	partial []byte
	dropped int
	closed  bool
}

// readTail reads what the server appended to its log since the last read; final: it has exited
// (a last line without its newline counts).
func (p *detachedProc) readTail(final bool) {
	p.tailMu.Lock()
	defer p.tailMu.Unlock()
	if p.closed {
		return
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := p.tail.Read(buf)
		for b := buf[:n]; len(b) > 0; {
			i := bytes.IndexByte(b, '\n')
			frag := b
			if i >= 0 {
				frag = b[:i]
			}
			keep := max(0, min(len(frag), MaxLogLine-len(p.partial)))
			p.partial = append(p.partial, frag[:keep]...)
			p.dropped += len(frag) - keep
			if i < 0 {
				break
			}
			p.emit()
			b = b[i+1:]
		}
		if n == 0 || err != nil {
			break
		}
	}
	if final {
		if len(p.partial) > 0 || p.dropped > 0 {
			p.emit()
		}
		p.closed = true
	}
}

func (p *detachedProc) emit() {
	s := string(p.partial)
	if p.dropped > 0 {
		s = trimCutRune(s) + fmt.Sprintf(" [line cut: %d more bytes]", p.dropped)
	}
	p.partial, p.dropped = p.partial[:0], 0
	p.log(s)
}

func (p *detachedProc) poll(ctx context.Context) (State, []string, error) {
	p.readTail(false)
	return p.localProc.poll(ctx)
}

// resolve makes a launch's relative command absolute and checks the launch, as Local.Start does.
func (d *openLocal) resolve(l Launch) (Launch, error) { return resolveLocal(l, d.o.SpecDir) }

// Applied implements Applier: the record, and, when its process is gone, the record with an
// error wrapping ErrAppliedNotRunning.
func (d *openLocal) Applied(ctx context.Context) (*AppliedRecord, error) {
	a, err := d.appliedState()
	if err != nil || a == nil {
		return nil, err
	}
	rec := a.Record
	if a.running() {
		return &rec, nil
	}
	why := "it exited or was killed"
	if p, _ := d.statePath(localSuspendedFile); p != "" {
		if _, err := os.Stat(p); err == nil {
			why = "a sweep on the host stopped it; its restore starts it again"
		}
	}
	return &rec, fmt.Errorf("%w: pid %d of %s (%s, point %s of sweep %s) is gone: %s; `specsweep apply` starts one again, `specsweep restore --applied %s` removes it",
		ErrAppliedNotRunning, a.PID, d.h.Name, rec.Label, rec.Point, rec.Sweep, why, d.h.Name)
}

// Apply implements Applier on a local host: the rollback record first, the previous applied
// server stopped, the files written, the launch started detached and recorded.
func (d *openLocal) Apply(ctx context.Context, l Launch, rec AppliedRecord) (Instance, error) {
	l, err := d.resolve(l)
	if err != nil {
		return nil, err
	}
	if rec.AppliedAt.IsZero() {
		rec.AppliedAt = d.Local.o.Clock.Now().UTC()
	}
	if rec.By == "" {
		rec.By = appliedBy()
	}
	rec.Files = filePaths(l.Files)
	rec.WasActive = false // no operator's server on a local host
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	if err := d.noSweep("apply"); err != nil {
		return nil, err
	}
	cur, err := d.appliedState()
	if err != nil {
		return nil, err
	}
	rb, err := d.rollbackState()
	if err != nil {
		return nil, err
	}
	if rb == nil {
		rb = &localRollback{Prev: cur, Writing: rec.Files, CreatedAt: d.Local.o.Clock.Now().UTC(), By: rec.By}
	} else {
		// An apply that died, or one not committed yet: the record of the state before it is kept.
		rb.Writing = union(rb.Writing, rec.Files)
	}
	if err := d.writeState(localRollbackFile, rb); err != nil {
		return nil, err
	}
	if err := d.stopApplied(ctx, cur); err != nil {
		return nil, err
	}
	var before []string
	if rb.Prev != nil {
		before = rb.Prev.Record.Files
	}
	if cur != nil {
		before = union(before, cur.Record.Files)
	}
	if err := removeLocalFiles(without(union(before, rb.Writing), rec.Files)); err != nil {
		return nil, err
	}
	in, _, err := d.startApplied(ctx, l, rec)
	return in, err
}

func removeLocalFiles(paths []string) error {
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("local: %w", err)
		}
	}
	return nil
}

// Rollback implements Applier: the new server stopped, its files removed, the previous record
// put back and its launch started again (none: nothing started), the rollback record removed.
func (d *openLocal) Rollback(ctx context.Context) error {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	rb, err := d.rollbackState()
	if err != nil || rb == nil {
		return err
	}
	if err := d.noSweep("rollback"); err != nil {
		return err
	}
	cur, err := d.appliedState()
	if err != nil {
		return err
	}
	if err := d.stopApplied(ctx, cur); err != nil {
		return err
	}
	written := rb.Writing
	if cur != nil {
		written = union(written, cur.Record.Files)
	}
	var prevFiles []string
	if rb.Prev != nil {
		prevFiles = rb.Prev.Record.Files
	}
	if err := removeLocalFiles(without(written, prevFiles)); err != nil {
		return err
	}
	if rb.Prev == nil {
		if err := d.removeState(localAppliedFile); err != nil {
			return err
		}
	} else if _, _, err := d.startApplied(ctx, rb.Prev.Launch, rb.Prev.Record); err != nil {
		// The previous record stays what it was: a Rollback again retries.
		_ = d.writeState(localAppliedFile, rb.Prev)
		return fmt.Errorf("rollback on %s: starting the previous applied server: %w", d.h.Name, err)
	}
	return d.removeState(localRollbackFile)
}

// Commit implements Applier.
func (d *openLocal) Commit(ctx context.Context) error {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	return d.removeState(localRollbackFile)
}

// Unapply implements Applier: the applied server stopped, the files of the record, of the
// rollback record and of a dead attempt removed, then the records. Nothing is started (a local
// host has no operator's server). The log is kept.
func (d *openLocal) Unapply(ctx context.Context) error {
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	if err := d.noSweep("unapply"); err != nil {
		return err
	}
	cur, err := d.appliedState()
	if err != nil {
		return err
	}
	rb, err := d.rollbackState()
	if err != nil {
		return err
	}
	var files []string
	if cur != nil {
		files = cur.Record.Files
		if err := d.stopApplied(ctx, cur); err != nil {
			return err
		}
	}
	if rb != nil {
		files = union(files, rb.Writing)
		if rb.Prev != nil {
			files = union(files, rb.Prev.Record.Files)
			if err := d.stopApplied(ctx, rb.Prev); err != nil { // stopped by the apply, unless it died first
				return err
			}
		}
	}
	if err := removeLocalFiles(files); err != nil {
		return err
	}
	return d.removeState(localAppliedFile, localRollbackFile)
}

// suspendApplied stops the applied server before a sweep's point starts (its port and GPUs), with
// a marker first, so the host's Restore (or `specsweep restore` after a crash) starts it again.
func (d *openLocal) suspendApplied(ctx context.Context) error {
	if _, err := d.stateDir(); err != nil {
		return nil // no state directory: nothing can be applied
	}
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	a, err := d.appliedState()
	if err != nil || !a.running() {
		return err
	}
	if err := d.writeState(localSuspendedFile, map[string]any{"pid": a.PID, "at": d.Local.o.Clock.Now().UTC()}); err != nil {
		return err
	}
	return d.stopApplied(ctx, a)
}

// resumeApplied starts the applied server again after a sweep stopped it (its marker), then
// removes the marker.
func (d *openLocal) resumeApplied(ctx context.Context) error {
	if _, err := d.stateDir(); err != nil {
		return nil
	}
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	var m map[string]any
	ok, err := d.readState(localSuspendedFile, &m)
	if err != nil || !ok {
		return err
	}
	a, err := d.appliedState()
	if err != nil {
		return err
	}
	if a != nil && !a.running() {
		if _, _, err := d.startApplied(ctx, a.Launch, a.Record); err != nil {
			return fmt.Errorf("restore %s: starting the applied server again: %w", d.h.Name, err)
		}
	}
	return d.removeState(localSuspendedFile)
}

// Start implements Host: the applied server, if one runs, is stopped first (suspendApplied).
func (d *openLocal) Start(ctx context.Context, l Launch) (Instance, error) {
	if err := d.suspendApplied(ctx); err != nil {
		return nil, err
	}
	return d.Local.Start(ctx, l)
}

// Restore implements Host: the sweep's server stopped, then the applied server started again if
// the sweep stopped it.
func (d *openLocal) Restore(ctx context.Context) error {
	if err := d.Local.Restore(ctx); err != nil {
		return err
	}
	return d.resumeApplied(ctx)
}

// localSlot is a slot of a packing local host: its point's Start stops the host's applied server
// first, as the host's own Start does; the host's Restore starts it again.
type localSlot struct {
	*Local
	d *openLocal
}

func (s *localSlot) Start(ctx context.Context, l Launch) (Instance, error) {
	if err := s.d.suspendApplied(ctx); err != nil {
		return nil, err
	}
	return s.Local.Start(ctx, l)
}
