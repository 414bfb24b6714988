package orchestrator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

const searchSpec = `version: 1
name: orch-search
hosts:
  - {name: a, address: a.example, gpus: 4}
  - {name: b, address: b.example, gpus: 4}
server:
  command: [/opt/sglang/bin/python, -m, sglang.launch_server]
  port: 30000
  stop_timeout: 5s
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
matrix: {method: [baseline, eagle3], num_steps: [1, 2, 3, 4, 5, 6, 7, 8], topk: [1], tp: [1, 4]}
workload: {concurrency: [1], requests: 8, input_tokens: 16, output_tokens: 8}
search: {strategy: climb, probe: [8]}
`

// plateau: throughput rises to steps 3 and falls after.
func plateau(steps int) float64 {
	return 100 + 40*float64(min(steps, 3)) - 15*float64(max(steps-3, 0))
}

func searchHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, 1, nil)
	spec, err := sweep.Parse("search.yaml", []byte(searchSpec))
	if err != nil {
		t.Fatal(err)
	}
	h.spec = spec
	h.world.speed = plateau
	return h
}

func pointStates(h *harness) map[string]string {
	out := map[string]string{}
	for _, row := range h.query("SELECT point_id, state || ':' || coalesce(reason, '') FROM point_summary") {
		out[row[0].(string)] = row[1].(string)
	}
	return out
}

// TestSearchedSweepRunsWhatTheSearchDecides: the workers wait for the search's decisions instead of
// leaving, every point ends done or pruned with a reason, and both chains (tp 1, tp 4) run.
func TestSearchedSweepRunsWhatTheSearchDecides(t *testing.T) {
	h := searchHarness(t)
	_, out, err := h.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	total := len(h.spec.Plan().Points)
	if out.State != store.SweepDone || out.Done+out.Pruned != total || out.Pruned == 0 || out.Waiting != 0 {
		t.Fatalf("outcome %+v, want %d points done or pruned, some pruned", out, total)
	}
	for id, st := range pointStates(h) {
		if strings.HasPrefix(st, "pruned:") && len(st) < len("pruned:")+10 {
			t.Errorf("point %s pruned without a reason: %q", id, st)
		}
	}
	// Past the plateau (steps 3) only the probe (8) and the climb's one step past the peak run.
	for _, row := range h.query(`SELECT tp, num_steps FROM point_summary WHERE state = 'done' AND num_steps >= 6 AND num_steps < 8`) {
		t.Errorf("tp %v steps %v ran, past the plateau", row[0], row[1])
	}
	if n := h.scalar("SELECT count(*) FROM event_log WHERE kind = 'released'"); n != int64(out.Done) {
		t.Errorf("%v released events, want one per point run (%d)", n, out.Done)
	}
	// Both chains ran. (Which host ran them is the scheduler's choice: on a loaded machine one
	// host's worker may claim every released point while the other waits, so the hosts are not
	// counted; a worker that left instead of waiting would leave points waiting, checked above.)
	if n := h.scalar("SELECT count(DISTINCT tp) FROM point_summary WHERE state = 'done'"); n != int64(2) {
		t.Errorf("points of %v tp chains ran, want both", n)
	}
}

// TestSearchResumesWithTheSameDecisions: an interrupted searched sweep, resumed, ends with the
// same points run and pruned (for the same reasons) as one that ran through, none run twice.
func TestSearchResumesWithTheSameDecisions(t *testing.T) {
	through := searchHarness(t)
	if _, _, err := through.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := pointStates(through)

	h := searchHarness(t)
	h.world.behave = func(string, hostctl.Launch, int) behaviour { return behaviour{loadDelay: 50 * time.Millisecond} }
	interrupted := 0
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(60+40*i)*time.Millisecond)
		_, out, err := h.run(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if !out.Interrupted {
			t.Fatalf("run %d: outcome %+v, want interrupted", i, out)
		}
		interrupted++
	}
	if _, out, err := h.run(context.Background()); err != nil || out.State != store.SweepDone {
		t.Fatalf("final run: %+v, %v", out, err)
	}
	t.Logf("%d interrupted runs before the last", interrupted)
	got := pointStates(h)
	for id, w := range want {
		if got[id] != w {
			t.Errorf("point %s: %q after interruptions, %q straight through", id, got[id], w)
		}
	}
	if n := h.scalar(`SELECT count(*) FROM (SELECT point_id, concurrency, repeat FROM run_summary
		WHERE status = 'ok' GROUP BY 1, 2, 3 HAVING count(*) > 1)`); n != int64(0) {
		t.Errorf("%v runs recorded twice", n)
	}
}

// TestSearchEndsWhenNoHostCanTakeWhatIsLeft: the only host that holds tp 4 refuses us; the other
// host's worker must not wait for the search forever: the sweep ends, saying what could not run.
func TestSearchEndsWhenNoHostCanTakeWhatIsLeft(t *testing.T) {
	h := searchHarness(t)
	spec, err := sweep.Parse("search.yaml", []byte(strings.Replace(searchSpec, "{name: a, address: a.example, gpus: 4}",
		"{name: a, address: a.example, gpus: 2}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	h.spec = spec
	h.world.behave = func(host string, l hostctl.Launch, n int) behaviour {
		if host == "b" {
			return behaviour{startErr: &hostctl.HostKeyError{Msg: "host key for b.example changed"}}
		}
		return behaviour{}
	}
	done := make(chan struct{})
	var out Outcome
	go func() {
		defer close(done)
		_, out, err = h.run(context.Background())
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end: a worker waits for points no host can take")
	}
	if err != nil || out.State != store.SweepFailed || out.Pending == 0 {
		t.Fatalf("outcome %+v, %v: want failed with the tp 4 points pending", out, err)
	}
}
