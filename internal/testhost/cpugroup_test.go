package testhost

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCPUGroup: a command made to join the group (Command, Script) has its children born in it,
// and every process of a host booted with the group (its systemd, a unit's process, an SSH login's
// sshd) is under it in the cpu hierarchy; the group's weight and cap are written, and Close removes
// it once its processes are gone.
func TestCPUGroup(t *testing.T) {
	if msg := Requirements(); msg != "" {
		t.Skip(msg)
	}
	g, err := NewCPUGroup("sst-test-cpugroup-"+strings.ReplaceAll(t.Name(), "/", "-"), 8192, 1.5)
	if err != nil {
		t.Fatal(err)
	}
	if g == nil {
		t.Skip("no cgroup v1 cpu hierarchy on this machine")
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if _, err := os.Stat(g.Dir()); !os.IsNotExist(err) {
			t.Errorf("the group %s is still there: %v", g.Dir(), err)
		}
	})
	for file, want := range map[string]string{"cpu.shares": "8192", "cpu.cfs_quota_us": "150000"} {
		if b, err := os.ReadFile(filepath.Join(g.Dir(), file)); err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q (%v), want %s", file, b, err, want)
		}
	}
	if err := g.SetCores(0); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(g.Dir(), "cpu.cfs_quota_us")); strings.TrimSpace(string(b)) != "-1" {
		t.Errorf("cpu.cfs_quota_us = %q after SetCores(0), want -1 (no cap)", b)
	}
	own := cpuCgroupOf(t, "self")
	rel := strings.TrimPrefix(g.Dir(), strings.TrimSuffix(g.Dir(), "/"+filepath.Base(g.Dir())))
	wantPath := filepath.Join(own, rel)

	// A child's child, started before the shell could be moved by anyone from outside; by Start, it
	// runs with the group's slice too (where the kernel reports one), and this process does not.
	const slice = 100 * time.Microsecond
	if err := g.SetSlice(-time.Millisecond); err == nil {
		t.Errorf("SetSlice took a negative slice")
	}
	if err := g.SetSlice(slice); err != nil {
		t.Fatalf("SetSlice(%s): %v", slice, err)
	}
	reportsSlices := sliceOf(t, "self") != 0
	for _, viaStart := range []bool{false, true} {
		cmd := exec.Command("/bin/sh", "-c", `sleep 30 & echo $!; wait`)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if viaStart {
			err = g.Start(cmd)
		} else {
			g.Command(cmd)
			err = cmd.Start()
		}
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 32)
		n, _ := out.Read(buf)
		grandchild := strings.TrimSpace(string(buf[:n]))
		if got := cpuCgroupOf(t, grandchild); got != wantPath {
			t.Errorf("the command's child (pid %s) is in cpu cgroup %q, want %q", grandchild, got, wantPath)
		}
		if got := cpuCgroupOf(t, "self"); got != own {
			t.Errorf("the test process moved to %q", got)
		}
		if got := sliceOf(t, grandchild); reportsSlices && viaStart && got != slice {
			t.Errorf("the child of a command started by Start runs with a slice of %s, want %s", got, slice)
		}
		_ = exec.Command("kill", grandchild).Run()
		_ = cmd.Wait()
	}
	if got := sliceOf(t, "self"); reportsSlices && got == slice {
		t.Errorf("this process's main thread took the group's slice")
	}

	script, err := g.Script(t.TempDir(), "/bin/cat")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(script, "/proc/self/cgroup").Output(); err != nil || !strings.Contains(string(b), ":"+wantPath+"\n") {
		t.Errorf("the script's program: %v\n%s\nwant cpu cgroup %s", err, b, wantPath)
	}

	h := Boot(t, 1, Options{NoUnit: true, CPUGroup: g})[0]
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if out, err := h.Run(ctx, "systemd-run --unit=busy sleep 600"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _, _ = h.Run(lctx, "exec sleep 601") }()
	hostDir := filepath.Join(wantPath, h.Name)
	pids := map[string]string{} // comm -> a pid of it
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && !(pids["sleep"] != "" && pids["sshd"] != "" && pids["systemd"] != "") {
		pids = map[string]string{}
		b, err := os.ReadFile(filepath.Join(g.Dir(), h.Name, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		// Processes of the host's own cpu cgroups (its systemd may make some) are under it too.
		err = filepath.WalkDir(filepath.Join(g.Dir(), h.Name), func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
				return err
			}
			more, _ := os.ReadFile(p)
			b = append(b, more...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, pid := range strings.Fields(string(b)) {
			comm, _ := os.ReadFile("/proc/" + pid + "/comm")
			if got := cpuCgroupOf(t, pid); got != "" && got != hostDir && !strings.HasPrefix(got, hostDir+"/") {
				t.Errorf("%s (pid %s) is in cpu cgroup %s, not under %s", strings.TrimSpace(string(comm)), pid, got, hostDir)
			}
			pids[strings.TrimSpace(string(comm))] = pid
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !(pids["sleep"] != "" && pids["sshd"] != "" && pids["systemd"] != "") {
		t.Errorf("processes in the host's cpu cgroup %v; want the unit's sleep, the login's sshd and systemd among them", pids)
	}
	// The host's systemd got the group's slice when it started, and everything it starts with it.
	for name, pid := range pids {
		if got := sliceOf(t, pid); reportsSlices && got != slice {
			t.Errorf("the host's %s (pid %s) runs with a slice of %s, want the group's %s", name, pid, got, slice)
		}
	}
}

// sliceOf is the scheduler slice pid ("self": this thread) runs with, as sched_getattr reports it
// (0: not reported, before Linux 6.12, or the process is gone).
func sliceOf(t *testing.T, pid string) time.Duration {
	t.Helper()
	n := 0
	if pid != "self" {
		var err error
		if n, err = strconv.Atoi(pid); err != nil {
			t.Fatalf("pid %q: %v", pid, err)
		}
	}
	attr, err := unix.SchedGetAttr(n, 0)
	if err != nil || attr.Policy != unix.SCHED_NORMAL {
		return 0
	}
	return time.Duration(attr.Runtime)
}

// cpuCgroupOf is the path of pid's ("self" for this process) cgroup in the v1 cpu controller's
// hierarchy, "" when it has none or is gone.
func cpuCgroupOf(t *testing.T, pid string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && f[1] != "" && hasOption(f[1], "cpu") {
			return f[2]
		}
	}
	return ""
}
