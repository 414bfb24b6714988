package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestViewColumns(t *testing.T) {
	db := openTest(t)
	want := map[string]string{
		"run_summary": "sweep, sweep_id, point_id, host, method, num_steps, topk, num_draft_tokens, tp, concurrency, repeat, " +
			"status, requests, completed, failed, output_tok_s, request_s, ttft_p50_ms, ttft_p99_ms, itl_p50_ms, " +
			"itl_p99_ms, tpot_p50_ms, e2e_p50_ms, accept_length, speedup, started_at, finished_at, accept_length_source, " +
			"dataset, input_tokens, ci_metric, ci_low, ci_high, ci_confidence, precision_reached",
		"point_summary": "sweep, sweep_id, point_id, host, method, num_steps, topk, num_draft_tokens, tp, state, attempts, " +
			"failure_class, failure_detail, load_s, exec_start, effective_args, provenance, started_at, finished_at, " +
			"effective_num_steps, effective_topk, effective_num_draft_tokens, baseline, reason, output_check, output_agreement",
		"event_log": "sweep, sweep_id, point_id, host, at, kind, detail",
	}
	for view, cols := range want {
		rows, err := db.Query(context.Background(), "SELECT * FROM "+view+" LIMIT 0")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(rows.Columns, ", "); got != cols {
			t.Errorf("%s columns:\n got %s\nwant %s", view, got, cols)
		}
	}
	if got := strings.Join(runSummaryColumns, ", "); got != want["run_summary"] {
		t.Errorf("runSummaryColumns out of date: %s", got)
	}
}

// speedups returns point/concurrency/repeat -> speedup (nil for NULL).
func speedups(t *testing.T, db *DB, sweep string) map[string]any {
	t.Helper()
	rows, err := db.Query(context.Background(),
		"SELECT point_id || '/' || concurrency || '/' || repeat || '/' || status, speedup FROM run_summary WHERE sweep = ?", sweep)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	for _, r := range rows.Values {
		out[r[0].(string)] = r[1]
	}
	return out
}

func TestSpeedup(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "sp")
	rec := func(point string, conc, rep int, tok float64) {
		t.Helper()
		p, err := db.Point(ctx, sw, point)
		if err != nil {
			t.Fatal(err)
		}
		att := p.Attempts
		if p.State != PointRunning {
			if att, err = db.ClaimPoint(ctx, sw, point, "h8"); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.RecordRun(ctx, okRun(sw, point, att, conc, rep, tok)); err != nil {
			t.Fatal(err)
		}
	}
	rec("b4", 1, 1, 100)
	rec("b4", 16, 1, 400)
	rec("s1", 1, 1, 150)
	rec("s1", 16, 1, 500)
	rec("s1", 16, 2, 500)  // no baseline at repeat 2
	rec("s1t8", 1, 1, 200) // tp 8: the baseline b8 has no run
	got := speedups(t, db, "sp")
	want := map[string]any{
		"b4/1/1/ok": 1.0, "b4/16/1/ok": 1.0, "s1/1/1/ok": 1.5, "s1/16/1/ok": 1.25,
		"s1/16/2/ok": nil, "s1t8/1/1/ok": nil,
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("speedup %s = %v, want %v", k, g, w)
		}
	}
	// A failed baseline run does not count; a superseded one neither.
	att, _ := db.ClaimPoint(ctx, sw, "b8", "h8")
	if err := db.RecordRun(ctx, Run{SweepID: sw, PointID: "b8", Attempt: att, Concurrency: 1, Repeat: 1, Status: RunFailed}); err != nil {
		t.Fatal(err)
	}
	if g := speedups(t, db, "sp")["s1t8/1/1/ok"]; g != nil {
		t.Errorf("speedup over a failed baseline run: %v", g)
	}
	if err := db.ReleasePoint(ctx, sw, "b4", 1, "test"); err != nil {
		t.Fatal(err)
	}
	got = speedups(t, db, "sp")
	if g := got["s1/1/1/ok"]; g != nil {
		t.Errorf("speedup over a superseded baseline run: %v", g)
	}
	if g := got["b4/1/1/superseded"]; g != nil {
		t.Errorf("superseded baseline's own speedup: %v", g)
	}
}

