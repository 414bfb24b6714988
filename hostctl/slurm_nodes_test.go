package hostctl

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	specsweep "github.com/specsweep/specsweep/sweep"
)

// TestJobScriptSpansNodes: a launch of tp 8 on a cluster of 4-GPU nodes whose jobs may take two is
// one job of two nodes, a task and 4 GPUs each; srun starts one rank per node with its node id and
// the first node's address; tp 4 stays one node's; a tp no whole number of nodes holds is refused.
func TestJobScriptSpansNodes(t *testing.T) {
	o := SlurmOptions{Name: "c", Sweep: "s", GPUsPerNode: 4, MaxNodes: 2, DistInitPort: 29600}
	l := Launch{Argv: []string{"/usr/bin/sglang", "--tp-size", "8", "--port", "30000"}, Env: map[string]string{"A": "b c"},
		Files: []File{{Path: "/etc/x.json", Data: []byte("{}")}}}.withDefaults()
	b, err := jobScript(o, l, "specsweep.s.p", "specsweep:sweep=s:point=p", "/o/%j.out")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{"#SBATCH --nodes=2\n#SBATCH --ntasks=2\n#SBATCH --gres=gpu:4\n",
		"export A='b c'\n", "specsweep_port=29600\n", `echo "specsweep: dist-init-addr $SPECSWEEP_DIST_INIT"`,
		"exec srun --nodes=2 --ntasks-per-node=1 --kill-on-bad-exit=1 sh -c ",
		`--nnodes 2 --node-rank "$SLURM_NODEID" --dist-init-addr "$SPECSWEEP_DIST_INIT"`, "specsweep_file "} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
	l.Argv[2] = "4"
	if b, _ := jobScript(o, l, "n", "c", "/o/%j.out"); !strings.Contains(string(b), "#SBATCH --nodes=1\n#SBATCH --ntasks=1\n#SBATCH --gres=gpu:4\n") || strings.Contains(string(b), "srun") {
		t.Errorf("tp 4 on 4-GPU nodes:\n%s", b)
	}
	for _, tp := range []string{"6", "16"} {
		l.Argv[2] = tp
		if _, err := jobScript(o, l, "n", "c", "/o/%j.out"); err == nil || !strings.Contains(err.Error(), "whole number of nodes") {
			t.Errorf("tp %s: %v, want a refusal", tp, err)
		}
	}
}

