package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// groupSpec is a sweep of a group of two 4-GPU test hosts (node-a, node-b): tp 4 runs on node-a,
// tp 8 over both, one SGLang rank each.
func groupSpec(name string, hosts []*testhost.Host, matrix string) string {
	var b strings.Builder
	b.WriteString("hosts:\n  - name: pair\n    gpus: 4\n    user: root\n    nodes:\n")
	for i, h := range hosts {
		fmt.Fprintf(&b, "      - {name: node-%c, address: %q, identity_file: %q, known_hosts: %q}\n", 'a'+i, h.Addr, h.KeyFile, h.KnownHosts)
	}
	return hostSpecHead(name, b.String()) + "  join_timeout: 20s\n" + matrix +
		"workload: {concurrency: [1, 4], requests: 16, warmup_requests: 1, input_tokens: 32, output_tokens: 512}\n"
}

// rankRuns reports whether a test host's sglang.service runs a rank of a point that spans nodes
// (its main process's command line: the launch script execs it). rankRunsCond is rankRuns as a
// shell condition on the host.
const rankRunsCond = "systemctl is-active -q sglang.service && tr '\\0' ' ' </proc/$(systemctl show -p MainPID --value sglang.service)/cmdline | grep -q -- --node-rank"

func rankRuns(ctx context.Context, h *testhost.Host) bool {
	out, _ := h.Run(ctx, "systemctl is-active sglang.service; tr '\\0' ' ' </proc/$(systemctl show -p MainPID --value sglang.service)/cmdline")
	s := string(out)
	return strings.HasPrefix(s, "active") && strings.Contains(s, "--node-rank")
}

// nodeClean reports what of specsweep a test host still has: a running server, its drop-in.
func nodeClean(ctx context.Context, h *testhost.Host) string {
	out, _ := h.Run(ctx, "systemctl is-active sglang.service; systemctl cat sglang.service")
	s := string(out)
	var left []string
	if st := strings.SplitN(s, "\n", 2)[0]; st == "active" || st == "activating" || st == "deactivating" {
		left = append(left, "sglang.service "+st)
	}
	if strings.Contains(s, "specsweep") {
		left = append(left, "specsweep's drop-in")
	}
	return strings.Join(left, ", ")
}