func TestSpeedupFirstBaselineInPlanOrder(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw, err := db.CreateSweep(ctx, NewSweep{Name: "two-baselines"}, []NewHost{{Name: "h", GPUs: 4}}, []NewPoint{
		{ID: "base-a", Method: "baseline", Baseline: true, TP: 4},
		{ID: "base-b", Method: "baseline-fa3", Baseline: true, TP: 4},
		{ID: "spec", Method: "eagle3", TP: 4, NumSteps: ip(3), TopK: ip(1), NumDraftTokens: ip(4)},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Record base-b first: plan order, not insertion order, decides.
	for _, x := range []struct {
		id  string
		tok float64
	}{{"base-b", 200}, {"base-a", 100}, {"spec", 300}} {
		att, err := db.ClaimPoint(ctx, sw, x.id, "h")
		if err != nil {
			t.Fatal(err)
		}
		if err := db.RecordRun(ctx, okRun(sw, x.id, att, 8, 1, x.tok)); err != nil {
			t.Fatal(err)
		}
	}
	got := speedups(t, db, "two-baselines")
	if got["spec/8/1/ok"] != 3.0 || got["base-b/8/1/ok"] != 2.0 {
		t.Errorf("speedups %v, want spec 3 (over base-a), base-b 2", got)
	}
}

func TestEventLogOrder(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "ev")
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, e := range []Event{
		{SweepID: sw, PointID: "s1", Host: "h4", At: base.Add(2 * time.Second), Kind: "stop", Detail: "second"},
		{SweepID: sw, PointID: "s1", Host: "h4", At: base.Add(1 * time.Second), Kind: "stop", Detail: "first"},
		{SweepID: sw, Host: "h4", At: base.Add(2 * time.Second), Kind: "reconnect", Detail: "third (same ms, later id)"},
		{SweepID: sw, PointID: "s1", Host: "h4", At: base.Add(3 * time.Second), Kind: "stop_timeout_sigkill", Detail: "fourth"},
	} {
		if err := db.AddEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.AddEvent(ctx, Event{SweepID: sw, PointID: "zz", Kind: "x"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("event of unknown point: %v", err)
	}
	rows, err := db.Query(ctx, "SELECT sweep, sweep_id, point_id, host, at, kind, detail FROM event_log WHERE at >= ?", base.UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows.Values {
		got = append(got, r[6].(string))
	}
	if strings.Join(got, "|") != "first|second|third (same ms, later id)|fourth" {
		t.Errorf("order: %q", got)
	}
	r := rows.Values[0]
	if r[0] != "ev" || r[1] != sw || r[2] != "s1" || r[3] != "h4" || r[4] != base.Add(time.Second).UnixMilli() || r[5] != "stop" {
		t.Errorf("row: %v", r)
	}
	if rows.Values[2][2] != nil {
		t.Errorf("host event has point %v", rows.Values[2][2])
	}
}

func TestPointSummary(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "ps")
	att, _ := db.ClaimPoint(ctx, sw, "s1", "h4")
	db.SetPointInfo(ctx, sw, "s1", att, PointInfo{Load: 90 * time.Second, ExecStart: "/x"})
	if err := db.FinishPoint(ctx, sw, "s1", att, PointFinish{State: PointFailed, FailureClass: FailReadyTimeout, FailureDetail: "20m"}); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(ctx, "SELECT point_id, host, num_steps, state, attempts, failure_class, load_s, started_at < finished_at FROM point_summary WHERE sweep_id = ?", sw)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows.Values) != 5 || rows.Values[0][0] != "b4" || rows.Values[0][2] != nil {
		t.Fatalf("rows %v", rows.Values)
	}
	r := rows.Values[1]
	if r[0] != "s1" || r[1] != "h4" || r[2] != int64(1) || r[3] != "failed" || r[4] != int64(1) || r[5] != "ready_timeout" || r[6] != 90.0 || r[7] != int64(1) {
		t.Errorf("s1 row %v", r)
	}
}
