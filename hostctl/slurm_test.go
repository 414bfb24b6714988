package hostctl

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	specsweep "github.com/specsweep/specsweep/sweep"
)

// TestJobStatesReadAsUnitStates: each job state as the classification reads it (docs/slurm.md).
func TestJobStatesReadAsUnitStates(t *testing.T) {
	for _, c := range []struct {
		line    string
		running bool
		class   Class // classify's verdict before ready, "" while running
		detail  string
	}{
		{"JobId=7 JobState=PENDING Reason=Resources ExitCode=0:0", true, "", ""},
		{"JobId=7 JobState=RUNNING Reason=None ExitCode=0:0", true, "", ""},
		{"JobId=7 JobState=COMPLETING Reason=None ExitCode=0:0", true, "", ""},
		{"JobId=7 JobState=FAILED Reason=NonZeroExitCode ExitCode=2:0", false, ClassBadArgs, "code=exited, status=2"},
		{"JobId=7 JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0", false, ClassCrashDuringStart, "code=exited, status=1"},
		{"JobId=7 JobState=FAILED Reason=NonZeroExitCode ExitCode=0:9", false, ClassCrashDuringStart, "code=killed, status=9"},
		{"JobId=7 JobState=OUT_OF_MEMORY Reason=OutOfMemory ExitCode=0:125", false, ClassOOM, "out of memory"},
		{"JobId=7 JobState=TIMEOUT Reason=TimeLimit ExitCode=0:0", false, ClassCrashDuringStart, "result timeout"},
		{"JobId=7 JobState=CANCELLED Reason=None ExitCode=0:0", false, ClassCrashDuringStart, "code=killed, status=15"},
		{"JobId=7 JobState=COMPLETED Reason=None ExitCode=0:0", false, ClassCrashDuringStart, "code=exited, status=0"},
	} {
		f := scontrolFields(c.line)
		st := jobStateOf(f, time.Time{})
		if st.Running() != c.running {
			t.Errorf("%s: running %v", c.line, st.Running())
		}
		got := classify(st, nil, false)
		switch {
		case c.class == "" && got != nil:
			t.Errorf("%s: classified %v while it runs", c.line, got)
		case c.class != "" && (got == nil || got.Class != c.class || !strings.Contains(got.Detail, c.detail)):
			t.Errorf("%s: %v, want %s with %q", c.line, got, c.class, c.detail)
		}
	}
	for _, lost := range []string{"NODE_FAIL", "BOOT_FAIL", "PREEMPTED", "REQUEUED"} {
		if nodeLost(scontrolFields("JobId=7 JobState="+lost+" NodeList=n1")) == "" {
			t.Errorf("%s is not read as a lost host", lost)
		}
	}
	if nodeLost(scontrolFields("JobId=7 JobState=FAILED")) != "" {
		t.Error("a failed job read as a lost host")
	}
}

func TestJobScriptHoldsTheLaunch(t *testing.T) {
	l := Launch{Argv: []string{"/opt/sglang/bin/python", "-m", "sglang.launch_server", "--tp-size", "2", "--api-key", "${KEY}", "--port", "30001"},
		Env: map[string]string{"KEY": "it's secret", "CUDA_VISIBLE_DEVICES": "5"}, Port: 30001}
	b, err := jobScript(SlurmOptions{Partition: "gpu", TimeLimit: 90 * 60e9, SbatchArgs: []string{"--qos=normal"}}, l, "specsweep.s.p", "specsweep:sweep=s:point=p", "/shared/o/specsweep.s.p.%j.out")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{"#SBATCH --gres=gpu:2\n", "#SBATCH --partition=gpu\n", "#SBATCH --time=90\n", "#SBATCH --qos=normal\n",
		"#SBATCH --job-name=specsweep.s.p\n", "#SBATCH --comment=specsweep:sweep=s:point=p\n", "#SBATCH --output=/shared/o/specsweep.s.p.%j.out\n", "#SBATCH --no-requeue\n",
		"export KEY='it'\\''s secret'\n", "exec /opt/sglang/bin/python -m sglang.launch_server --tp-size 2 --api-key 'it'\\''s secret' --port 30001\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("the job script lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "CUDA_VISIBLE_DEVICES") {
		t.Errorf("the job script sets CUDA_VISIBLE_DEVICES (Slurm's to set):\n%s", s)
	}
}