// TestSlurmJobSpansTwoNodes: on a real cluster of two 4-GPU compute nodes, tp 8 is one job of two
// ranks that serves through the first node and records both nodes with NCCL's transport; killing
// rank 1's server fails the job's point naming rank 1's node; ranks that never meet fail after the
// join timeout; nothing is left queued.
func TestSlurmJobSpansTwoNodes(t *testing.T) {
	t.Parallel() // its own test hosts: shares nothing (docs/development.md, "Tests")
	c, login := bootSlurm(t, 2, testhost.Options{NoUnit: true})
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	d := openCluster(t, ctx, c, login, 2, "nodes")
	l := groupLaunch(8, nil)
	l.Argv = append(l.Argv, "--host", "0.0.0.0")
	l.Tag = "0123456789ab"
	h := d.Slot(0)
	in, err := h.Start(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	prov, err := h.Provenance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := c.NodeNames()
	if len(prov.Ranks) != 2 || !strings.HasPrefix(prov.DistInit, names[0]+":") {
		t.Fatalf("provenance ranks %+v dist %q, want two ranks, rank 0 on %s", prov.Ranks, prov.DistInit, names[0])
	}
	for i, rp := range prov.Ranks {
		if rp.Node != names[i] || !strings.HasPrefix(rp.Transport, "Socket: ") {
			t.Errorf("rank %d: %+v, want node %s over NCCL's Socket transport", i, rp, names[i])
		}
	}
	// Rank 1's server dies: the point fails naming node 2.
	if _, err := c.Nodes[1].Run(ctx, "pkill -9 -f '^"+testhost.SimPath+" '"); err != nil {
		t.Fatal(err)
	}
	var f *Failure
	for start := time.Now(); f == nil && time.Since(start) < time.Minute; {
		time.Sleep(300 * time.Millisecond)
		if f, err = in.Check(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if f == nil || !strings.HasPrefix(f.Detail, "rank 1 on "+names[1]+": ") {
		t.Fatalf("after rank 1 was killed: %v (%q), want a failure naming rank 1 on %s", f, func() []string {
			if f != nil {
				return f.Evidence
			}
			return nil
		}(), names[1])
	}
	t.Logf("rank 1 killed: %s", f)
	if _, err := in.Stop(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// Ranks that never meet at the rendezvous fail the point after the join timeout (5 s), not
	// torch's 10 minutes.
	l.Env["SGLANGSIM_FAIL"] = "never-join"
	in, err = h.Start(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, err = in.WaitReady(ctx)
	if f, ok := AsFailure(err); !ok || f.Class != ClassCrashDuringStart || !strings.Contains(f.Detail, "torch's rendezvous at "+names[0]+":") {
		t.Fatalf("never-join: %v, want crash_during_start at the rendezvous on %s", err, names[0])
	}
	t.Logf("never joined: %v after %v", err, time.Since(t0).Round(time.Millisecond))
	if _, err := in.Stop(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Run(ctx, "squeue -h -o '%i %j'"); err != nil || strings.Contains(string(out), "specsweep.") {
		t.Errorf("jobs left: %q %v", out, err)
	}
}

// TestPeerLostNodes: the node whose scheduler logged gloo's closed connection (in a traceback under
// its "[... TPn]" line) followed another's failure.
func TestPeerLostNodes(t *testing.T) {
	lines := []string{
		"[2026-12-06 08:53:07 TP4] Init torch distributed ends.",
		"[2026-12-06 08:53:08 TP0] Scheduler hit an exception: Traceback (most recent call last):",
		`  File "scheduler.py", line 1, in recv_requests`,
		"RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.231.1.4]:34438",
		"srun: error: n2: task 1: Killed",
	}
	got := peerLostNodes(lines, 4)
	if !got[0] || got[1] || len(got) != 1 {
		t.Errorf("followers = %v, want node 0 only", got)
	}
}

// openCluster opens a booted cluster as the Slurm host "cluster" of sweep: 4-GPU nodes, one job at a
// time of up to maxNodes nodes; restored and closed at the test's end.
func openCluster(t *testing.T, ctx context.Context, c *testhost.Cluster, login SSHOptions, maxNodes int, sweep string) Driver {
	t.Helper()
	d, err := Open(ctx, specsweep.Host{Name: "cluster", Driver: specsweep.DriverSlurm, Address: c.Login.Addr, GPUs: 4,
		Slurm: &specsweep.Slurm{Partition: c.Partition, MaxJobs: 1, MaxNodes: maxNodes, OutputDir: testhost.SharedPath + "/specsweep"}},
		Options{Sweep: sweep, ssh: &login})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = d.Restore(ctx)
		d.Close()
	})
	return d
}

// bootSlurm boots a real Slurm cluster of test hosts (a login host running slurmctld, nodes compute
// hosts of 4 GPUs; its logs printed when the test fails) and the SSH options of its login node; it
// skips where the machine cannot.
func bootSlurm(t *testing.T, nodes int, o testhost.Options) (*testhost.Cluster, SSHOptions) {
	t.Helper()
	if msg := testhost.Requirements(); msg != "" {
		t.Skip(msg)
	}
	if msg := testhost.SlurmRequirements(); msg != "" {
		t.Skip(msg)
	}
	hosts := testhost.BootCluster(t, nodes+1, o)
	c := testhost.Slurm(t, hosts, testhost.SlurmOptions{GPUsPerNode: 4})
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Logs())
		}
	})
	return c, SSHOptions{Address: c.Login.Addr, User: "root", IdentityFile: c.Login.KeyFile, KnownHosts: c.Login.KnownHosts,
		ConfigFile: "none", noAgent: true}
}
