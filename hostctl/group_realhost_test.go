package hostctl

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/sweep"
)

// bootPair boots two systemd+sshd test hosts of 4 simulated GPUs on one bridge and opens them as a
// group: nodes a (rank 0) and b.
func bootPair(t *testing.T, distPort int) ([]*testhost.Host, *openGroup) {
	t.Helper()
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	hosts := testhost.BootCluster(t, 2, testhost.Options{Env: fastEnv, GPUs: 4})
	h := sweep.Host{Name: "pair", GPUs: 4, Unit: "sglang.service", Driver: sweep.DriverSSH, DistInitPort: distPort,
		Nodes: []sweep.Node{{Name: "a", Address: hosts[0].Addr}, {Name: "b", Address: hosts[1].Addr}}}
	var nodeSSH []SSHOptions
	for _, th := range hosts {
		nodeSSH = append(nodeSSH, SSHOptions{Address: th.Addr, User: "root", IdentityFile: th.KeyFile,
			KnownHosts: th.KnownHosts, ConfigFile: "none", noAgent: true})
	}
	d, err := Open(t.Context(), h, Options{Sweep: "group", nodeSSH: nodeSSH})
	if err != nil {
		t.Fatal(err)
	}
	g := d.(*openGroup)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = g.Restore(ctx)
		g.Close()
	})
	return hosts, g
}

// groupLaunch is a point of tp over the group, with NCCL's transport logged.
func groupLaunch(tp int, env map[string]string) Launch {
	e := map[string]string{"NCCL_DEBUG": "INFO", "SGLANGSIM_NCCL_NET": "Socket", "SGL_FORCE_SHUTDOWN": "1"}
	for k, v := range fastEnv {
		e[k] = v
	}
	for k, v := range env {
		e[k] = v
	}
	argv := []string{testhost.SimPath, "--model-path", "/models/Qwen3.5-122B-A10B", "--tp-size", strconv.Itoa(tp), "--port", "30000"}
	return Launch{Argv: argv, Env: e, Port: 30000, ReadyTimeout: 45 * time.Second, StopTimeout: 10 * time.Second, JoinTimeout: 5 * time.Second}
}

// unitActive is sglang.service's ActiveState on a test host.
func unitActive(ctx context.Context, h *testhost.Host) string {
	out, _ := h.Nsenter(ctx, "systemctl", "show", "-p", "ActiveState", "--value", "sglang.service")
	return strings.TrimSpace(string(out))
}

