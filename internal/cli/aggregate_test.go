package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// aggregateDB records a sweep of a baseline and eagle3 with 1 and 2 steps at tp 1, concurrency 1
// and 4, two repeats: at c=1 the two speculative points are within noise of each other (their
// ranges overlap); at c=4 the second repeat of s=2 failed after its first was the fastest of all
// (the failed run keeps its survivors' figure, as a failing server leaves it).
func aggregateDB(t *testing.T) (path string, id int64) {
	t.Helper()
	ctx := context.Background()
	path = filepath.Join(t.TempDir(), "agg.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	one, two, three := 1, 2, 3
	pts := []store.NewPoint{
		{ID: "b", Method: "baseline", Baseline: true, TP: 1, Argv: []string{"--tp-size", "1"}, Runs: 4},
		{ID: "e1", Method: "eagle3", NumSteps: &one, TopK: &one, NumDraftTokens: &two, TP: 1,
			Argv: []string{"--tp-size", "1", "--speculative-algorithm", "EAGLE3"}, Runs: 4},
		{ID: "e2", Method: "eagle3", NumSteps: &two, TopK: &one, NumDraftTokens: &three, TP: 1,
			Argv: []string{"--tp-size", "1", "--speculative-algorithm", "EAGLE3"}, Runs: 4},
	}
	id, err = db.CreateSweep(ctx, store.NewSweep{Name: "agg", SpecHash: "h", SpecText: "name: agg"},
		[]store.NewHost{{Name: "local", Driver: "local", GPUs: 1}}, pts)
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		c, rep int
		tokS   float64
		failed bool
	}
	runs := map[string][]run{
		"b":  {{1, 1, 100, false}, {4, 1, 300, false}, {1, 2, 102, false}, {4, 2, 310, false}},
		"e1": {{1, 1, 150, false}, {4, 1, 500, false}, {1, 2, 170, false}, {4, 2, 520, false}},
		"e2": {{1, 1, 160, false}, {4, 1, 900, false}, {1, 2, 180, false}, {4, 2, 880, true}},
	}
	t0 := time.Unix(1_700_000_000, 0)
	for _, p := range pts {
		att, err := db.ClaimPoint(ctx, id, p.ID, "local")
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range runs[p.ID] {
			m := &store.Metrics{Requests: 8, Completed: 8, OutputTokS: r.tokS, RequestS: 1, TPOTMedianMs: 10}
			st, errText := store.RunOK, ""
			if r.failed {
				m.Completed, m.Failed, st, errText = 5, 3, store.RunFailed, "3 of 8 requests failed"
			}
			rec := store.Run{SweepID: id, PointID: p.ID, Attempt: att, Concurrency: r.c, Repeat: r.rep, Status: st,
				Error: errText, Metrics: m, StartedAt: t0, FinishedAt: t0.Add(time.Second)}
			var fin *store.PointFinish
			if i == len(runs[p.ID])-1 {
				fin = &store.PointFinish{State: store.PointDone}
			}
			if err := db.RecordRunAndFinish(ctx, rec, fin); err != nil {
				t.Fatal(err)
			}
		}
	}
	return path, id
}

// The report, the search, the results table and `runs --best` read a sweep's repeats through the
// one aggregation (sweep.Repeats): a level with a failed repeat does not count for any of them (so
// s=2's fast first repeat at c=4 is never the best), and they give the same medians and the same
// noise verdict.
func TestOneAggregationAgrees(t *testing.T) {
	ctx := context.Background()
	path, id := aggregateDB(t)
	db, err := store.OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	// The report.
	s, err := report.LoadID(ctx, db, id)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*report.Point{}
	for _, p := range s.Points {
		byID[p.ID] = p
	}
	if c := byID["e2"].Cells[4]; c != nil {
		t.Errorf("report: s=2 at c=4 counts (median %v over %d repeat(s)) although a repeat failed", c.TokS.Median, c.TokS.N)
	}
	bests := map[int]report.Best{}
	for _, b := range report.BestPerLevel(s) {
		bests[b.Concurrency] = b
	}
	if b := bests[4]; b.Best == nil || b.Best.Point.ID != "e1" || b.Noise != report.NoiseClear {
		t.Errorf("report: best at c=4 = %+v, want e1, clear", b)
	}
	if b := bests[1]; b.Best == nil || b.Best.Point.ID != "e2" || b.RunnerUp == nil || b.RunnerUp.Point.ID != "e1" || b.Noise != report.NoiseWithin {
		t.Errorf("report: best at c=1 = %+v, want e2 over e1 within noise", b)
	}

	// The search.
	sps, err := db.SearchInputs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]sweep.PointResult{}
	for _, sp := range sps {
		known[sp.PointID] = orchestrator.SearchKnowledge(sp, s.Sources)
	}
	for _, p := range s.Points {
		k := known[p.ID]
		if len(k.Levels) != len(p.Cells) {
			t.Errorf("search and report disagree on %s's levels: search %v, report %d cell(s)", p.ID, k.Levels, len(p.Cells))
		}
		for c, cell := range p.Cells {
			l, ok := k.Levels[c]
			if !ok || sweep.Median(l.OutputTokS) != cell.TokS.Median {
				t.Errorf("search and report disagree on %s at c=%d: search %v, report median %v", p.ID, c, l.OutputTokS, cell.TokS.Median)
			}
		}
	}
	if v := sweep.NoiseOf(sweep.NewStat(known["e2"].Levels[1].OutputTokS), sweep.NewStat(known["e1"].Levels[1].OutputTokS)); string(v) != string(bests[1].Noise) {
		t.Errorf("search's noise verdict at c=1 is %q, the report's %q", v, bests[1].Noise)
	}

	// runs --best.
	env := map[string]string{"SPECSWEEP_DB": path}
	out, errs, code := runMain(t, env, "runs", "--best", "--format", "json")
	if code != ExitOK {
		t.Fatalf("runs --best: code %d: %s", code, errs)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if len(rows) != 2 {
		t.Fatalf("runs --best: %d rows, want 2:\n%s", len(rows), out)
	}
	for _, r := range rows {
		c := int(r["concurrency"].(float64))
		b := bests[c]
		if b.Best == nil || r["point_id"] != b.Best.Point.ID || r["output_tok_s"] != b.Best.TokS.Median ||
			r["noise"] != string(b.Noise) || int(r["repeats"].(float64)) != b.Best.TokS.N {
			t.Errorf("runs --best at c=%d: %v; the report: %s %v (%d repeats) %s", c, r, b.Best.Point.ID, b.Best.TokS.Median, b.Best.TokS.N, b.Noise)
		}
	}

	// The results table `specsweep run` prints: s=2 has no figure at c=4.
	var buf strings.Builder
	if err := printResults(ctx, &buf, db, id, path); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(buf.String(), "\n") {
		if f := strings.Fields(line); len(f) > 6 && f[0] == "eagle3" && f[1] == "2" {
			// METHOD STEPS TOPK DRAFT TP c=1 speedup c=4 speedup ...
			if f[5] != "170.0" || f[7] != "-" {
				t.Errorf("results table: s=2 row %q, want 170.0 at c=1 and - at c=4", line)
			}
		}
	}
	if !strings.Contains(buf.String(), "170.0") {
		t.Errorf("results table has no s=2 row:\n%s", buf.String())
	}
}