// TestGroupSweepOnTwoTestHosts (issue 30): a sweep with tp 4 on one node and tp 8 over two 4-GPU
// test hosts runs to the end with every rank's provenance; rank 1's server killed mid-point fails
// that point within seconds naming its node, stops rank 0, and the sweep goes on; specsweep killed
// with -9 mid-point leaves ranks that a resumed run stops, and `restore` restores both nodes.
func TestGroupSweepOnTwoTestHosts(t *testing.T) {
	defer parallel(t)() // shares nothing: its own test hosts (docs/development.md, "Parallel end-to-end tests")
	// NCCL's transport is logged by the operator's unit environment, not the spec's (whose values
	// of four characters and more are redacted as secrets).
	hosts := bootCluster(t, 2, testhost.Options{GPUs: 4, Env: map[string]string{"NCCL_DEBUG": "INFO", "SGLANGSIM_NCCL_NET": "Socket"}})
	ctx := t.Context()

	f := writeSpec(t, groupSpec("e2e-group", hosts, `methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
matrix: {method: [baseline, eagle3], num_steps: [2], topk: [1], tp: [4, 8]}
`))
	// Rank 1 of the first tp 8 point (the baseline's, in plan order) is killed mid-load, once ready.
	killed := killRankWhenReady(ctx, t, f.db, hosts[1], "kill -9 $(systemctl show -p MainPID --value sglang.service)")
	r := specsweep(t, 5*time.Minute, "run", "--db", f.db, f.spec)
	var at time.Time
	select {
	case at = <-killed:
	default:
		t.Fatalf("rank 1 was never seen serving to kill it\n%s", r)
	}
	db := openDB(t, f.db)
	rows, err := db.Query(`SELECT method, tp, state, coalesce(failure_class, ''), coalesce(failure_detail, ''), coalesce(finished_at, 0),
		coalesce(json_array_length(provenance, '$.ranks'), 0), coalesce(json_extract(provenance, '$.ranks[1].nccl_transport'), ''),
		coalesce(json_extract(provenance, '$.ranks[1].hostname'), '') FROM point_summary ORDER BY point_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type point struct {
		method, state, class, detail, transport, host1 string
		tp, ranks                                      int
		finished                                       int64
	}
	var pts []point
	for rows.Next() {
		var p point
		if err := rows.Scan(&p.method, &p.tp, &p.state, &p.class, &p.detail, &p.finished, &p.ranks, &p.transport, &p.host1); err != nil {
			t.Fatal(err)
		}
		pts = append(pts, p)
	}
	if len(pts) != 4 {
		t.Fatalf("%d points, want 4\n%s", len(pts), r)
	}
	for _, p := range pts {
		switch {
		case p.method == "baseline" && p.tp == 8:
			if p.state != "failed" || p.class != "crash_during_load" || !strings.Contains(p.detail, "rank 1 on node-b") {
				t.Errorf("the killed point: %+v, want failed crash_during_load naming rank 1 on node-b\n%s", p, r)
			}
			t.Logf("the killed point failed %v after the kill: %s", time.UnixMilli(p.finished).Sub(at).Round(time.Millisecond), p.detail)
		case p.state != "done":
			t.Errorf("point %+v, want done (the sweep goes on)\n%s", p, r)
		case p.tp == 8 && (p.ranks != 2 || !strings.HasPrefix(p.transport, "Socket: ") || p.host1 != hosts[1].Name):
			t.Errorf("tp 8 point %+v: want 2 ranks in its provenance, rank 1 on %s over NCCL's Socket transport", p, hosts[1].Name)
		case p.tp == 4 && p.ranks != 0:
			t.Errorf("tp 4 point %+v: ranks in its provenance", p)
		}
	}
	clean := func(when string) {
		t.Helper()
		for i, h := range hosts {
			if left := nodeClean(ctx, h); left != "" {
				t.Errorf("node %d %s: %s", i, when, left)
			}
		}
	}
	clean("after the sweep")

	// doctor checks every node, each line naming it.
	if d := specsweep(t, time.Minute, "doctor", f.spec); !strings.Contains(d.stdout, "node-a") || !strings.Contains(d.stdout, "node-b") || d.code > 1 {
		t.Errorf("doctor on the group:\n%s", d)
	}

	// specsweep killed with -9 while a tp 8 point runs: its ranks are left; a resumed run stops them
	// and ends with both nodes as they were.
	small := `methods: {baseline: []}
matrix: {method: [baseline], tp: [8, 4]}
`
	g := writeSpec(t, groupSpec("e2e-group-kill", hosts, small))
	killRun := func() {
		running := untilOnHost(ctx, hosts[1], rankRunsCond, 3*time.Minute)
		cmd, out := startSpecsweep(t, "run", "--db", g.db, g.spec)
		if err := <-running; err != nil {
			t.Fatalf("rank 1 never seen running: %v\n%s", err, tail(out.String(), 10))
		}
		signal(t, cmd, syscall.SIGKILL)
		_ = cmd.Wait()
		if !rankRuns(ctx, hosts[1]) {
			t.Fatalf("rank 1 should outlive the killed specsweep\n%s", tail(out.String(), 10))
		}
	}
	killRun()
	res := specsweep(t, 3*time.Minute, "run", "--db", g.db, g.spec)
	if res.code != 0 {
		t.Fatalf("resume:\n%s", res)
	}
	clean("after the resumed sweep")
	// Killed again, then restored: every node.
	g = writeSpec(t, groupSpec("e2e-group-restore", hosts, small))
	killRun()
	rs := specsweep(t, 2*time.Minute, "restore", "--db", g.db, g.spec)
	if rs.code != 0 {
		t.Fatalf("restore:\n%s", rs)
	}
	clean("after restore")
}