// TestSlurmJobsAreMatchedByWholeSweep: a job belongs to a sweep only by its comment, read back
// whole: not by a name or comment that starts with the sweep's, not a job specsweep did not make.
func TestSlurmJobsAreMatchedByWholeSweep(t *testing.T) {
	a := newSlurm(SlurmOptions{Sweep: "a"}, nil)
	ab := newSlurm(SlurmOptions{Sweep: "a.b"}, nil)
	odd := newSlurm(SlurmOptions{Sweep: "a:point=b c"}, nil)
	for _, s := range []*Slurm{a, ab, odd} {
		for _, tag := range []string{"0123456789ab", "x:y%z"} {
			c := s.jobComment(tag)
			if strings.ContainsAny(c, " |\"'\n") {
				t.Errorf("comment %q holds a space, quote, | or newline", c)
			}
			for _, o := range []*Slurm{a, ab, odd} {
				pt, ok := o.jobOf(c)
				if want := o == s; ok != want || (ok && pt != tag) {
					t.Errorf("sweep %q reads the comment %q of sweep %q as (%q, %v)", o.o.Sweep, c, s.o.Sweep, pt, ok)
				}
			}
		}
	}
	for _, c := range []struct {
		comment string
		a, ab   bool
	}{
		{"specsweep:sweep=a:point=0123456789ab", true, false},
		{"specsweep:sweep=a.b:point=0123456789ab", false, true},
		{"specsweep:sweep=a:point=0123456789ab:x", false, false},
		{"specsweep:sweep=a.b", false, false},
		{"specsweep:sweep=a%2Eb:point=0123456789ab", false, false}, // not the form specsweep writes
		{"specsweep:sweep=a:point=%zz", false, false},
		// The form written before comments held the sweep: read back whole, a point id last.
		{"specsweep:specsweep.a.0123456789ab", true, false},
		{"specsweep:specsweep.a.b.0123456789ab", false, true},
		{"specsweep:specsweep.a.b", false, false},
		{"specsweep:specsweep.a.0123456789abc", false, false},
		{"(null)", false, false},
		{"", false, false},
		{"my own job: specsweep:sweep=a:point=0123456789ab", false, false},
	} {
		if _, ok := a.jobOf(c.comment); ok != c.a {
			t.Errorf("sweep a reads %q as its own: %v", c.comment, ok)
		}
		if _, ok := ab.jobOf(c.comment); ok != c.ab {
			t.Errorf("sweep a.b reads %q as its own: %v", c.comment, ok)
		}
	}
	// squeue's lines: the id first, the comment the whole rest of the line.
	out := "11|specsweep:sweep=a:point=0123456789ab\n12|specsweep:sweep=a.b:point=0123456789ab\n13|(null)\n" +
		"14|specsweep:sweep=a:point=0123456789ab|more\n15_3|specsweep:sweep=a:point=0123456789ab\n16|specsweep:specsweep.a.00000000000b\n"
	got := a.parseQueue(out)
	if want := map[string]string{"11": "specsweep.a.0123456789ab", "16": "specsweep.a.00000000000b"}; !maps.Equal(got, want) {
		t.Errorf("sweep a's jobs in the queue: %v, want %v", got, want)
	}
}

// sleepLaunch is a job that holds one GPU and does nothing, as point tag.
func sleepLaunch(tag string) Launch {
	return Launch{Argv: []string{"/bin/sleep", "600"}, Tag: tag}
}

