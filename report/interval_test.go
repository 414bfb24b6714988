package report_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
)

const precisionSpec = `version: 1
name: precise
hosts: [{name: a, address: a.example, gpus: 4}]
server:
  command: [/opt/sglang/bin/python, -m, sglang.launch_server]
methods: {baseline: [], eagle3: [--speculative-algorithm, EAGLE3]}
matrix: {method: [baseline, eagle3], num_steps: [2, 4], topk: [1]}
workload:
  concurrency: [1, 16]
  input_tokens: 256
  output_tokens: 128
  precision: {output_tok_s: 2%, max_requests: 500}
`

// TestPrecisionIntervalsInTheReport: with workload.precision and one repeat, the cells show their
// interval (±, * for a level that ran to its cap first), and the best table's noise verdict comes
// from the intervals: clear where the best's lies above the runner-up's, within noise where they
// overlap.
func TestPrecisionIntervalsInTheReport(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ip := func(i int) *int { return &i }
	argv := []string{"x", "--speculative-algorithm", "EAGLE3"}
	pts := []store.NewPoint{{ID: "b", Method: "baseline", Baseline: true, TP: 4, Runs: 2},
		{ID: "e2", Method: "eagle3", NumSteps: ip(2), TopK: ip(1), NumDraftTokens: ip(3), TP: 4, Runs: 2, Argv: argv},
		{ID: "e4", Method: "eagle3", NumSteps: ip(4), TopK: ip(1), NumDraftTokens: ip(5), TP: 4, Runs: 2, Argv: argv}}
	id, err := db.CreateSweep(ctx, store.NewSweep{Name: "precise", SpecHash: "h", SpecText: precisionSpec},
		[]store.NewHost{{Name: "a", Driver: "ssh", GPUs: 4}}, pts)
	if err != nil {
		t.Fatal(err)
	}
	// tok/s and the interval's half-width per point and level: at c=1 e4 (200 ±1%) is clear of
	// e2 (150 ±1%); at c=16 e4 (1000 ±3%) and e2 (980 ±2%) overlap, and e4 missed its target.
	type fig struct{ tok, half float64 }
	figs := map[string]map[int]fig{
		"b":  {1: {100, 0.01}, 16: {800, 0.01}},
		"e2": {1: {150, 0.01}, 16: {980, 0.02}},
		"e4": {1: {200, 0.01}, 16: {1000, 0.03}},
	}
	for _, p := range pts {
		att, err := db.ClaimPoint(ctx, id, p.ID, "a")
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range []int{1, 16} {
			f := figs[p.ID][c]
			m := &store.Metrics{Requests: 64, Completed: 64, OutputTokS: f.tok,
				Interval: &store.Interval{Metric: "output_tok_s", Mean: f.tok, Low: f.tok * (1 - f.half), High: f.tok * (1 + f.half),
					Confidence: 0.95, Batches: 20, Target: 0.02, Reached: f.half <= 0.02}}
			var fin *store.PointFinish
			if i == 1 {
				fin = &store.PointFinish{State: store.PointDone}
			}
			if err := db.RecordRunAndFinish(ctx, store.Run{SweepID: id, PointID: p.ID, Attempt: att, Concurrency: c, Repeat: 1,
				Status: store.RunOK, Metrics: m}, fin); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err := report.LoadID(ctx, db, id)
	if err != nil {
		t.Fatal(err)
	}
	l := report.LiveTables(s)
	var e4 []string
	for _, row := range l.Results.Rows {
		if row[0] == "eagle3" && row[1] == "4" {
			e4 = row
		}
	}
	if e4 == nil || !strings.HasPrefix(e4[5], "200.0 ±1.0% (2.00") || !strings.HasPrefix(e4[6], "1000.0 ±3.0%* (1.25") {
		t.Errorf("All results row of e4: %q, want 200.0 ±1.0%% and 1000.0 ±3.0%%* with speedups", e4)
	}
	if !strings.Contains(l.Results.Note, "levels end when output tok/s is known to ±2% (95% confidence), at most 500 requests") {
		t.Errorf("All results note does not say the rule: %s", l.Results.Note)
	}
	levels := 0
	for _, b := range report.BestPerLevel(s) {
		levels++
		switch b.Concurrency {
		case 1:
			if b.Noise != report.NoiseClear {
				t.Errorf("c=1: %s over %s is %q, want clear (intervals 198-202 and 148.5-151.5)", b.Best.Point.Label(), b.RunnerUp.Point.Label(), b.Noise)
			}
		case 16:
			if b.Noise != report.NoiseWithin {
				t.Errorf("c=16: %s over %s is %q, want within noise (intervals 970-1030 and 960.4-999.6)", b.Best.Point.Label(), b.RunnerUp.Point.Label(), b.Noise)
			}
		}
	}
	if levels != 2 {
		t.Errorf("best per level: %d levels, want 2", levels)
	}
}
