package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// A level (a point at a concurrency and repeat) measured on several cells: each named prompt set
// and/or each prompt length, one run each (schema 10).

// cellRun is okRun on one cell.
func cellRun(sweepID int64, point string, attempt, conc, rep int, dataset string, inputTokens int, tok float64) Run {
	r := okRun(sweepID, point, attempt, conc, rep, tok)
	r.Dataset, r.InputTokens = dataset, inputTokens
	return r
}

// cellKey renders a cell as the tests name it: "random/1024", "sharegpt/-".
func cellKey(dataset string, inputTokens *int) string {
	if dataset == "" {
		dataset = "random"
	}
	if inputTokens == nil {
		return dataset + "/-"
	}
	return fmt.Sprintf("%s/%d", dataset, *inputTokens)
}

// TestSpeedupPerCell: two cells (and more) at one level each get their own speedup, against the
// baseline's run of the same cell; a cell the baseline did not measure has none. The typed readers
// carry the cell as the view has it.
func TestSpeedupPerCell(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "cells")
	b4, err := db.ClaimPoint(ctx, sw, "b4", "h4")
	if err != nil {
		t.Fatal(err)
	}
	s1, err := db.ClaimPoint(ctx, sw, "s1", "h4")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Run{
		cellRun(sw, "b4", b4, 1, 1, "", 1024, 100),
		cellRun(sw, "b4", b4, 1, 1, "", 4096, 50),
		cellRun(sw, "b4", b4, 1, 1, "sharegpt", 0, 80),
		cellRun(sw, "b4", b4, 1, 1, "", 0, 90), // the zero cell, as before schema 10
		cellRun(sw, "s1", s1, 1, 1, "sharegpt", 0, 120),
		cellRun(sw, "s1", s1, 1, 1, "", 4096, 60),
		cellRun(sw, "s1", s1, 1, 1, "", 1024, 150),
		cellRun(sw, "s1", s1, 1, 1, "mtbench", 0, 90), // the baseline has no run of this cell
		cellRun(sw, "s1", s1, 1, 1, "", 0, 99),
		cellRun(sw, "s1", s1, 1, 2, "", 1024, 160), // nor of this repeat
	} {
		if err := db.RecordRun(ctx, r); err != nil {
			t.Fatalf("%s on %s/%d: %v", r.PointID, r.Dataset, r.InputTokens, err)
		}
	}
	sums, err := db.RunSummaries(ctx, RunsQuery{SweepID: sw})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range sums {
		sp := "nil"
		if r.Speedup != nil {
			sp = fmt.Sprintf("%.2f", *r.Speedup)
		}
		got = append(got, fmt.Sprintf("%s c%d r%d %s %s", r.PointID, r.Concurrency, r.Repeat, cellKey(r.Dataset, r.InputTokens), sp))
	}
	// In plan order, level, then cell (dataset, then input tokens; NULL first).
	want := []string{
		"b4 c1 r1 random/- 1.00", "b4 c1 r1 random/1024 1.00", "b4 c1 r1 random/4096 1.00", "b4 c1 r1 sharegpt/- 1.00",
		"s1 c1 r1 random/- 1.10", "s1 c1 r1 random/1024 1.50", "s1 c1 r1 random/4096 1.20", "s1 c1 r1 mtbench/- nil",
		"s1 c1 r1 sharegpt/- 1.50", "s1 c1 r2 random/1024 nil",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("run summaries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The typed rows read what the view holds, the cell included ("" for a NULL dataset).
	raw, err := db.QueryRuns(ctx, RunsQuery{SweepID: sw})
	if err != nil {
		t.Fatal(err)
	}
	base, err := db.Query(ctx, "SELECT baseline FROM run_detail WHERE sweep_id = ? ORDER BY plan_order, concurrency, repeat, dataset, input_tokens", sw)
	if err != nil || len(base.Values) != len(raw.Values) || len(raw.Values) != len(sums) {
		t.Fatalf("%d raw rows, %d baseline values, %d typed: %v", len(raw.Values), len(base.Values), len(sums), err)
	}
	for i, r := range sums {
		if got, want := flat(reflect.ValueOf(r)), norm(append(raw.Values[i], base.Values[i][0]), map[int]bool{3: true, 28: true, 30: true}); !reflect.DeepEqual(got, want) {
			t.Errorf("run_summary row %d:\n got %v\nwant %v", i, got, want)
		}
	}
	details, err := db.RunDetails(ctx, RunsQuery{SweepID: sw, Where: "dataset = 'sharegpt'"})
	if err != nil || len(details) != 2 || details[1].Dataset != "sharegpt" || details[1].InputTokens != nil || *details[1].Speedup != 1.5 {
		t.Errorf("run details of the sharegpt cell: %+v %v", details, err)
	}
	// The user's queries may name the cell.
	rows, err := db.QueryRuns(ctx, RunsQuery{SweepID: sw, Where: "input_tokens = 4096", OrderBy: "speedup DESC"})
	if err != nil || len(rows.Values) != 2 || rows.Values[0][2] != "s1" || rows.Values[0][29] != int64(4096) || rows.Values[0][28] != nil {
		t.Errorf("runs of input_tokens 4096: %v %v", rows, err)
	}
}

// TestDuplicateRunPerCell: a level and attempt hold one run per cell, NULLs equal: the same cell
// twice, the zero cell included, is ErrDuplicateRun; another cell of the same level is not.
func TestDuplicateRunPerCell(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "dup")
	att, err := db.ClaimPoint(ctx, sw, "s1", "h4")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		dataset string
		tokens  int
		dup     bool
	}{
		{"", 0, false}, {"", 0, true}, // a UNIQUE constraint would hold the NULLs distinct
		{"", 1024, false}, {"", 1024, true},
		{"", 4096, false},
		{"sharegpt", 0, false}, {"sharegpt", 0, true},
		{"sharegpt", 1024, false}, {"sharegpt", 1024, true},
		{"mtbench", 0, false},
	} {
		err := db.RecordRun(ctx, cellRun(sw, "s1", att, 16, 1, x.dataset, x.tokens, 100))
		if x.dup != errors.Is(err, ErrDuplicateRun) || (!x.dup && err != nil) {
			t.Errorf("run on %q/%d (a duplicate: %v): %v", x.dataset, x.tokens, x.dup, err)
		}
		if x.dup && err != nil && !strings.Contains(err.Error(), "repeat 1") {
			t.Errorf("duplicate's error does not say which run: %v", err)
		}
	}
	if err := db.RecordRun(ctx, cellRun(sw, "s1", att, 16, 1, "sharegpt", 1024, 100)); err == nil ||
		!strings.Contains(err.Error(), "dataset sharegpt, input tokens 1024") {
		t.Errorf("duplicate's error does not name the cell: %v", err)
	}
	if err := db.RecordRun(ctx, cellRun(sw, "s1", att, 16, 2, "", 1024, 100)); err != nil {
		t.Errorf("the cell at another repeat: %v", err)
	}
	if err := db.RecordRun(ctx, cellRun(sw, "s1", att, 16, 3, "", -1, 100)); err == nil || errors.Is(err, ErrDuplicateRun) {
		t.Errorf("negative input tokens: %v", err)
	}
	// The cell survives a re-run: the next attempt records the same cells again.
	if err := db.ReleasePoint(ctx, sw, "s1", att, "interrupted"); err != nil {
		t.Fatal(err)
	}
	att, err = db.ClaimPoint(ctx, sw, "s1", "h4")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.RecordRun(ctx, cellRun(sw, "s1", att, 16, 1, "", 1024, 100)); err != nil {
		t.Errorf("the cell in the next attempt: %v", err)
	}
}

