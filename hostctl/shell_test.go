package hostctl

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// TestPersistentShell: the persistent shell keeps stdout, stderr and the exit status of each
// command apart, bounds stderr, passes stdin through, stays in step across commands, and opens
// no session after its own.
func TestPersistentShell(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	h, r, ctx := bootOne(t, testhost.Options{})
	c := r.conn
	out, err := c.RunShell(ctx, "echo out; echo err >&2", 10*time.Second, 1<<10)
	if err != nil || string(out.Stdout) != "out\n" || string(out.Stderr) != "err\n" {
		t.Errorf("stdout %q stderr %q err %v", out.Stdout, out.Stderr, err)
	}
	sessions := c.sessions.Load()
	out, err = c.RunShell(ctx, "echo partial; echo why >&2; exit 3", 10*time.Second, 1<<10)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Out.Code != 3 || string(out.Stdout) != "partial\n" || string(out.Stderr) != "why\n" {
		t.Errorf("exit 3: %+v %v", out, err)
	}
	out, err = c.RunShell(ctx, "head -c 5000 /dev/zero | tr '\\0' x >&2", 10*time.Second, 100)
	if err != nil || len(out.Stderr) > 100 || !out.Truncated {
		t.Errorf("stderr of 5000 bytes kept to 100: %d bytes, truncated %v, %v", len(out.Stderr), out.Truncated, err)
	}
	out, err = c.RunShell(ctx, "true", 10*time.Second, 1<<10)
	if err != nil || len(out.Stdout) != 0 || len(out.Stderr) != 0 {
		t.Errorf("true: stderr of an earlier command left: %+v %v", out, err)
	}
	in := bytes.Repeat([]byte("line\n"), 3000)
	out, err = c.RunShellInput(ctx, "wc -c", in, 10*time.Second, 1<<10)
	if err != nil || strings.TrimSpace(string(out.Stdout)) != "15000" {
		t.Errorf("stdin of 15000 bytes: %q %v", out.Stdout, err)
	}
	for i := range 20 {
		want := strings.Repeat("y", i)
		out, err := c.RunShell(ctx, "printf %s "+ShellQuote(want), 10*time.Second, 1<<10)
		if err != nil || string(out.Stdout) != want {
			t.Fatalf("command %d out of step: %q %v", i, out.Stdout, err)
		}
	}
	if n := c.sessions.Load() - sessions; n != 0 {
		t.Errorf("%d sessions opened by commands in the persistent shell", n)
	}
	// A command costs the host one process, the subshell (a fork): no program is started for a
	// builtin (it was two, timeout(1) and sh -c). Counted by the host's PID namespace's last PID.
	lastPID := func() int { return hostLastPID(ctx, t, h) }
	pid0 := lastPID()
	for range 20 {
		if _, err := c.RunShell(ctx, "true", 10*time.Second, 1<<10); err != nil {
			t.Fatal(err)
		}
	}
	if n := lastPID() - pid0 - 1; n > 20 {
		t.Errorf("20 commands started %d processes on the host, want 20 (a subshell each)", n)
	}
	// A syntax error is the command's (exit 2), and the shell goes on.
	if _, err := c.RunShell(ctx, "echo (", 10*time.Second, 1<<10); !errors.As(err, &ee) || ee.Out.Code != 2 {
		t.Errorf("a syntax error: %v, want exit 2", err)
	}
	// A command past its timeout: it and what it started get SIGTERM (no timeout(1) on the host: this
	// process sends them from a session of its own), its exit is timeout(1)'s 124, the shell goes on.
	t0 := time.Now()
	_, err = c.RunShell(ctx, "sleep 3001 & sleep 3002; echo never", time.Second, 1<<10)
	if !errors.As(err, &ee) || ee.Out.Code != 124 || !strings.Contains(err.Error(), "timed out") || time.Since(t0) > 8*time.Second {
		t.Errorf("past its timeout: %v after %v, want exit 124 within seconds", err, time.Since(t0))
	}
	waitUntil(t, 10*time.Second, "the timed-out command's processes gone", func() bool {
		out, _ := h.Nsenter(ctx, "sh", "-c", "pgrep -f 'sleep 300[12]' || true")
		return strings.TrimSpace(string(out)) == ""
	})
	if out, err := c.RunShell(ctx, "echo after", 10*time.Second, 1<<10); err != nil || string(out.Stdout) != "after\n" {
		t.Errorf("after a timeout: %q %v", out.Stdout, err)
	}
	// One that ignores SIGTERM gets SIGKILL 5 s later (timeout(1)'s --kill-after=5s).
	t0 = time.Now()
	_, err = c.RunShell(ctx, "trap '' TERM; sleep 3003", time.Second, 1<<10)
	if !errors.As(err, &ee) || ee.Out.Code != 124 || time.Since(t0) < 5*time.Second || time.Since(t0) > 10*time.Second {
		t.Errorf("past its timeout, SIGTERM ignored: %v after %v, want exit 124 after 6 s", err, time.Since(t0))
	}
	// No timeout given: Cmd's default (30 s), not none.
	if out, err := c.RunShell(ctx, "sleep 0.5; echo default", 0, 1<<10); err != nil || string(out.Stdout) != "default\n" {
		t.Errorf("no timeout given: %q %v", out.Stdout, err)
	}
	if n := c.sessions.Load() - sessions; n != 2 {
		t.Errorf("%d sessions opened by commands in the persistent shell and the kills, want the kills' 2", n)
	}
}