// TestGroupSpansTwoTestHosts: tp 8 over two 4-GPU test hosts starts one rank on each (rank 1 told
// rank 0's address), serves through rank 0, records every rank's provenance with NCCL's
// transport; killing rank 1's server mid-run fails the point within seconds naming its node, and
// the stop leaves no rank running; a tp 4 point then runs on node a alone, another beside it on
// node b (slot 1), and a tp 8 point waits for both; restore restores both.
func TestGroupSpansTwoTestHosts(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	hosts, g := bootPair(t, 0)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	in, err := g.Start(ctx, groupLaunch(8, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	for i, h := range hosts {
		if st := unitActive(ctx, h); st != "active" {
			t.Errorf("node %d: sglang.service %s, want active (a rank)", i, st)
		}
		// The rank's command line, as its process has it (the launch script execs it).
		show, _ := h.Nsenter(ctx, "sh", "-c", "tr '\\0' ' ' </proc/$(systemctl show -p MainPID --value sglang.service)/cmdline")
		want := "--nnodes 2 --node-rank " + strconv.Itoa(i) + " --dist-init-addr " + hosts[0].Addr + ":"
		if !strings.Contains(string(show), want) {
			t.Errorf("node %d's command line lacks %q: %s", i, want, show)
		}
	}
	// Rank 0 serves generations.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, in.BaseURL()+"/generate",
		strings.NewReader(`{"text":"hello","sampling_params":{"max_new_tokens":4,"temperature":0}}`))
	resp, err := in.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("rank 0 /generate: %d %s", resp.StatusCode, body)
	}
	prov, err := g.Provenance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(prov.Ranks) != 2 || !strings.HasPrefix(prov.DistInit, hosts[0].Addr+":") {
		t.Fatalf("provenance ranks %+v dist %q, want 2 ranks at %s", prov.Ranks, prov.DistInit, hosts[0].Addr)
	}
	for i, rp := range prov.Ranks {
		if rp.Node != []string{"a", "b"}[i] || rp.Hostname != hosts[i].Name || !strings.HasPrefix(rp.Transport, "Socket: ") || len(rp.GPUs) == 0 {
			t.Errorf("rank %d provenance %+v, want node %s on %s, NCCL over Socket, its GPUs", i, rp, []string{"a", "b"}[i], hosts[i].Name)
		}
	}

	// Rank 1's server dies mid-run: the point fails within seconds, naming node b.
	pid, _ := hosts[1].Nsenter(ctx, "systemctl", "show", "-p", "MainPID", "--value", "sglang.service")
	if _, err := hosts[1].Nsenter(ctx, "kill", "-9", strings.TrimSpace(string(pid))); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var f *Failure
	for f == nil && time.Since(killed) < 30*time.Second {
		time.Sleep(200 * time.Millisecond)
		if f, err = in.Check(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if f == nil || !strings.HasPrefix(f.Detail, "rank 1 on b: ") {
		t.Fatalf("after rank 1 was killed: %v, want a failure of rank 1 on b", f)
	}
	t.Logf("rank 1 killed: %s after %v", f, time.Since(killed).Round(time.Millisecond))
	if _, err := in.Stop(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for i, h := range hosts {
		if st := unitActive(ctx, h); st == "active" || st == "activating" || st == "deactivating" {
			t.Errorf("node %d after the stop: %s", i, st)
		}
	}

	// tp 4 fits node a: one rank, no rank flags, node b untouched.
	in, err = g.Start(ctx, groupLaunch(4, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.WaitReady(ctx); err != nil {
		t.Fatalf("tp 4: %v", err)
	}
	show, _ := hosts[0].Nsenter(ctx, "systemctl", "show", "-p", "ExecStart", "--value", "sglang.service")
	if strings.Contains(string(show), "--nnodes") {
		t.Errorf("tp 4 runs with rank flags: %s", show)
	}
	if st := unitActive(ctx, hosts[1]); st == "active" {
		t.Errorf("node b runs during a tp 4 point")
	}
	// Slot 1 runs its tp 4 point on node b beside slot 0's on node a; a tp 8 point then waits until
	// both nodes are free.
	in1, err := g.Slot(1).Start(ctx, groupLaunch(4, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in1.WaitReady(ctx); err != nil {
		t.Fatalf("slot 1's tp 4: %v", err)
	}
	for i, h := range hosts {
		if st := unitActive(ctx, h); st != "active" {
			t.Errorf("node %d: %s, want a point on each node", i, st)
		}
	}
	if _, err := in.Stop(ctx, nil); err != nil {
		t.Fatal(err)
	}
	started := make(chan Instance, 1)
	go func() {
		in8, err := g.Slot(0).Start(ctx, groupLaunch(8, nil))
		if err != nil {
			t.Error(err)
		}
		started <- in8
	}()
	select {
	case <-started:
		t.Fatal("tp 8 started while slot 1's point held node b")
	case <-time.After(2 * time.Second):
	}
	if _, err := in1.Stop(ctx, nil); err != nil {
		t.Fatal(err)
	}
	in8 := <-started
	if in8 == nil {
		t.FailNow()
	}
	if _, err := in8.WaitReady(ctx); err != nil {
		t.Fatalf("tp 8 after the nodes were free: %v", err)
	}
	if _, err := in8.Stop(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := g.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	for i, h := range hosts {
		out, _ := h.Nsenter(ctx, "systemctl", "cat", "sglang.service")
		if strings.Contains(string(out), "specsweep") {
			t.Errorf("node %d after restore still has specsweep's drop-in:\n%s", i, out)
		}
	}
}

// TestGroupRankThatNeverJoinsOnTestHosts: rank 1 never reaches the rendezvous (the simulator's
// never-join, set in node b's unit by the operator): the point fails crash_during_start after the
// join timeout, far before torch's 10 minutes, and neither rank is left running.
func TestGroupRankThatNeverJoinsOnTestHosts(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	hosts, g := bootPair(t, 29600)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if err := hosts[1].WriteFile("/etc/systemd/system/sglang.service.d/10-operator.conf",
		[]byte("[Service]\nEnvironment=SGLANGSIM_FAIL=never-join\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := g.Start(ctx, groupLaunch(8, nil))
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	_, err = in.WaitReady(ctx)
	f, ok := AsFailure(err)
	if !ok || f.Class != ClassCrashDuringStart || !strings.Contains(f.Detail, "rendezvous at "+hosts[0].Addr+":29600") {
		t.Fatalf("WaitReady = %v, want crash_during_start at the rendezvous", err)
	}
	t.Logf("never joined: %s after %v", f, time.Since(started).Round(time.Millisecond))
	if _, err := in.Stop(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for i, h := range hosts {
		if st := unitActive(ctx, h); st == "active" || st == "activating" || st == "deactivating" {
			t.Errorf("node %d after the stop: %s", i, st)
		}
	}
}