// TestSlurmSweepsOfPrefixNamesAreKeptApart: on a real cluster, sweep `a` left a job (its specsweep
// killed) while sweep `a.b` runs two jobs, beside a hand-made job named like one of `a`'s and a job
// of another user with `a`'s very name and comment. Doctor, the leftover cancel of `a`'s next run
// and its restore see and cancel only `a`'s jobs; everything else stays queued.
func TestSlurmSweepsOfPrefixNamesAreKeptApart(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	// One compute node of 4 GPUs and 6 one-GPU jobs at most: some run, the rest wait (PENDING).
	c, ssh := bootSlurm(t, 1, testhost.Options{NoUnit: true})
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	var events []string
	var evMu sync.Mutex
	dial := func(sweep string) *Slurm {
		s, err := DialSlurm(ctx, SlurmOptions{Name: "cluster", SSH: ssh, Sweep: sweep, Partition: c.Partition, OutputDir: testhost.SharedPath + "/specsweep",
			Event: func(kind, detail string) {
				evMu.Lock()
				defer evMu.Unlock()
				events = append(events, sweep+" "+kind+" "+detail)
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	submit := func(s *Slurm, k int, tag string) string {
		in, err := s.Slot(k).Start(ctx, sleepLaunch(tag))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimPrefix(in.ID(), "slurm-")
	}
	run := func(cmd string) string {
		out, err := c.Run(ctx, cmd)
		if err != nil {
			t.Fatalf("%s: %v\n%s\n%s", cmd, err, out, c.Logs())
		}
		return strings.TrimSpace(string(out))
	}
	queue := func() map[string]bool {
		ids := map[string]bool{}
		for _, id := range strings.Fields(run("squeue -h -o %i")) {
			ids[id] = true
		}
		return ids
	}

	// Sweep a's run is killed with one job queued; a.b's run holds two, one of the same point.
	a1 := submit(dial("a"), 0, "0123456789ab")
	ab := dial("a.b")
	ab1, ab2 := submit(ab, 0, "0123456789ab"), submit(ab, 1, "00000000000b")
	// Not specsweep's: a job of the same name as a's, made by hand.
	hand := run("sbatch --parsable --job-name=specsweep.a.0123456789ab --gres=gpu:1 --output=/shared/hand-%j.out --wrap 'sleep 600'")
	// Another user's job with a's job's name and comment (the user exists on every host, as on a
	// cluster).
	for _, h := range c.Hosts {
		if out, err := h.Nsenter(ctx, "useradd", "-u", "2345", "-m", "bob"); err != nil {
			t.Fatalf("useradd on %s: %v %s", h.Name, err, out)
		}
	}
	comment := scontrolFields(run("scontrol show job -o " + a1))["Comment"]
	if comment == "" {
		t.Fatalf("job %s has no comment", a1)
	}
	bob := run("su -s /bin/sh bob -c \"cd /tmp && sbatch --parsable --job-name=specsweep.a.0123456789ab --comment='" + comment +
		"' --gres=gpu:1 --output=/shared/bob-%j.out --wrap 'sleep 600'\"")
	others := []string{ab1, ab2, hand, bob}
	t.Cleanup(func() { _, _ = c.Run(context.Background(), "scancel -- "+a1+" "+strings.Join(others, " ")) })

	a := dial("a")
	left, err := a.Leftovers(ctx)
	if want := []string{"job " + a1 + " specsweep.a.0123456789ab"}; err != nil || !slices.Equal(left, want) {
		t.Errorf("a's leftovers %q (%v), want %q", left, err, want)
	}
	doctorLeftovers := func(sweep string) Check {
		d, err := Open(ctx, specsweep.Host{Name: "cluster", Driver: specsweep.DriverSlurm, Address: ssh.Address, GPUs: 1,
			Slurm: &specsweep.Slurm{Partition: c.Partition, OutputDir: testhost.SharedPath + "/specsweep"}}, Options{Sweep: sweep, ssh: &ssh})
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range d.Doctor(ctx) {
			if ch.Name == "leftovers" {
				return ch
			}
		}
		t.Fatalf("doctor of %s has no leftovers check", sweep)
		return Check{}
	}
	d := doctorLeftovers("a")
	if d.Status != CheckFail || !strings.Contains(d.Detail, "job "+a1+" ") {
		t.Errorf("doctor of a: %+v, want a failed leftovers check naming job %s", d, a1)
	}
	for _, id := range others {
		if strings.Contains(d.Detail, "job "+id+" ") {
			t.Errorf("doctor of a reports job %s, not a's: %s", id, d.Detail)
		}
	}

	// a's next run cancels a's leftover before its first job, and nothing else.
	a2 := submit(a, 0, "0123456789ab")
	q := queue()
	if q[a1] {
		t.Errorf("a's leftover job %s still queued", a1)
	}
	for _, id := range append(others, a2) {
		if !q[id] {
			t.Errorf("job %s is gone after a's run began; only %s was a's leftover", id, a1)
		}
	}
	evMu.Lock()
	var leftovers []string
	for _, e := range events {
		if strings.Contains(e, "stopped_leftover") {
			leftovers = append(leftovers, e)
		}
	}
	evMu.Unlock()
	if len(leftovers) != 1 || !strings.HasPrefix(leftovers[0], "a stopped_leftover job "+a1+" ") {
		t.Errorf("leftover events %q, want one of a for job %s", leftovers, a1)
	}

	// a's restore cancels its job and nothing else; then doctor finds none of a's.
	if err := a.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	q = queue()
	if q[a2] {
		t.Errorf("a's job %s still queued after a's restore", a2)
	}
	for _, id := range others {
		if !q[id] {
			t.Errorf("job %s is gone after a's restore", id)
		}
	}
	if d := doctorLeftovers("a"); d.Status != CheckOK {
		t.Errorf("doctor of a after its restore: %+v", d)
	}
	// a.b sees exactly its own two.
	left, err = ab.Leftovers(ctx)
	slices.Sort(left)
	want := []string{"job " + ab1 + " specsweep.a.b.0123456789ab", "job " + ab2 + " specsweep.a.b.00000000000b"}
	slices.Sort(want)
	if err != nil || !slices.Equal(left, want) {
		t.Errorf("a.b's jobs %q (%v), want %q", left, err, want)
	}
	if err := ab.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	q = queue()
	if q[ab1] || q[ab2] || !q[hand] || !q[bob] {
		t.Errorf("after a.b's restore the queue holds %v: want the hand-made %s and bob's %s only", q, hand, bob)
	}
}

// A SIGKILL is Slurm's (a stop timeout) from a second before max(KillWait, 5 s): slurmd's minimum,
// and Slurm's whole seconds (a stop of 14.9 s with KillWait=15 ended in Slurm's SIGKILL).
func TestSlurmKillAfter(t *testing.T) {
	for _, c := range []struct{ kw, want time.Duration }{
		{15 * time.Second, 14 * time.Second},
		{30 * time.Second, 29 * time.Second},
		{2 * time.Second, 4 * time.Second},
		{5 * time.Second, 4 * time.Second},
	} {
		if got := slurmKillAfter(c.kw); got != c.want {
			t.Errorf("KillWait %v: a SIGKILL is Slurm's after %v, want %v", c.kw, got, c.want)
		}
	}
	if 14900*time.Millisecond < slurmKillAfter(15*time.Second) {
		t.Error("the 14.9 s stop measured with KillWait=15 is not a stop timeout")
	}
}

// recordingLogin is a login node that records the scripts it is given and answers none.
type recordingLogin struct {
	mu      sync.Mutex
	scripts []string
}

func (r *recordingLogin) sh(ctx context.Context, script string, stdin []byte, timeout time.Duration) (Output, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scripts = append(r.scripts, script)
	return Output{}, nil
}

func (r *recordingLogin) close() error { return nil }

// TestSlurmStopCommand: a stop is scancel, the job's cancel (SIGTERM, then KillWait); a kill signals
// the server's step with SIGKILL: the batch step of a one-node job, step 0 (srun's ranks) of a job
// over several nodes, and cancels the job when that step is not there yet.
func TestSlurmStopCommand(t *testing.T) {
	for _, c := range []struct {
		kill  bool
		nodes int
		want  string
	}{
		{false, 1, "scancel -- 42"},
		{false, 2, "scancel -- 42"},
		{true, 1, "scancel --signal=KILL --batch -- 42 2>/dev/null || scancel -- 42"},
		{true, 2, "scancel --signal=KILL -- 42.0 2>/dev/null || scancel -- 42"},
	} {
		sh := &recordingLogin{}
		p := &jobProc{s: newSlurm(SlurmOptions{}, sh), id: "42", kill: c.kill, nodes: c.nodes}
		if err := p.sendStop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sh.scripts, []string{c.want}) {
			t.Errorf("kill %v, %d node(s): the stop ran %q, want %q", c.kill, c.nodes, sh.scripts, c.want)
		}
	}
}

// TestSlurmKillStopsAJobOverTwoNodes: Launch.Kill ends a job over two nodes whose ranks ignore
// SIGTERM at once (step 0 SIGKILLed: no KillWait, srun reports each rank killed), as a clean stop by
// SIGKILL; the job leaves the queue and both nodes take the next job.
func TestSlurmKillStopsAJobOverTwoNodes(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	c, login := bootSlurm(t, 2, testhost.Options{NoUnit: true})
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	d := openCluster(t, ctx, c, login, 2, "kill")
	h := d.Slot(0)
	l := groupLaunch(8, map[string]string{"SGLANGSIM_FAIL": "ignore-sigterm"})
	l.Argv = append(l.Argv, "--host", "0.0.0.0")
	l.Tag, l.StopTimeout, l.Kill = "0123456789ab", 2*time.Minute, true
	in, err := h.Start(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	// A kill that slurmd does not finish within 15 s (it took 0.2-0.4 s; twice in clean-clone runs a
	// node's slurmd answered 15 s late and its step ended only at UnkillableStepTimeout, the node
	// drained): what each node runs then, for the failure's log.
	logged := make(chan struct{})
	stalled := time.AfterFunc(15*time.Second, func() {
		defer close(logged)
		for _, n := range c.Nodes {
			out, err := n.Run(ctx, "ps -eo pid,ppid,stat,wchan:24,etimes,args --sort=pid; tail -n 30 /var/log/slurm/slurmd.log")
			t.Logf("the kill still runs after 15 s; %s:\n%s%v", n.Name, out, err)
		}
	})
	res, err := in.Stop(ctx, nil)
	if !stalled.Stop() {
		<-logged
	}
	if err != nil {
		t.Fatal(err)
	}
	if !res.Clean || res.Class != "" || !res.SIGKILL || res.Final.Running() || res.Duration >= l.StopTimeout {
		t.Fatalf("a killed job over two nodes: want a clean stop by SIGKILL, got %+v", res)
	}
	t.Logf("killed in %v (%s)", res.Duration, res.Final.Exit())
	// srun reports each rank that the kill ended (srun, SIGKILLed itself, would report none).
	logs, _ := in.Logs(ctx)
	all := strings.Join(logs, "\n")
	if strings.Contains(all, "SIGTERM") {
		t.Fatalf("a killed job's ranks were sent SIGTERM:\n%s", all)
	}
	for _, task := range []string{"task 0: Killed", "task 1: Killed"} {
		if !strings.Contains(all, task) {
			t.Errorf("srun did not report %q:\n%s", task, all)
		}
	}
	if out, err := c.Run(ctx, "squeue -h -o '%i %j %T'"); err != nil || strings.Contains(string(out), "specsweep.") {
		t.Fatalf("after the kill the queue holds %q (%v)", out, err)
	}
	// Both nodes are free: the next job over both starts and serves.
	l = groupLaunch(8, nil)
	l.Argv = append(l.Argv, "--host", "0.0.0.0")
	l.Tag = "0123456789ac"
	in, err = h.Start(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.WaitReady(ctx); err != nil {
		t.Fatalf("ready after a kill: %v", err)
	}
	if _, err := in.Stop(ctx, nil); err != nil {
		t.Fatal(err)
	}
}
