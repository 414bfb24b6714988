package testhost

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClusterHostsReachEachOther: every host of a cluster reaches every other one (sshd's greeting
// over the shared bridge), and the machine reaches each.
func TestClusterHostsReachEachOther(t *testing.T) {
	hosts := BootCluster(t, 3, Options{NoUnit: true})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for i, h := range hosts {
		if want := fmt.Sprintf("%s%d.%d", Subnet, hosts[0].N, i+2); h.Addr != want || h.N != hosts[0].N {
			t.Fatalf("host %d at %s, want %s", i, h.Addr, want)
		}
		out, err := exec.Command("ip", "-o", "route", "get", h.Addr).Output()
		if err != nil || !strings.Contains(string(out), " dev "+h.Bridge()+" ") {
			t.Fatalf("%s does not route via the bridge %s: %q %v", h.Addr, h.Bridge(), out, err)
		}
		// The shared directory: what one host writes, every other reads, and the machine too.
		if out, err := h.Run(ctx, fmt.Sprintf("echo from %s > %s/%s", h.Name, SharedPath, h.Name)); err != nil {
			t.Fatalf("%s: writing %s: %v: %s", h.Name, SharedPath, err, out)
		}
		if b, err := os.ReadFile(filepath.Join(h.SharedDir(), h.Name)); err != nil || string(b) != "from "+h.Name+"\n" {
			t.Fatalf("the machine's view of %s: %v %q", SharedPath, err, b)
		}
		for _, peer := range hosts {
			// Over SSH (the machine reaches h), h greets peer by name (/etc/hosts) on port 22.
			cmd := fmt.Sprintf("getent hosts %s && timeout 5 bash -c 'exec 3<>/dev/tcp/%s/22; head -c 4 <&3'", peer.Name, peer.Name)
			out, err := h.Run(ctx, cmd)
			if err != nil || !strings.Contains(string(out), peer.Addr) || !strings.HasSuffix(string(out), "SSH-") {
				t.Fatalf("%s -> %s: %v: %q", h.Name, peer.Name, err, out)
			}
			if i == len(hosts)-1 { // every host wrote its file by now
				out, err := h.Run(ctx, "cat "+SharedPath+"/"+peer.Name)
				if err != nil || string(out) != "from "+peer.Name+"\n" {
					t.Fatalf("%s reads %s's shared file: %v %q", h.Name, peer.Name, err, out)
				}
			}
		}
	}
}

// TestClusterTeardownLeavesNothing: namespaces, veths, the bridge, the overlays and the hosts'
// processes are gone once the test that booted them ends.
func TestClusterTeardownLeavesNothing(t *testing.T) {
	type left struct {
		name, root, veth, bridge, shared string
		pid1                             int
	}
	var hs []left
	t.Run("boot", func(t *testing.T) {
		for _, h := range BootCluster(t, 2, Options{NoUnit: true}) {
			hs = append(hs, left{h.Name, h.Root, h.vethHost, h.Bridge(), h.SharedDir(), h.pid1})
		}
	})
	if len(hs) == 0 {
		t.Skip("boot skipped")
	}
	netns, _ := exec.Command("ip", "netns", "list").Output()
	for _, h := range hs {
		if strings.Contains(string(netns), h.name) {
			t.Errorf("netns %s left", h.name)
		}
		if mounted(h.root) {
			t.Errorf("overlay %s still mounted", h.root)
		}
		for _, l := range []string{h.veth, h.bridge} {
			if exec.Command("ip", "link", "show", l).Run() == nil {
				t.Errorf("link %s left", l)
			}
		}
		if _, err := os.Stat(h.shared); err == nil {
			t.Errorf("shared directory %s left", h.shared)
		}
		if h.pid1 <= 0 || !exited(h.pid1, 10*time.Second) {
			t.Errorf("PID 1 %d of %s still alive", h.pid1, h.name)
		}
	}
}

// exited waits until pid is gone (or a zombie: dead, not yet reaped by the machine's init).
func exited(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && strings.HasPrefix(string(b[i:]), ") Z") {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestHarnessNames(t *testing.T) {
	for name, want := range map[string]int{"sst-123-4": 123, "sst-123-4-5": 123, "sst-sim-123": -1, "sst-123": -1,
		"sst-123-4-5-6": -1, "sst-1x-4": -1, "other-123-4": -1} {
		pid, ok := harnessPid(name)
		if (want < 0 && ok) || (want >= 0 && (!ok || pid != want)) {
			t.Errorf("harnessPid(%q) = %d %v, want %d", name, pid, ok, want)
		}
	}
	for name, want := range map[string]int{"s123h4": 123, "s123c4": 123, "s123h4x5": 123, "s123c4x12": 123, "s123b4": 123,
		"s123b": -1, "s123h4x": -1, "s123q4": -1, "sit0": -1, "s123": -1, "eth0": -1, "s12b4x5": -1, "s123h-4": -1} {
		pid, ok := linkPid(name)
		if (want < 0 && ok) || (want >= 0 && (!ok || pid != want)) {
			t.Errorf("linkPid(%q) = %d %v, want %d", name, pid, ok, want)
		}
	}
}

// deadPid is a pid that surely ended: a child the test started and reaped (the test skips if it
// was reused at once).
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if alive(cmd.Process.Pid) {
		t.Skip("the pid was reused at once")
	}
	return cmd.Process.Pid
}

// TestReapStaleBridge: the bridge of a cluster whose test process died is removed by a later boot.
func TestReapStaleBridge(t *testing.T) {
	if msg := Requirements(); msg != "" {
		t.Skip(msg)
	}
	if testing.Short() {
		t.Skip("testhost: real hosts are skipped with -short")
	}
	dead := deadPid(t)
	name := fmt.Sprintf("s%db254", dead) // no address: nothing routes to it
	if err := run("ip", "link", "add", "name", name, "type", "bridge"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
	reapStale()
	if exec.Command("ip", "link", "show", name).Run() == nil {
		t.Fatalf("stale bridge %s left by reapStale", name)
	}
}

// TestReapStaleSimulatorBuild: a simulator build whose process is gone is removed by a later boot
// only once it is older than any test run (pids are reused within minutes here: a build reaped
// as its pid's went missing under a live test process in CI, 2026-12-07).
func TestReapStaleSimulatorBuild(t *testing.T) {
	if msg := Requirements(); msg != "" {
		t.Skip(msg)
	}
	if testing.Short() {
		t.Skip("testhost: real hosts are skipped with -short")
	}
	dir := fmt.Sprintf("/var/tmp/sst-sim-%d", deadPid(t))
	if _, err := os.Stat(dir); err == nil {
		t.Skipf("%s is there already", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "sglangsim")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	reapStale()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("a build made a moment ago was reaped: %v", err)
	}
	old := time.Now().Add(-simKeep - time.Minute)
	if err := os.Chtimes(bin, old, old); err != nil {
		t.Fatal(err)
	}
	reapStale()
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("a build %s old of a process that is gone was left", simKeep+time.Minute)
	}
}
