package store

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// summaryDB is sampleSweep with ok runs (two repeats of s1), a failed run, a failed point, an
// interrupted one, recorded point info and output checks (b4 a reference, s1 a mismatch).
func summaryDB(t *testing.T) (*DB, int64) {
	t.Helper()
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "sum")
	for _, pid := range []string{"b4", "s1", "s2", "b8"} {
		a, err := db.ClaimPoint(ctx, sw, pid, map[bool]string{true: "h8", false: "h4"}[strings.HasSuffix(pid, "8")])
		if err != nil {
			t.Fatal(err)
		}
		switch pid {
		case "s2":
			if err := db.RecordRun(ctx, Run{SweepID: sw, PointID: pid, Attempt: a, Concurrency: 1, Repeat: 1,
				Status: RunFailed, Error: "boom"}); err != nil {
				t.Fatal(err)
			}
			if err := db.FinishPoint(ctx, sw, pid, a, PointFinish{State: PointFailed, FailureClass: FailOOM,
				FailureDetail: "oom\nline"}); err != nil {
				t.Fatal(err)
			}
			continue
		case "b8":
			if err := db.ReleasePoint(ctx, sw, pid, a, "host lost"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := db.SetPointInfo(ctx, sw, pid, a, PointInfo{EffectiveArgs: json.RawMessage(`{"tp_size":4}`),
			Provenance: json.RawMessage(`{"engine":"x"}`), ExecStart: "/bin/python -m x", Load: 1500 * time.Millisecond,
			EffectiveNumSteps: ip(2)}); err != nil {
			t.Fatal(err)
		}
		if err := db.SetPointOutputs(ctx, sw, pid, a, json.RawMessage(`{"prompts":1,"runs":[["a"]]}`)); err != nil {
			t.Fatal(err)
		}
		check := OutputCheck{Result: OutputCheckReference, Agreement: fp(1)}
		if pid == "s1" {
			check = OutputCheck{Result: OutputCheckMismatch, Agreement: fp(0.25), Evidence: json.RawMessage(`{"prompt":0}`)}
		}
		if err := db.SetOutputCheck(ctx, sw, pid, check); err != nil {
			t.Fatal(err)
		}
		for _, c := range []int{1, 16} {
			for rep := 1; rep <= 2; rep++ {
				r := okRun(sw, pid, a, c, rep, float64(100*c*rep))
				switch {
				case pid == "s1" && c == 16: // a precision-targeted level, reached or not
					r.Metrics.Interval = &Interval{Metric: "output_tok_s", Mean: 1590, Low: 1560, High: 1620, Confidence: 0.95,
						Batches: 20, Target: 0.02, Reached: rep == 1}
				case pid == "b4" && c == 1: // a fixed count's interval
					r.Metrics.Interval = &Interval{Metric: "tpot_ms", Mean: 11, Low: 10.5, High: 11.5, Confidence: 0.9, Batches: 12}
				}
				if err := db.RecordRun(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return db, sw
}

// flat renders a struct's exported fields (embedded ones inlined, pointers dereferenced, times as
// unix ms, raw JSON as text) in order, as the view's row would read.
func flat(v reflect.Value) []any {
	var out []any
	for i := 0; i < v.NumField(); i++ {
		f, sf := v.Field(i), v.Type().Field(i)
		if sf.Anonymous {
			out = append(out, flat(f)...)
			continue
		}
		switch x := f.Interface().(type) {
		case time.Time:
			if x.IsZero() {
				out = append(out, nil)
			} else {
				out = append(out, x.UnixMilli())
			}
		case json.RawMessage:
			if x == nil {
				out = append(out, nil)
			} else {
				out = append(out, string(x))
			}
		case bool:
			out = append(out, map[bool]int64{true: 1, false: 0}[x])
		default:
			if f.Kind() == reflect.Pointer {
				if f.IsNil() {
					out = append(out, nil)
					continue
				}
				f = f.Elem()
			}
			switch f.Kind() {
			case reflect.Bool:
				out = append(out, map[bool]int64{true: 1, false: 0}[f.Bool()])
			case reflect.Int, reflect.Int64:
				out = append(out, f.Int())
			case reflect.Float64:
				out = append(out, f.Float())
			case reflect.String:
				out = append(out, f.String())
			}
		}
	}
	return out
}

// norm maps what the view returns to what the typed reader says for "not recorded".
func norm(v []any, emptyIsNull map[int]bool) []any {
	out := make([]any, len(v))
	for i, x := range v {
		if x == nil && emptyIsNull[i] {
			x = ""
		}
		out[i] = x
	}
	return out
}

func TestTypedReadersMatchTheViews(t *testing.T) {
	ctx := context.Background()
	db, sw := summaryDB(t)

	sums, err := db.RunSummaries(ctx, RunsQuery{SweepID: sw})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := db.QueryRuns(ctx, RunsQuery{SweepID: sw})
	if err != nil {
		t.Fatal(err)
	}
	// RunSummary.IsBaseline is run_detail's baseline column, after run_summary's.
	base, err := db.Query(ctx, "SELECT baseline FROM run_detail WHERE sweep_id = ? ORDER BY plan_order, concurrency, repeat", sw)
	if err != nil || len(base.Values) != len(raw.Values) {
		t.Fatalf("baseline column: %v", err)
	}
	for i := range raw.Values {
		raw.Values[i] = append(raw.Values[i], base.Values[i][0])
	}
	if len(sums) != len(raw.Values) || len(sums) != 2*2*2+1 {
		t.Fatalf("%d typed rows, %d raw", len(sums), len(raw.Values))
	}
	// host (3), dataset (28) and ci_metric (30) read "" for NULL.
	for i, r := range sums {
		if got, want := flat(reflect.ValueOf(r)), norm(raw.Values[i], map[int]bool{3: true, 28: true, 30: true}); !reflect.DeepEqual(got, want) {
			t.Errorf("run_summary row %d:\n got %v\nwant %v", i, got, want)
		}
	}

	ok, err := db.RunDetails(ctx, RunsQuery{SweepID: sw, OK: true})
	if err != nil {
		t.Fatal(err)
	}
	cols := strings.Join(append(append(append([]string(nil), runSummaryColumns...), "baseline"), runDetailColumns...), ", ")
	rawD, err := db.Query(ctx, "SELECT "+cols+" FROM run_detail WHERE sweep_id = ? AND status = 'ok' ORDER BY plan_order, concurrency, repeat", sw)
	if err != nil {
		t.Fatal(err)
	}
	if len(ok) != len(rawD.Values) || len(ok) != 8 {
		t.Fatalf("%d typed ok details, %d raw", len(ok), len(rawD.Values))
	}
	for i, r := range ok {
		if got, want := flat(reflect.ValueOf(r)), norm(rawD.Values[i], map[int]bool{3: true, 28: true, 30: true}); !reflect.DeepEqual(got, want) {
			t.Errorf("run_detail row %d:\n got %v\nwant %v", i, got, want)
		}
	}

	pts, err := db.PointSummaries(ctx, sw)
	if err != nil {
		t.Fatal(err)
	}
	rawP, err := db.Query(ctx, "SELECT * FROM point_summary WHERE sweep_id = ?", sw)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 5 || len(rawP.Values) != 5 {
		t.Fatalf("%d typed points, %d raw", len(pts), len(rawP.Values))
	}
	for i, p := range pts {
		want := norm(rawP.Values[i], map[int]bool{3: true, 11: true, 12: true, 14: true, 23: true, 24: true})
		if want[13] == nil {
			want[13] = 0.0
		}
		if got := flat(reflect.ValueOf(p)); !reflect.DeepEqual(got, want) {
			t.Errorf("point_summary row %d:\n got %v\nwant %v", i, got, want)
		}
	}
	if p := pts[1]; p.PointID != "s1" || p.LoadS != 1.5 || *p.EffectiveNumSteps != 2 || p.EffectiveTopK != nil || p.Baseline() {
		t.Errorf("s1: %+v", p)
	}
	if p := pts[2]; p.State != PointFailed || p.FailureClass != FailOOM || p.FailureDetail != "oom\nline" {
		t.Errorf("s2: %+v", p)
	}
	if p := pts[0]; p.OutputCheck != OutputCheckReference || p.OutputAgreement == nil || *p.OutputAgreement != 1 {
		t.Errorf("b4's output check: %q %v", p.OutputCheck, p.OutputAgreement)
	}
	if p := pts[1]; p.OutputCheck != OutputCheckMismatch || p.OutputAgreement == nil || *p.OutputAgreement != 0.25 {
		t.Errorf("s1's output check: %q %v", p.OutputCheck, p.OutputAgreement)
	}
	if p := pts[4]; p.OutputCheck != "" || p.OutputAgreement != nil {
		t.Errorf("s1t8's output check: %q %v", p.OutputCheck, p.OutputAgreement)
	}
}

func TestStateCounts(t *testing.T) {
	ctx := context.Background()
	db, sw := summaryDB(t)
	if _, err := db.CreateSweep(ctx, NewSweep{Name: "later", SpecHash: "x", SpecText: "x", State: SweepScheduled},
		nil, []NewPoint{{ID: "p", Method: "baseline", Baseline: true, TP: 1, Runs: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := db.SetSweepState(ctx, sw, SweepRunning, ""); err != nil {
		t.Fatal(err)
	}
	c, err := db.StateCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[SweepState]int{SweepScheduled: 1, SweepQueued: 0, SweepRunning: 1, SweepInterrupted: 0,
		SweepDone: 0, SweepFailed: 0, SweepCancelled: 0}
	if !reflect.DeepEqual(c.Sweeps, want) {
		t.Errorf("sweeps: %v, want %v", c.Sweeps, want)
	}
	got := fmt.Sprint(c.Points)
	if w := "[{failed oom 1} {pending  2} {pending interrupted 1} {running  2}]"; got != w {
		t.Errorf("points: %s, want %s", got, w)
	}
}

// TestRunIntervalsAreStored: a level's interval and its precision target land in the runs'
// columns, NULL where the level had none (docs/schema.md, runs.ci_*).
func TestRunIntervalsAreStored(t *testing.T) {
	ctx := context.Background()
	db, sw := summaryDB(t)
	got, err := db.Query(ctx, `SELECT point_id, concurrency, repeat, ci_metric, ci_mean, ci_low, ci_high, ci_confidence,
		ci_batches, precision_target, precision_reached FROM run_detail
		WHERE sweep_id = ? AND ci_metric IS NOT NULL ORDER BY plan_order, concurrency, repeat`, sw)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]any{
		{"b4", int64(1), int64(1), "tpot_ms", 11.0, 10.5, 11.5, 0.9, int64(12), nil, nil},
		{"b4", int64(1), int64(2), "tpot_ms", 11.0, 10.5, 11.5, 0.9, int64(12), nil, nil},
		{"s1", int64(16), int64(1), "output_tok_s", 1590.0, 1560.0, 1620.0, 0.95, int64(20), 0.02, int64(1)},
		{"s1", int64(16), int64(2), "output_tok_s", 1590.0, 1560.0, 1620.0, 0.95, int64(20), 0.02, int64(0)},
	}
	if !reflect.DeepEqual(got.Values, want) {
		t.Errorf("stored intervals:\n got %v\nwant %v", got.Values, want)
	}
}