// TestStartRoundTrips: a point's Start on a host whose previous point was stopped is three
// commands in the persistent shell (the unit's state with the GPUs, the environment file, the
// start) and no session: the state was read twice and the GPUs apart, and the environment file
// took a session of its own.
func TestStartRoundTrips(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	h, r := bootRemote(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	l := launch(driver{simBin: testhost.SimPath}, map[string]string{"A": "1"})
	// systemd logs "Reloading." at every daemon-reload.
	reloads := func() int {
		out, err := h.Nsenter(ctx, "sh", "-c", "journalctl --sync; journalctl -q -o cat _PID=1 | grep -c '^Reloading'")
		n, cerr := strconv.Atoi(strings.TrimSpace(string(out)))
		if cerr != nil {
			t.Fatalf("counting systemd's reloads: %v %v %q", err, cerr, out)
		}
		return n
	}
	// The second start is the first one's launch again; the third's environment differs (its file is
	// written again); the fourth's stop timeout (its drop-in is written and systemd reloaded).
	for i := range 4 {
		switch i {
		case 2:
			l.Env = maps.Clone(l.Env)
			l.Env["A"] = "2"
		case 3:
			l.StopTimeout += time.Second
		}
		sessions, cmds, rl := r.conn.sessions.Load(), r.conn.shellCmds.Load(), reloads()
		in, err := r.Start(ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			if n := r.conn.sessions.Load() - sessions; n != 0 {
				t.Errorf("start %d opened %d session(s), want none", i, n)
			}
			if n, want := r.conn.shellCmds.Load()-cmds, []int64{0, 2, 3, 2}[i]; n != want {
				t.Errorf("start %d ran %d commands in the shell, want %d", i, n, want)
			}
			if n, want := reloads()-rl, []int{0, 0, 0, 1}[i]; n != want {
				t.Errorf("start %d: systemd reloaded %d times, want %d", i, n, want)
			}
		}
		if _, err := in.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		if res, err := in.Stop(ctx, nil); err != nil || !res.Clean {
			t.Fatalf("stop: %+v %v", res, err)
		}
	}
	// A stop at the end of a point (killed, as a sweep's): one command that reads the state, stops the
	// unit, waits for the stop job, reads the state, resets the unit and reads the journal (it was
	// three: a poll before, and the reset-failed one more round trip after).
	l.Kill = true
	in, err := r.Start(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	cmds := r.conn.shellCmds.Load()
	if res, err := in.Stop(ctx, nil); err != nil || !res.Clean || res.Final.Running() {
		t.Fatalf("stop: %+v %v", res, err)
	}
	if n := r.conn.shellCmds.Load() - cmds; n != 1 {
		t.Errorf("the stop ran %d commands in the shell, want 1", n)
	}
	// Stopped again: nothing runs, nothing is sent (Already), in one command.
	cmds = r.conn.shellCmds.Load()
	if res, err := in.Stop(ctx, nil); err != nil || !res.Already {
		t.Errorf("a second stop: %+v %v, want Already", res, err)
	}
	if n := r.conn.shellCmds.Load() - cmds; n != 1 {
		t.Errorf("the second stop ran %d commands in the shell, want 1", n)
	}
	if st, err := r.UnitState(ctx); err != nil || st.ActiveState != "inactive" {
		t.Errorf("after the stop the unit is %q (%v), want inactive (reset)", st.ActiveState, err)
	}
	// A restore removes the sweep's files: the handle's next start writes every one of them again
	// (it skipped the environment file it knew, and the server started without it).
	if err := r.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(ctx, l); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{EnvFilePath("sglang.service"), DropInPath("sglang.service"), LaunchFilePath("sglang.service")} {
		if _, err := h.ReadFile(p); err != nil {
			t.Errorf("after a restore and a start: %v", err)
		}
	}
	if err := r.Restore(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestStopWhenSystemctlStartsSlowly: the stop's `systemctl stop` is bounded by a quarter second
// (the persistent shell is shared), and on a loaded host systemctl can take longer than that to
// start and queue the job: the stop is then queued without waiting for it. Before, a timed-out
// systemctl that had not yet asked systemd left the unit running, and the stop waited until its
// context ended (CI under load, 2026-12-07: "following the stop of sglang.service: context
// deadline exceeded" after 1m45s). Here every systemctl on the host starts half a second late.
func TestStopWhenSystemctlStartsSlowly(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	h, r := bootRemote(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	in, err := r.Start(ctx, launch(driver{simBin: testhost.SimPath}, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = h.Nsenter(rctx, "rm", "-f", "/usr/local/sbin/systemctl")
		r.Restore(rctx)
	}()
	if _, err := in.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	// First on root's PATH (/usr/local/sbin), for the shell's commands from now on.
	slow := "#!/bin/sh\nsleep 0.5\nexec /usr/bin/systemctl \"$@\"\n"
	if err := h.WriteFile("/usr/local/sbin/systemctl", []byte(slow), 0o755); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	res, err := in.Stop(sctx, nil)
	if err != nil || !res.Clean {
		t.Fatalf("stop with a slow systemctl: %+v %v", res, err)
	}
	out, err := h.Run(ctx, "/usr/bin/systemctl is-active sglang.service")
	if st := strings.TrimSpace(string(out)); st != "inactive" {
		t.Errorf("the unit is %q after the stop (%v)", st, err)
	}
}

// TestReadinessPollsTheHostOnNews: while a server loads (4 s here), WaitReady polls the host (a
// command: the state and the journal) on the watcher's news and once a second, not at every
// backoff step, and no loop on the host checks the port: the processes started on the host during
// the wait are counted by its PID namespace's last PID. Before, a 4 s wait polled 22 times and
// started 189 processes (ss, grep and sleep every 100 ms; timeout, sh, journalctl and head per
// poll); now 5 polls and 31 processes.
func TestReadinessPollsTheHostOnNews(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	h, r := bootRemote(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	lastPID := func() int { return hostLastPID(ctx, t, h) }
	// 60 s of load and 20 of warmup at a time scale of 0.05: 3 s, then 1 s.
	l := launch(driver{simBin: testhost.SimPath}, map[string]string{"SGLANGSIM_LOAD_SECONDS": "60", "SGLANGSIM_WARMUP_SECONDS": "20"})
	in, err := r.Start(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	cmds, pid0 := r.conn.shellCmds.Load(), lastPID()
	ready, err := in.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	procs := lastPID() - pid0 - 1 // the first read's own process
	polls := r.conn.shellCmds.Load() - cmds
	t.Logf("ready after %v: %d polls, %d processes on the host, %d probes", ready.Elapsed, polls, procs, ready.Probes)
	// A poll a second, one at the start, and one for each line that says the port opens next
	// (sglangsim logs three) or that warming up ended.
	maxPolls := int64(ready.Elapsed/time.Second) + 1 + 5
	if polls > maxPolls {
		t.Errorf("%d polls in %v, want at most %d", polls, ready.Elapsed, maxPolls)
	}
	if max := 8*maxPolls + 10; int64(procs) > max {
		t.Errorf("%d processes started on the host during the wait, want at most %d (the watcher's and %d polls')", procs, max, maxPolls)
	}
	// The probe, not the host, watches the port: it runs far more often than the host is polled
	// (they went in lockstep before, one probe a poll). Not a rate: on a machine at a load of 15 a
	// probe took 0.8 s (7 in 5.4 s; go test -p 3, 2026-12-07).
	if want := max(3*polls, 5); int64(ready.Probes) < want {
		t.Errorf("%d probes and %d polls of the host in %v, want at least %d probes: the probe, not the host, watches the port (every 100 ms)",
			ready.Probes, polls, ready.Elapsed, want)
	}
	if res, err := in.Stop(ctx, nil); err != nil || !res.Clean {
		t.Fatalf("stop: %+v %v", res, err)
	}
}

// hostLastPID is the last PID the host's PID namespace gave out: the processes started on the host
// between two reads are their difference, less one (the first read's own).
func hostLastPID(ctx context.Context, t *testing.T, h *testhost.Host) int {
	t.Helper()
	out, err := h.Nsenter(ctx, "cat", "/proc/sys/kernel/ns_last_pid")
	n, cerr := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || cerr != nil {
		t.Fatalf("reading the host's last PID: %v %v %q", err, cerr, out)
	}
	return n
}

// TestKillTreeChecksTheParent: the timeout's kill ends a command's subshell and what runs under it,
// and sends nothing when the PID is no longer the shell's child (the command ended and its PID may
// be another process's). Run here, on this machine's sh and ps.
func TestKillTreeChecksTheParent(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sh", "-c", "sleep 3004 & sleep 3005; true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer cmd.Process.Kill()
	children := func() string {
		out, _ := exec.Command("sh", "-c", "pgrep -P "+strconv.Itoa(cmd.Process.Pid)+" || true").Output()
		return strings.TrimSpace(string(out))
	}
	waitUntil(t, 10*time.Second, "the command's two sleeps", func() bool { return len(strings.Fields(children())) == 2 })
	grandchildren := strings.Fields(children())
	if out, err := exec.Command("sh", "-c", killTree(cmd.Process.Pid, os.Getpid()+100000)).CombinedOutput(); err != nil {
		t.Fatalf("kill with another parent: %v %s", err, out)
	}
	select {
	case err := <-done:
		t.Fatalf("killed though its parent is not the one named: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if out, err := exec.Command("sh", "-c", killTree(cmd.Process.Pid, os.Getpid())).CombinedOutput(); err != nil {
		t.Fatalf("kill: %v %s", err, out)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the command still runs 10 s after its kill")
	}
	for _, g := range grandchildren {
		pid, _ := strconv.Atoi(g)
		waitUntil(t, 10*time.Second, "sleep "+g+" gone", func() bool { return syscall.Kill(pid, 0) != nil })
	}
}
