package orchestrator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

func lossyAt(steps string, tp string) func(host string, l hostctl.Launch, n int) behaviour {
	return func(host string, l hostctl.Launch, n int) behaviour {
		b := behaviour{}
		if argAfter(l.Argv, "--speculative-num-steps") == steps && argAfter(l.Argv, "--tp-size") == tp {
			b.lossy = true
		}
		if argAfter(l.Argv, "--speculative-algorithm") == "" && argAfter(l.Argv, "--tp-size") == "1" {
			b.loadDelay = 40 * time.Millisecond // the tp 1 reference comes late: points are compared after it
		}
		return b
	}
}

func checks(h *harness) map[string]string {
	out := map[string]string{}
	for _, row := range h.query(`SELECT tp, coalesce(num_steps, 0), state, coalesce(output_check, ''), coalesce(failure_class, '')
		FROM point_summary`) {
		out[fmt.Sprintf("%v/%v", row[0], row[1])] = fmt.Sprintf("%v %v %v", row[2], row[3], row[4])
	}
	return out
}

// TestOutputCheckFlagsALossyPoint: the baselines answer twice and are the references; every other
// point is compared with the reference of its tp, also when the reference comes after it; a lossy
// point is flagged and still measured.
func TestOutputCheckFlagsALossyPoint(t *testing.T) {
	h := newHarness(t, 1, lossyAt("3", "1"))
	_, out, err := h.run(context.Background())
	if err != nil || out.State != store.SweepDone {
		t.Fatalf("%+v %v", out, err)
	}
	got := checks(h)
	want := map[string]string{"1/0": "done reference ", "1/1": "done ok ", "1/2": "done ok ", "1/3": "done mismatch ",
		"8/0": "done reference ", "8/1": "done ok ", "8/2": "done ok ", "8/3": "done ok "}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("tp/steps %s: %q, want %q", k, got[k], w)
		}
	}
	if n := h.scalar(`SELECT count(*) FROM run_summary WHERE tp = 1 AND num_steps = 3 AND status = 'ok'`); n != int64(2) {
		t.Errorf("the mismatching point measured %v levels, want its 2", n)
	}
	if v := h.scalar(`SELECT output_agreement FROM point_summary WHERE tp = 1 AND num_steps = 3`); v.(float64) > 0.5 {
		t.Errorf("agreement of the lossy point %v", v)
	}
	// Each baseline answered twice (all at once, then last first in batches of half); the others
	// once, all at once.
	passes := map[string][]string{}
	for _, c := range h.world.checks {
		shape := fmt.Sprintf("c=%d", c.cfg.Concurrency)
		if c.cfg.Reverse {
			shape += " reversed"
		}
		passes[c.argv] = append(passes[c.argv], shape)
	}
	for argv, p := range passes {
		if strings.Contains(argv, "--speculative-algorithm") != (len(p) == 1) {
			t.Errorf("%s: passes %v", argv, p)
		}
		if len(p) == 2 && (p[0] != "c=8" || p[1] != "c=4 reversed") || len(p) == 1 && p[0] != "c=8" {
			t.Errorf("%s: passes %v", argv, p)
		}
	}
	if n := h.scalar(`SELECT count(*) FROM event_log WHERE kind = 'output_check'`); n != int64(8) {
		t.Errorf("%v output_check events, want one per point", n)
	}
}

// TestOutputCheckFailOnMismatch: with fail_on_mismatch a lossy point whose reference has answered
// fails as output_mismatch before its load.
func TestOutputCheckFailOnMismatch(t *testing.T) {
	h := newHarness(t, 1, lossyAt("2", "8"))
	spec, err := sweep.Parse("test.yaml", []byte(strings.Replace(strings.Replace(testSpec, "REPEATS", "1", 1),
		"  output_tokens: 8\n", "  output_tokens: 8\n  output_check: {fail_on_mismatch: true}\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	h.spec = spec
	_, out, err := h.run(context.Background())
	if err != nil || out.Failed != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	if got := checks(h)["8/2"]; got != "failed mismatch output_mismatch" {
		t.Errorf("lossy point: %q", got)
	}
	if n := h.scalar(`SELECT count(*) FROM run_summary WHERE tp = 8 AND num_steps = 2`); n != int64(0) {
		t.Errorf("the failed point ran %v levels", n)
	}
	if d := h.scalar(`SELECT failure_detail FROM point_summary WHERE tp = 8 AND num_steps = 2`).(string); !strings.Contains(d, "output check: mismatch: prompt 1 differs from word 4") {
		t.Errorf("failure detail %q", d)
	}
}

// cancellingChecks is the store, whose reads of the output checks come as the run is interrupted:
// each cancels the run's context first.
type cancellingChecks struct {
	*store.DB
	cancel context.CancelFunc
}

func (s cancellingChecks) OutputChecks(ctx context.Context, sweepID int64) ([]store.PointOutputs, error) {
	s.cancel()
	return s.DB.OutputChecks(ctx, sweepID)
}

// TestInterruptedBeforeTheWorkersStart: an interruption (Ctrl-C, the daemon's stop) while the run
// compares the answers a resume found, before any worker started, leaves the sweep interrupted and
// says so, as one during a point does, and the sweep resumes to the end. It was an error ("output
// check of sweep 1: store: ...: context deadline exceeded", a run of the tests on a loaded machine).
func TestInterruptedBeforeTheWorkersStart(t *testing.T) {
	h := newHarness(t, 1, nil)
	if !h.spec.Workload.OutputCheck.Enabled {
		t.Fatal("the harness's spec has no output check")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, out, err := h.run(ctx, func(c *Config) { c.Store = cancellingChecks{h.db, cancel} })
	if err != nil {
		t.Fatalf("run interrupted before its workers: %v", err)
	}
	if !out.Interrupted || out.State != store.SweepInterrupted || out.Pending != len(h.spec.Plan().Points) {
		t.Fatalf("outcome %+v, want interrupted with every point pending", out)
	}
	if st := h.scalar("SELECT state FROM sweeps"); st != "interrupted" {
		t.Errorf("sweep state %v, want interrupted", st)
	}
	_, out, err = h.run(context.Background())
	if err != nil || out.State != store.SweepDone || out.Done != len(h.spec.Plan().Points) {
		t.Fatalf("resumed: %+v %v", out, err)
	}

	// Interrupted before the run read its sweep (the harness prepares it whatever the context).
	h = newHarness(t, 1, nil)
	gone, cancelGone := context.WithCancel(context.Background())
	cancelGone()
	if _, out, err = h.run(gone); err != nil || !out.Interrupted || out.Pending != len(h.spec.Plan().Points) {
		t.Fatalf("run with its context ended: %+v %v", out, err)
	}
}
