package hostctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/sweep"
)

// fakeClock is a Clock that moves only when the test advances it: a wait of minutes on it takes
// the milliseconds its code needs.
type fakeClock struct {
	start time.Time
	added chan struct{} // a send (when there is room) for every new waiter: drive looks at once

	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
}

type fakeWaiter struct {
	at    time.Time
	every time.Duration // a ticker's period; 0: fires once (After)
	c     chan time.Time
}

var _ Clock = (*fakeClock)(nil)

func newFakeClock() *fakeClock {
	// Years from the real time, so a time read from the real clock shows in what a test checks.
	t0 := time.Date(2041, 3, 1, 12, 0, 0, 0, time.UTC)
	return &fakeClock{start: t0, now: t0, added: make(chan struct{}, 1)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// elapsed is how far the clock was advanced.
func (c *fakeClock) elapsed() time.Duration { return c.Now().Sub(c.start) }

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	return c.add(d, 0).c
}

func (c *fakeClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	w := c.add(d, d)
	return w.c, func() { c.remove(w) }
}

func (c *fakeClock) add(d, every time.Duration) *fakeWaiter {
	c.mu.Lock()
	w := &fakeWaiter{at: c.now.Add(d), every: every, c: make(chan time.Time, 1)}
	if d <= 0 && every == 0 {
		w.c <- c.now // as time.After(0): at once
		c.mu.Unlock()
		return w
	}
	c.waiters = append(c.waiters, w)
	c.mu.Unlock()
	select {
	case c.added <- struct{}{}:
	default:
	}
	return w
}

func (c *fakeClock) remove(w *fakeWaiter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.waiters {
		if x == w {
			c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
			return
		}
	}
}

func (c *fakeClock) waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// Advance moves the clock by d and fires every waiter due by then (a ticker once, as a real ticker
// drops the ticks nobody took).
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		select {
		case w.c <- c.now:
		default:
		}
		if w.every > 0 {
			for !w.at.After(c.now) {
				w.at = w.at.Add(w.every)
			}
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

// drive runs f, advancing the clock by step whenever something waits on it, until f returns. More
// than 20 s of real time fails the test: f's waits take milliseconds on this clock, minutes on the
// real one (where code that ignored the injected clock would still be waiting).
func (c *fakeClock) drive(t *testing.T, step time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	limit := time.NewTimer(20 * time.Second)
	defer limit.Stop()
	for {
		select {
		case <-done:
			return
		case <-limit.C:
			t.Fatalf("%s: not done after 20 s of real time (%v on the fake clock): is it timed by the real clock?", what, c.elapsed())
		case <-c.added:
		case <-time.After(2 * time.Millisecond): // a waiter whose news was taken by an earlier look
		}
		if c.waiting() > 0 {
			c.Advance(step)
		}
	}
}

// fakeServer writes an executable script that prints first and then sleeps (ignoring SIGTERM
// with ignoreTerm), and returns its path.
func fakeServer(t *testing.T, first string, ignoreTerm bool) string {
	t.Helper()
	trap := ""
	if ignoreTerm {
		trap = "trap '' TERM\n" // inherited by sleep through exec
	}
	p := filepath.Join(t.TempDir(), "fake-server")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+trap+"echo "+first+"\nexec sleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// killOnCleanup SIGKILLs the instance's process group when the test ends, whatever happened.
func killOnCleanup(t *testing.T, in Instance) {
	t.Helper()
	st, err := in.State(t.Context())
	if err != nil || st.MainPID == 0 {
		t.Fatalf("state of a new child: %+v %v", st, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-st.MainPID, syscall.SIGKILL) })
}

// TestClockTimesTheStopTimeout: a local server that ignores SIGTERM is killed once the stop timeout
// (10 min) has passed on the injected clock: the stop ends in SIGKILL, stop_timeout_sigkill, after
// 10 min as that clock counts, in the milliseconds it takes to advance it.
func TestClockTimesTheStopTimeout(t *testing.T) {
	clk := newFakeClock()
	d, err := Open(t.Context(), sweep.Host{Name: "here", Driver: sweep.DriverLocal}, Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	port := testhost.FreePort(t)
	in, err := d.Slot(0).Start(t.Context(), Launch{Argv: []string{fakeServer(t, "ignoring-TERM", true), "--port", fmt.Sprint(port)},
		Port: port, StopTimeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	killOnCleanup(t, in)
	// SIGTERM only once the trap is set, or the shell would die of it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		lines, _ := in.Logs(t.Context())
		if strings.Contains(strings.Join(lines, "\n"), "ignoring-TERM") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fake server never started: %q", lines)
		}
	}
	var r StopResult
	clk.drive(t, time.Minute, "the stop", func() { r, err = in.Stop(t.Context(), nil) })
	if err != nil {
		t.Fatal(err)
	}
	if r.Class != ClassStopTimeoutSIGKILL || !r.SIGKILL || r.Clean {
		t.Errorf("stop of a server ignoring SIGTERM: %+v, want stop_timeout_sigkill by SIGKILL", r)
	}
	if r.Duration < 10*time.Minute || clk.elapsed() < 10*time.Minute {
		t.Errorf("the stop took %v (%v on the clock), want the 10 min stop timeout first", r.Duration, clk.elapsed())
	}
}

// TestClockTimesReadiness: a local server that never opens its port is ready_timeout once 30 min
// have passed on the injected clock since its start, with Ready's times read from that clock.
func TestClockTimesReadiness(t *testing.T) {
	clk := newFakeClock()
	d, err := Open(t.Context(), sweep.Host{Name: "here", Driver: sweep.DriverLocal}, Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	port := testhost.FreePort(t)
	in, err := d.Start(t.Context(), Launch{Argv: []string{fakeServer(t, "loading", false), "--port", fmt.Sprint(port)},
		Port: port, ReadyTimeout: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	killOnCleanup(t, in)
	clk.drive(t, time.Minute, "WaitReady", func() { _, err = in.WaitReady(t.Context()) })
	f, ok := AsFailure(err)
	if !ok || f.Class != ClassReadyTimeout || !strings.Contains(f.Detail, "not ready after 30m0s") {
		t.Fatalf("a server that never listens: %v, want ready_timeout after 30m0s", err)
	}
	if e := clk.elapsed(); e < 30*time.Minute || e > 32*time.Minute {
		t.Errorf("ready_timeout after %v on the clock, want 30 min (and a poll)", e)
	}
	if !f.State.At.After(clk.start) {
		t.Errorf("the failure's state was read at %v, not on the clock (started %v)", f.State.At, clk.start)
	}
	clk.drive(t, time.Second, "the stop", func() { _, err = in.Stop(t.Context(), nil) })
	if err != nil {
		t.Fatal(err)
	}
}

// TestClockTimesTheGPUWait: with a GPU held by another process (a stand-in nvidia-smi on PATH), a
// local start waits GPUWait (10 min) on the injected clock, polling, and is then gpu_busy.
func TestClockTimesTheGPUWait(t *testing.T) {
	port := testhost.FreePort(t)
	dir := t.TempDir()
	smi := "#!/bin/sh\ncase \"$*\" in\n*query-gpu*) echo '0, GPU-aaaa'; echo '1, GPU-bbbb' ;;\n" +
		"*query-compute-apps*) echo '4242, GPU-aaaa, 70000' ;;\nesac\n"
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(smi), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	clk := newFakeClock()
	l := NewLocal(LocalOptions{Name: "here", GPUWait: 10 * time.Minute, Clock: clk})
	var err error
	clk.drive(t, time.Minute, "the GPU wait", func() {
		_, err = l.Start(t.Context(), Launch{Argv: []string{"/bin/sleep", "--port", strconv.Itoa(port)}, Port: port})
	})
	f, ok := AsFailure(err)
	if !ok || f.Class != ClassGPUBusy || f.Detail != "GPU 0 still held after 10m0s" || len(f.Evidence) != 1 ||
		!strings.Contains(f.Evidence[0], "pid 4242 holds 70000 MiB on GPU 0") {
		t.Fatalf("GPU 0 held throughout: %v, want gpu_busy naming pid 4242", err)
	}
	if e := clk.elapsed(); e < 10*time.Minute || e > 12*time.Minute {
		t.Errorf("gpu_busy after %v on the clock, want 10 min (and a poll)", e)
	}
}

// fakeLogin is a login node whose queue holds job 7 of sweep s from its sbatch on, pending for
// Priority and, from an hour after the clock's start, for Resources; scancel never removes it (a
// job stuck in the queue).
type fakeLogin struct {
	clock   *fakeClock
	comment string

	mu       sync.Mutex
	sbatched bool
}

func (f *fakeLogin) sh(ctx context.Context, script string, stdin []byte, timeout time.Duration) (Output, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := ""
	switch {
	case strings.HasPrefix(script, "squeue "):
		if f.sbatched {
			out = "7|" + f.comment + "\n"
		}
	case strings.HasPrefix(script, "cd && mkdir"):
		out = "/shared/specsweep-jobs\n"
	case strings.HasPrefix(script, "sbatch "):
		f.sbatched = true
		out = "7\n"
	case strings.HasPrefix(script, "scontrol show job "):
		reason := "Priority"
		if f.clock.elapsed() >= time.Hour {
			reason = "Resources"
		}
		out = "JobId=7 JobState=PENDING Reason=" + reason + " ExitCode=0:0\n" + logSep + "\n"
	case strings.HasPrefix(script, "scancel "):
	default:
		return Output{}, fmt.Errorf("fake login node: unexpected script %q", script)
	}
	return Output{Stdout: []byte(out)}, nil
}

func (f *fakeLogin) close() error { return nil }

// TestClockTimesSlurmJobs: a Slurm job's polls and times are the injected clock's: its pending
// events say how long since its submission on that clock, and its stop gives up on a job scancel
// cannot remove after 2 min of polls on it.
func TestClockTimesSlurmJobs(t *testing.T) {
	clk := newFakeClock()
	var mu sync.Mutex
	var pending []string
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	event := func(kind, detail string) {
		if kind != "job_pending" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if pending = append(pending, detail); len(pending) == 2 {
			cancel() // seen what the test looks for: WaitReady ends
		}
	}
	s := newSlurm(SlurmOptions{Name: "cluster", Sweep: "s", Poll: 30 * time.Second, Event: event, Clock: clk}, nil)
	const tag = "0123456789ab"
	s.shell = &fakeLogin{clock: clk, comment: s.jobComment(tag)}
	in, err := s.Slot(0).Start(t.Context(), Launch{Argv: []string{"/bin/sleep", "600"}, Tag: tag})
	if err != nil {
		t.Fatal(err)
	}
	clk.drive(t, 5*time.Minute, "WaitReady of a pending job", func() { _, err = in.WaitReady(ctx) })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitReady: %v, want it cancelled once the reason changed", err)
	}
	want := []string{"job 7 pending (Reason=Priority) since 0s", "job 7 pending (Reason=Resources) since 1h0m0s"}
	if strings.Join(pending, "\n") != strings.Join(want, "\n") {
		t.Errorf("pending events:\n%s\nwant\n%s", strings.Join(pending, "\n"), strings.Join(want, "\n"))
	}
	before := clk.elapsed()
	clk.drive(t, 30*time.Second, "the stop of a job stuck in the queue", func() { _, err = in.Stop(t.Context(), nil) })
	if err == nil || !strings.Contains(err.Error(), "1 cancelled job(s) still in the queue after 2 min") {
		t.Fatalf("stop of a job scancel cannot remove: %v", err)
	}
	if e := clk.elapsed() - before; e < 2*time.Minute || e > 3*time.Minute {
		t.Errorf("gave up after %v on the clock, want 2 min (and a poll)", e)
	}
}

// TestOpenHandsItsClockDown: every driver Open makes carries Options.Clock to what it makes: the
// local servers of the host and its slots, the ssh host and its connection, the cluster and its
// login node's connection.
func TestOpenHandsItsClockDown(t *testing.T) {
	clk := newFakeClock()
	o := Options{Sweep: "s", Clock: clk}
	open := func(h sweep.Host) Driver {
		t.Helper()
		d, err := Open(t.Context(), h, o)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	local := open(sweep.Host{Name: "a", Driver: sweep.DriverLocal, GPUs: 2, Pack: true}).(*openLocal)
	if local.Local.o.Clock != clk || local.Slot(1).(*localSlot).o.Clock != clk {
		t.Error("the local driver or its slot is not on Options.Clock")
	}
	ro := open(sweep.Host{Name: "b", Driver: sweep.DriverSSH, Address: "10.231.0.9"}).(*openSSH).options()
	if ro.Clock != clk || ro.SSH.Clock != clk {
		t.Errorf("the ssh driver's options: clock %v, its connection's %v", ro.Clock, ro.SSH.Clock)
	}
	so := open(sweep.Host{Name: "c", Driver: sweep.DriverSlurm, Address: "10.231.0.9", Slurm: &sweep.Slurm{MaxJobs: 2}}).(*openSlurm).options()
	if so.Clock != clk || so.SSH.Clock != clk {
		t.Errorf("the slurm driver's options: clock %v, its connection's %v", so.Clock, so.SSH.Clock)
	}
	// nil is the real clock, once each constructor has its options.
	if _, ok := NewLocal(LocalOptions{}).o.Clock.(realClock); !ok {
		t.Error("NewLocal without a clock is not on the real clock")
	}
	if _, ok := newSlurm(SlurmOptions{}, nil).o.Clock.(realClock); !ok {
		t.Error("newSlurm without a clock is not on the real clock")
	}
}
