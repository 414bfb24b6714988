package testhost

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// CPUGroup is a cgroup of the v1 cpu controller whose processes the scheduler serves ahead of the
// rest of the machine, up to a cap: for the tests that measure speed (internal/e2e's lanes), so
// that they can run beside CPU-heavy tests and still measure what the simulator makes, not what the
// loaded machine lets it make. The weight matters because of autogroup scheduling
// (kernel.sched_autogroup_enabled): every session is weighed alike, and every service a test host's
// systemd starts and every SSH login is a session of its own, so without a group the measured
// processes are a few sessions among dozens. The cap keeps a busy member (Chromium's tabs) from
// taking every core from the hosts beside it, which leave SSH keepalives unanswered when starved.
//
// The weight gives the group its share of the CPU, not its wake-ups on time: a woken member waits
// for the running task to finish its slice (the kernel's base slice, 1.4 ms on this machine),
// several times per request a client makes, which moved a simulated point's figure by up to 6%
// beside 25 busy loops.
// So a member started by Start, and a host's systemd, run with a short slice (SetSlice): on Linux
// 6.12 and later the scheduler lets a task with a shorter slice preempt on wake-up; the slice is
// inherited by everything the member starts. (Chromium, started by chromedp through Script, keeps
// the default.)
//
// A nil *CPUGroup (no v1 cpu hierarchy here) does nothing: its members run as any process does.
type CPUGroup struct {
	dir   string
	slice time.Duration
}

// NewCPUGroup makes the cgroup name under this process's cgroup of the cpu controller, with
// cpu.shares shares (1024 is one session's weight) and at most cores CPUs' worth of time (0: no
// cap; SetCores changes it). It
// returns nil, and no error, on a machine without a v1 cpu hierarchy. Close removes it.
func NewCPUGroup(name string, shares int, cores float64) (*CPUGroup, error) {
	roots, err := ownCgroupDirs(false, "cpu")
	if err != nil || len(roots) == 0 {
		return nil, err
	}
	g := &CPUGroup{dir: filepath.Join(roots[0], name)}
	if err := os.Mkdir(g.dir, 0o755); err != nil && !os.IsExist(err) {
		return nil, fmt.Errorf("testhost: make cpu cgroup %s: %w", g.dir, err)
	}
	if err := g.set("cpu.shares", strconv.Itoa(shares)); err != nil {
		g.Close()
		return nil, err
	}
	if err := g.SetCores(cores); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// cfsPeriod is the kernel's default cfs period, in µs.
const cfsPeriod = 100000

// SetCores caps the group at cores CPUs' worth of time; 0 lifts the cap.
func (g *CPUGroup) SetCores(cores float64) error {
	if g == nil {
		return nil
	}
	quota := -1
	if cores > 0 {
		quota = int(cores * cfsPeriod)
	}
	if err := g.set("cpu.cfs_period_us", strconv.Itoa(cfsPeriod)); err != nil {
		return err
	}
	return g.set("cpu.cfs_quota_us", strconv.Itoa(quota))
}

func (g *CPUGroup) set(file, v string) error {
	if err := os.WriteFile(filepath.Join(g.dir, file), []byte(v), 0o644); err != nil {
		return fmt.Errorf("testhost: set %s of %s to %s: %w", file, g.dir, v, err)
	}
	return nil
}

// Dir is the group's directory ("" for a nil group).
func (g *CPUGroup) Dir() string {
	if g == nil {
		return ""
	}
	return g.dir
}

// Command makes cmd join the group before it runs its program: a shell writes its own PID into the
// group and execs the program in its place (same PID), so every process the program starts is
// born in the group. Moving a running process would leave behind the children it started first.
func (g *CPUGroup) Command(cmd *exec.Cmd) {
	if g == nil {
		return
	}
	args := append([]string{"sh", "-c", `echo $$ > "$0" || exit 125; exec "$@"`,
		filepath.Join(g.dir, "cgroup.procs"), cmd.Path}, cmd.Args[1:]...)
	cmd.Path, cmd.Args = "/bin/sh", args
}

// SetSlice sets the scheduler slice Start's commands and a host's systemd run with (0: the
// kernel's default). The kernel takes 0.1 ms to 100 ms, and ignores it before Linux 6.12. It tries
// the slice on a thread of its own first: where the kernel refuses it (a seccomp filter) the group
// keeps the default and the error says why, so that a caller may go on. (The kernel clamps a slice
// out of its range.)
func (g *CPUGroup) SetSlice(d time.Duration) error {
	if g == nil {
		return nil
	}
	if d < 0 {
		return fmt.Errorf("testhost: a negative scheduler slice (%s) for the cpu group %s", d, g.dir)
	}
	g.slice = d
	if err := g.onSlicedThread(func() error { return nil }); err != nil {
		g.slice = 0
		return err
	}
	return nil
}

// Start starts cmd in the group (Command) with the group's slice: it forks from a thread of its own
// whose slice it set, and the child keeps it through exec. The thread ends once cmd has started,
// so cmd must not ask for a signal at its parent's death (SysProcAttr.Pdeathsig: the parent is
// that thread). With a nil group it is cmd.Start.
func (g *CPUGroup) Start(cmd *exec.Cmd) error {
	if g == nil {
		return cmd.Start()
	}
	g.Command(cmd)
	return g.onSlicedThread(cmd.Start)
}

// onSlicedThread runs fn on a thread of its own with the group's slice, and returns its error (or
// the kernel's refusal of the slice).
func (g *CPUGroup) onSlicedThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, and its slice, end with this goroutine
		if err := g.sliceThisThread(); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// sliceThisThread gives the calling thread, locked to its goroutine, the group's slice.
func (g *CPUGroup) sliceThisThread() error {
	if g == nil || g.slice <= 0 {
		return nil
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL, Runtime: uint64(g.slice.Nanoseconds())}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		return fmt.Errorf("testhost: set a scheduler slice of %s for the cpu group %s: %w", g.slice, g.dir, err)
	}
	return nil
}

// Script is a shell script that joins the group and then runs bin with its arguments (for a
// program started by a library that takes only a path, as chromedp's allocator does), written
// under dir.
func (g *CPUGroup) Script(dir, bin string) (string, error) {
	if g == nil {
		return bin, nil
	}
	p := filepath.Join(dir, filepath.Base(bin)+"-in-cpu-group")
	text := "#!/bin/sh\necho $$ > " + shq(filepath.Join(g.dir, "cgroup.procs")) + " || exit 125\nexec " + shq(bin) + " \"$@\"\n"
	if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
		return "", fmt.Errorf("testhost: write %s: %w", p, err)
	}
	return p, nil
}

// Close removes the group and every cgroup under it; it fails while a process is still in one.
func (g *CPUGroup) Close() error {
	if g == nil {
		return nil
	}
	return removeCgroup(g.dir)
}

// shq quotes s for sh.
func shq(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