// TestPlannedRunsCountCells: a point planning one level on three cells is done only with the three
// runs recorded.
func TestPlannedRunsCountCells(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw, err := db.CreateSweep(ctx, NewSweep{Name: "planned"}, []NewHost{{Name: "h", GPUs: 1}},
		[]NewPoint{{ID: "b", Method: "baseline", Baseline: true, TP: 1, Runs: 3}})
	if err != nil {
		t.Fatal(err)
	}
	att, err := db.ClaimPoint(ctx, sw, "b", "h")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{128, 1024} {
		if err := db.RecordRun(ctx, cellRun(sw, "b", att, 8, 1, "", n, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishPoint(ctx, sw, "b", att, PointFinish{State: PointDone}); !errors.Is(err, ErrIncomplete) {
		t.Errorf("done with 2 of 3 cells: %v, want ErrIncomplete", err)
	}
	if err := db.RecordRunAndFinish(ctx, cellRun(sw, "b", att, 8, 1, "sharegpt", 0, 100), &PointFinish{State: PointDone}); err != nil {
		t.Errorf("done with the third cell: %v", err)
	}
}

// TestRunReadersCarryTheCell: the search's inputs, the live stream's runs and plan's timings read
// each run's cell; a level's several cells are several runs.
func TestRunReadersCarryTheCell(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := searchSweep(t, db, "readers")
	att, err := db.ClaimPoint(ctx, sw, "b4", "h4")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Run{
		cellRun(sw, "b4", att, 16, 1, "sharegpt", 0, 300),
		cellRun(sw, "b4", att, 1, 1, "", 4096, 40),
		cellRun(sw, "b4", att, 1, 1, "", 1024, 100),
		cellRun(sw, "b4", att, 1, 1, "sharegpt", 0, 90),
	} {
		if err := db.RecordRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	in, err := db.SearchInputs(ctx, sw)
	if err != nil || len(in) != 5 {
		t.Fatalf("search inputs: %+v %v", in, err)
	}
	var got []string
	for _, r := range in[0].Runs {
		got = append(got, fmt.Sprintf("c%d r%d %s/%d %v", r.Concurrency, r.Repeat, r.Dataset, r.InputTokens, *r.OutputTokS))
	}
	if w := "c1 r1 /1024 100|c1 r1 /4096 40|c1 r1 sharegpt/0 90|c16 r1 sharegpt/0 300"; strings.Join(got, "|") != w {
		t.Errorf("search runs of b4: %s, want %s", strings.Join(got, "|"), w)
	}

	evs, err := db.RunsAfter(ctx, 0, 10)
	if err != nil || len(evs) != 4 {
		t.Fatalf("runs after 0: %+v %v", evs, err)
	}
	got = nil
	for _, e := range evs {
		got = append(got, fmt.Sprintf("c%d %s/%d", e.Concurrency, e.Dataset, e.InputTokens))
	}
	if w := "c16 sharegpt/0|c1 /4096|c1 /1024|c1 sharegpt/0"; strings.Join(got, "|") != w {
		t.Errorf("live runs: %s, want %s", strings.Join(got, "|"), w)
	}

	tim, err := db.PointTimings(ctx)
	if err != nil || len(tim) != 1 {
		t.Fatalf("point timings: %+v %v", tim, err)
	}
	if got := fmt.Sprint(tim[0].TokS); got != "map[1:[40 100 90] 16:[300]]" {
		t.Errorf("timings by level: %s (a level's cells are several runs)", got)
	}
	got = nil
	for _, r := range tim[0].Runs {
		got = append(got, fmt.Sprintf("c%d %s/%d %v", r.Concurrency, r.Dataset, r.InputTokens, r.TokS))
	}
	if w := "c16 sharegpt/0 300|c1 /4096 40|c1 /1024 100|c1 sharegpt/0 90"; strings.Join(got, "|") != w {
		t.Errorf("timed runs: %s, want %s", strings.Join(got, "|"), w)
	}
}

// TestSpeedupLookupPlan: the baseline run of a speedup is one search of the covering index
// runs_by_level by point, level and cell (IS constrains an index column as = does).
func TestSpeedupLookupPlan(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	fillBench(t, db, "bench", 20)
	rows, err := db.rw.QueryContext(ctx, "EXPLAIN QUERY PLAN SELECT speedup FROM run_summary WHERE sweep_id = 1")
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	rows.Close()
	text := strings.Join(plan, "\n")
	if w := "SEARCH b USING COVERING INDEX runs_by_level (point_ref=? AND concurrency=? AND repeat=? AND dataset=? AND input_tokens=? AND status=?)"; !strings.Contains(text, w) {
		t.Errorf("no %q in the plan:\n%s", w, text)
	}
	t.Logf("plan:\n%s", text)
}
