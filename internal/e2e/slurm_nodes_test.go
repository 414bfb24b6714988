package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// killRankWhenReady kills, on host h, the simulator once the sweep at db has recorded the first tp 8
// point ready (its first level, 16 requests of 512 tokens at c=1, lasts seconds: the kill lands in
// it, or in the output check before it); it sends when it killed. The kill waits on the host in an
// SSH session opened before the sweep starts, for a file the test creates in the cluster's shared
// directory: on a loaded machine a new session took seconds, and the kill landed in the point's
// last level instead, whose failure the point's end may not see in time (the point was done).
// The session blocks opening a FIFO there, until the test opens it to write: the waiter's loop of
// `sleep 0.02` before was two processes on the host every 20 ms for the whole sweep, most of the
// test's CPU.
func killRankWhenReady(ctx context.Context, t testing.TB, db string, h *testhost.Host, kill string) <-chan time.Time {
	t.Helper()
	killed := make(chan time.Time, 1)
	trigger := fmt.Sprintf("kill-rank-%d", time.Now().UnixNano())
	fifo := filepath.Join(h.SharedDir(), trigger)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("the kill's trigger: %v", err)
	}
	var fired atomic.Int64
	go func() {
		// The waiter gives up by itself after 5 minutes (a sweep that never reaches the point).
		waiter := fmt.Sprintf("timeout 300 cat %s >/dev/null && { %s; }", testhost.SharedPath+"/"+trigger, kill)
		if _, err := h.Run(ctx, waiter); err == nil && fired.Load() != 0 {
			killed <- time.Unix(0, fired.Load())
		}
	}()
	go func() {
		for deadline := time.Now().Add(4 * time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; {
			time.Sleep(50 * time.Millisecond)
			if countRows(db, `SELECT count(*) FROM events e JOIN points p ON p.id = e.point_ref
				WHERE e.kind = 'ready' AND p.tp = 8`) == 0 {
				continue
			}
			time.Sleep(300 * time.Millisecond) // into the load
			fired.Store(time.Now().UnixNano())
			// Opened and closed: the waiter's cat reads its end. Not blocking: the open fails
			// (ENXIO) while the waiter has not opened its end yet, and is tried again.
			for ctx.Err() == nil && time.Now().Before(deadline) {
				if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					w.Close()
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			return
		}
	}()
	return killed
}

// TestSlurmSweepSpansNodes (issue 30): on the real cluster of two 4-GPU nodes, tp 8 points run as
// jobs over both nodes beside tp 4 points on one, every rank in the provenance; rank 1's server
// killed mid-load fails its point naming rank 1's node and the sweep goes on; specsweep killed with
// -9 during a two-node job, then resumed, and killed again, then restored, leaves no job queued and
// no server running on any node.
func TestSlurmSweepSpansNodes(t *testing.T) {
	defer parallel(t)() // shares nothing: its own test hosts (docs/development.md, "Parallel end-to-end tests")
	c := slurmCluster(t, 2)
	ctx := t.Context()
	spec := func(name, matrix string, long bool) sweepFiles {
		text := slurmSpec(name, c, 1, matrix, "")
		text = strings.Replace(text, "max_jobs: 1,", "max_jobs: 1, max_nodes: 2,", 1)
		// NCCL's lines name the transport (IB, the simulator's default); output long enough to kill
		// a rank mid-level.
		text = strings.Replace(text, "SGLANGSIM_PROFILE: qwen3.6-27b}", "SGLANGSIM_PROFILE: qwen3.6-27b, NCCL_DEBUG: INFO}", 1)
		if long {
			text = strings.Replace(text, "requests: 8, warmup_requests: 1, input_tokens: 32, output_tokens: 48", "requests: 16, warmup_requests: 1, input_tokens: 32, output_tokens: 512", 1)
		}
		return writeSpec(t, text)
	}
	names := c.NodeNames()
	simOn := func(h *testhost.Host) bool {
		out, _ := h.Run(ctx, "pgrep -f '^"+testhost.SimPath+" ' || true")
		return strings.TrimSpace(string(out)) != ""
	}
	queued := func() string {
		out, _ := c.Run(ctx, "squeue -h -o '%i %j %T'")
		return strings.TrimSpace(string(out))
	}

	f := spec("e2e-slurm-nodes", "{method: [baseline, eagle3], num_steps: [2], topk: [1], tp: [4, 8]}", true)
	if p := specsweep(t, time.Minute, "plan", f.spec); p.code != 0 || !strings.Contains(p.stdout, "cluster  8   2 x 4 GPUs  the job's nodes  <first node of the job>:<free port>") {
		t.Errorf("plan:\n%s", p)
	}
	killed := killRankWhenReady(ctx, t, f.db, c.Nodes[1], "pkill -9 -f '^"+testhost.SimPath+" '")
	r := specsweep(t, 5*time.Minute, "run", "--db", f.db, f.spec)
	var at time.Time
	select {
	case at = <-killed:
	default:
		t.Fatalf("rank 1 was never killed\n%s\n%s", r, c.Logs())
	}
	db := openDB(t, f.db)
	failed := scalar[string](t, db, `SELECT coalesce(group_concat(method || ' tp=' || tp || ' ' || state || ' ' || coalesce(failure_class, '') || ' ' || coalesce(failure_detail, ''), ' | '), '')
		FROM point_summary WHERE state != 'done'`)
	if !strings.HasPrefix(failed, "baseline tp=8 failed crash_during_load rank 1 on "+names[1]+": ") || strings.Contains(failed, " | ") {
		t.Errorf("points not done: %q, want only the baseline's tp 8, failed naming rank 1 on %s\n%s", failed, names[1], r)
	}
	finished := scalar[int64](t, db, "SELECT finished_at FROM point_summary WHERE state = 'failed'")
	t.Logf("the killed point failed %v after the kill", time.UnixMilli(finished).Sub(at).Round(time.Millisecond))
	ranks := scalar[string](t, db, `SELECT json_extract(provenance, '$.ranks[0].node') || ',' || json_extract(provenance, '$.ranks[1].node') || ' ' ||
		json_extract(provenance, '$.ranks[1].nccl_transport') || ' ' || json_extract(provenance, '$.dist_init_addr')
		FROM point_summary WHERE state = 'done' AND tp = 8`)
	if !strings.HasPrefix(ranks, names[0]+","+names[1]+" IB: ") || !strings.Contains(ranks, " "+names[0]+":") {
		t.Errorf("the tp 8 point's ranks: %q, want %s then %s over IB, rendezvous on %s", ranks, names[0], names[1], names[0])
	}
	if n := scalar[int](t, db, `SELECT count(*) FROM point_summary WHERE json_extract(provenance, '$.slurm_job') IS NULL OR json_extract(provenance, '$.hostname') IS NULL`); n != 0 {
		t.Errorf("%d points without their job and node in the provenance (a cluster of max_jobs 1 recorded neither)", n)
	}
	if n := scalar[int](t, db, `SELECT count(*) FROM point_summary WHERE state = 'done' AND tp = 4 AND json_extract(provenance, '$.ranks') IS NULL`); n != 2 {
		t.Errorf("%d tp 4 points done on one node without ranks, want 2", n)
	}

	// Killed with -9 during a two-node job, resumed; killed again, restored. The levels are long: a
	// two-node job of short levels ends within a second or two of its start (persistent shells on the
	// login node), before the test has seen a rank on each node.
	g := spec("e2e-slurm-nodes-kill", "{method: [baseline], tp: [8, 4]}", true)
	killDuringJob := func(name string) {
		simRuns := "pgrep -f '^" + testhost.SimPath + " ' >/dev/null"
		on0, on1 := untilOnHost(ctx, c.Nodes[0], simRuns, 4*time.Minute), untilOnHost(ctx, c.Nodes[1], simRuns, 4*time.Minute)
		cmd, out := startSpecsweep(t, "run", "--db", g.db, g.spec)
		for _, on := range []<-chan error{on0, on1} {
			if err := <-on; err != nil {
				t.Fatalf("no rank on each node: %v\n%s", err, tail(out.String(), 10))
			}
		}
		signal(t, cmd, syscall.SIGKILL)
		_ = cmd.Wait()
		if !strings.Contains(queued(), "specsweep."+name+".") {
			t.Fatalf("no job left after the kill\n%s", tail(out.String(), 10))
		}
	}
	killDuringJob("e2e-slurm-nodes-kill")
	if res := specsweep(t, 5*time.Minute, "run", "--db", g.db, g.spec); res.code != 0 {
		t.Fatalf("resume:\n%s", res)
	}
	check := func(when string) {
		t.Helper()
		if q := queued(); strings.Contains(q, "specsweep.") {
			t.Errorf("%s: jobs left: %q", when, q)
		}
		waitEvery(t, time.Minute, hostPoll, "no server on any node", func() bool { return !simOn(c.Nodes[0]) && !simOn(c.Nodes[1]) })
	}
	check("after the resumed sweep")
	g = spec("e2e-slurm-nodes-restore", "{method: [baseline], tp: [8, 4]}", true)
	killDuringJob("e2e-slurm-nodes-restore")
	if rs := specsweep(t, 2*time.Minute, "restore", "--db", g.db, g.spec); rs.code != 0 {
		t.Fatalf("restore:\n%s", rs)
	}
	check("after restore")
}
