package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// outputsOf returns the stored outputs and output check of one point.
func outputsOf(t *testing.T, db *DB, sweepID int64, point string) PointOutputs {
	t.Helper()
	outs, err := db.OutputChecks(context.Background(), sweepID)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		if o.PointID == point {
			return o
		}
	}
	t.Fatalf("no point %s in OutputChecks", point)
	return PointOutputs{}
}

// noOutputs fails unless the point has no outputs and no output check, read both from the table
// (through OutputChecks) and from point_summary.
func noOutputs(t *testing.T, db *DB, sweepID int64, point, what string) {
	t.Helper()
	if o := outputsOf(t, db, sweepID, point); o.Outputs != nil || o.Check != "" || o.Agreement != nil || o.Evidence != nil {
		t.Errorf("%s: %s still has outputs or a check: %+v", what, point, o)
	}
	rows, err := db.Query(context.Background(),
		"SELECT output_check, output_agreement FROM point_summary WHERE sweep_id = ? AND point_id = ?", sweepID, point)
	if err != nil || len(rows.Values) != 1 || rows.Values[0][0] != nil || rows.Values[0][1] != nil {
		t.Errorf("%s: point_summary of %s: %v %v", what, point, rows, err)
	}
}

func outputsJSON(texts ...string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"prompts": len(texts), "runs": [][]string{texts, texts}})
	return b
}

func TestSetPointOutputs(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "out")
	att, err := db.ClaimPoint(ctx, sw, "s1", "h4")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what    string
		point   string
		attempt int
		outputs json.RawMessage
		is      error
	}{
		{"no outputs", "s1", att, nil, nil},
		{"empty outputs", "s1", att, json.RawMessage(""), nil},
		{"invalid JSON", "s1", att, json.RawMessage(`{"prompts":`), nil},
		{"stale attempt", "s1", att + 1, outputsJSON("a"), ErrStaleAttempt},
		{"pending point", "s2", 0, outputsJSON("a"), ErrTransition},
		{"unknown point", "nope", 1, outputsJSON("a"), ErrNotFound},
	} {
		err := db.SetPointOutputs(ctx, sw, c.point, c.attempt, c.outputs)
		if err == nil || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("%s: %v, want %v", c.what, err, c.is)
		}
	}
	noOutputs(t, db, sw, "s1", "refused outputs")

	first := outputsJSON("The capital of France is Paris.", "2 + 2 = 4")
	if err := db.SetPointOutputs(ctx, sw, "s1", att, first); err != nil {
		t.Fatal(err)
	}
	if o := outputsOf(t, db, sw, "s1"); string(o.Outputs) != string(first) || o.Check != "" || o.Attempt != att {
		t.Errorf("stored outputs: %+v", o)
	}
	// Stored as given: the store does not interpret them.
	var back struct {
		Prompts int
		Runs    [][]string
	}
	if err := json.Unmarshal(outputsOf(t, db, sw, "s1").Outputs, &back); err != nil || back.Prompts != 2 || back.Runs[1][0] != "The capital of France is Paris." {
		t.Errorf("outputs read back: %+v %v", back, err)
	}

	// New outputs replace the old ones and clear the check, which was about the old ones.
	if err := db.SetOutputCheck(ctx, sw, "s1", OutputCheck{Result: OutputCheckMismatch, Agreement: fp(0.5),
		Evidence: json.RawMessage(`{"prompt":1}`)}); err != nil {
		t.Fatal(err)
	}
	second := json.RawMessage(`{"prompts":1,"runs":[["x"],["x"]]}`)
	if err := db.SetPointOutputs(ctx, sw, "s1", att, second); err != nil {
		t.Fatal(err)
	}
	if o := outputsOf(t, db, sw, "s1"); string(o.Outputs) != string(second) || o.Check != "" || o.Agreement != nil || o.Evidence != nil {
		t.Errorf("outputs set again: %+v", o)
	}

	// A finished point's outputs are final for that attempt.
	for _, conc := range []int{1, 16} {
		if err := db.RecordRun(ctx, okRun(sw, "s1", att, conc, 1, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishPoint(ctx, sw, "s1", att, PointFinish{State: PointDone}); err != nil {
		t.Fatal(err)
	}
	if err := db.SetPointOutputs(ctx, sw, "s1", att, first); !errors.Is(err, ErrTransition) {
		t.Errorf("outputs of a done point: %v, want ErrTransition", err)
	}
	if o := outputsOf(t, db, sw, "s1"); string(o.Outputs) != string(second) || o.State != PointDone {
		t.Errorf("done point: %+v", o)
	}
}

func TestSetOutputCheck(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "check")
	attempts := map[string]int{}
	for _, pid := range []string{"b4", "s1", "s2", "s1t8"} {
		host := "h4"
		if strings.HasSuffix(pid, "8") {
			host = "h8"
		}
		att, err := db.ClaimPoint(ctx, sw, pid, host)
		if err != nil {
			t.Fatal(err)
		}
		attempts[pid] = att
		if pid == "s2" {
			continue // s2 stores no outputs
		}
		if err := db.SetPointOutputs(ctx, sw, pid, att, outputsJSON("a", "b")); err != nil {
			t.Fatal(err)
		}
	}

	for _, c := range []struct {
		what  string
		point string
		check OutputCheck
		is    error
	}{
		{"no result", "s1", OutputCheck{}, nil},
		{"unknown result", "s1", OutputCheck{Result: "same"}, nil},
		{"agreement above 1", "s1", OutputCheck{Result: OutputCheckOK, Agreement: fp(1.01)}, nil},
		{"negative agreement", "s1", OutputCheck{Result: OutputCheckOK, Agreement: fp(-0.1)}, nil},
		{"NaN agreement", "s1", OutputCheck{Result: OutputCheckOK, Agreement: fp(math.NaN())}, nil},
		{"invalid evidence", "s1", OutputCheck{Result: OutputCheckMismatch, Evidence: json.RawMessage("{")}, nil},
		{"a speculative reference", "s1", OutputCheck{Result: OutputCheckReference}, nil},
		{"no outputs", "s2", OutputCheck{Result: OutputCheckOK}, ErrNoOutputs},
		{"never started", "b8", OutputCheck{Result: OutputCheckReference}, ErrNoOutputs},
		{"stale attempt", "s1", OutputCheck{Result: OutputCheckOK, Attempt: attempts["s1"] + 1}, ErrStaleAttempt},
		{"unknown point", "nope", OutputCheck{Result: OutputCheckOK}, ErrNotFound},
	} {
		err := db.SetOutputCheck(ctx, sw, c.point, c.check)
		if err == nil || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("%s: %v, want %v", c.what, err, c.is)
		}
	}
	for _, pid := range []string{"b4", "s1", "s2", "s1t8"} {
		if o := outputsOf(t, db, sw, pid); o.Check != "" {
			t.Errorf("%s checked by a refused check: %+v", pid, o)
		}
	}

	// Before the reference is checked, a point's check names no reference figure.
	if err := db.SetOutputCheck(ctx, sw, "s1", OutputCheck{Result: OutputCheckOK, Agreement: fp(1), Attempt: attempts["s1"]}); err != nil {
		t.Fatal(err)
	}
	if err := db.SetOutputCheck(ctx, sw, "b4", OutputCheck{Result: OutputCheckReference, Agreement: fp(1)}); err != nil {
		t.Fatal(err)
	}
	evidence := json.RawMessage(`{"prompt":1,"position":17,"reference":"b","point":"c"}`)
	if err := db.SetOutputCheck(ctx, sw, "s1", OutputCheck{Result: OutputCheckMismatch, Agreement: fp(0.3125), Evidence: evidence}); err != nil {
		t.Fatal(err)
	}
	// tp 8: its reference b8 has not run.
	if err := db.SetOutputCheck(ctx, sw, "s1t8", OutputCheck{Result: OutputCheckOK}); err != nil {
		t.Fatal(err)
	}
	for point, want := range map[string][]string{
		"b4":   {"output_check: reference: agreement 1.00 between its own runs"},
		"s1":   {"output_check: ok: agreement 1.00", "output_check: mismatch: agreement 0.31 (reference 1.00)"},
		"s1t8": {"output_check: ok"},
		"s2":   nil,
	} {
		var got []string
		for _, l := range eventLines(t, db, sw, point) {
			if strings.HasPrefix(l, "output_check") {
				got = append(got, l)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("events of %s: %q, want %q", point, got, want)
		}
	}
	evs, err := db.Events(ctx, sw, "s1t8")
	if err != nil || evs[len(evs)-1].Host != "h8" {
		t.Errorf("the check's event names no host: %+v %v", evs, err)
	}
	o := outputsOf(t, db, sw, "s1")
	if o.Check != OutputCheckMismatch || o.Agreement == nil || *o.Agreement != 0.3125 || string(o.Evidence) != string(evidence) {
		t.Errorf("s1's check: %+v", o)
	}

	// A mismatch fails the point with its own class; its outputs and check stay as evidence.
	if err := db.FinishPoint(ctx, sw, "s1", attempts["s1"], PointFinish{State: PointFailed,
		FailureClass: FailOutputMismatch, FailureDetail: "agreement 0.31 (reference 1.00)"}); err != nil {
		t.Fatal(err)
	}
	p, err := db.Point(ctx, sw, "s1")
	if err != nil || p.State != PointFailed || p.FailureClass != FailOutputMismatch {
		t.Errorf("s1 after the mismatch: %+v %v", p, err)
	}
	if o := outputsOf(t, db, sw, "s1"); o.Check != OutputCheckMismatch || o.Outputs == nil {
		t.Errorf("failed s1 lost its outputs: %+v", o)
	}
	c, err := db.StateCounts(ctx)
	if err != nil || !strings.Contains(fmt.Sprint(c.Points), "{failed output_mismatch 1}") {
		t.Errorf("state counts: %v %v", c.Points, err)
	}

	// The check may come after the point finished: the reference ran elsewhere, or later.
	for _, conc := range []int{1, 16} {
		if err := db.RecordRun(ctx, okRun(sw, "b4", attempts["b4"], conc, 1, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishPoint(ctx, sw, "b4", attempts["b4"], PointFinish{State: PointDone}); err != nil {
		t.Fatal(err)
	}
	if err := db.SetOutputCheck(ctx, sw, "b4", OutputCheck{Result: OutputCheckReference, Agreement: fp(0.9),
		Attempt: attempts["b4"]}); err != nil {
		t.Errorf("check of a done point: %v", err)
	}
	if o := outputsOf(t, db, sw, "b4"); o.State != PointDone || o.Check != OutputCheckReference || *o.Agreement != 0.9 {
		t.Errorf("b4 checked after it finished: %+v", o)
	}
}

func TestFailOutputMismatchClass(t *testing.T) {
	if !FailOutputMismatch.Valid() || FailOutputMismatch != "output_mismatch" {
		t.Errorf("FailOutputMismatch %q: valid %v", FailOutputMismatch, FailOutputMismatch.Valid())
	}
	n := 0
	for _, c := range FailureClasses {
		if c == FailOutputMismatch {
			n++
		}
	}
	if n != 1 {
		t.Errorf("FailOutputMismatch is %d times in FailureClasses", n)
	}
}

// TestOutputsClearedWhenPointGoesBack: every way a point goes back to pending or waiting forgets
// its outputs and check with its runs (superseded); a done point keeps them.
func TestOutputsClearedWhenPointGoesBack(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "back")
	// run claims the point (pending), stores outputs and a check, and returns the attempt.
	run := func(point, host string) int {
		t.Helper()
		att, err := db.ClaimPoint(ctx, sw, point, host)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.SetPointOutputs(ctx, sw, point, att, outputsJSON("a")); err != nil {
			t.Fatal(err)
		}
		check := OutputCheck{Result: OutputCheckOK, Agreement: fp(1), Evidence: json.RawMessage(`{}`)}
		if strings.HasPrefix(point, "b") {
			check.Result = OutputCheckReference
		}
		if err := db.SetOutputCheck(ctx, sw, point, check); err != nil {
			t.Fatal(err)
		}
		if err := db.RecordRun(ctx, okRun(sw, point, att, 1, 1, 100)); err != nil {
			t.Fatal(err)
		}
		return att
	}
	finish := func(point string, att int, f PointFinish) {
		t.Helper()
		if f.State == PointDone {
			if err := db.RecordRun(ctx, okRun(sw, point, att, 16, 1, 100)); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.FinishPoint(ctx, sw, point, att, f); err != nil {
			t.Fatal(err)
		}
	}

	// running -> pending: ReleasePoint.
	att := run("s1", "h4")
	if err := db.ReleasePoint(ctx, sw, "s1", att, "host rebooted"); err != nil {
		t.Fatal(err)
	}
	noOutputs(t, db, sw, "s1", "release")
	runStatuses(t, db, sw, "s1", "superseded")
	// A check of the interrupted attempt's outputs, arriving late, finds them gone.
	if err := db.SetOutputCheck(ctx, sw, "s1", OutputCheck{Result: OutputCheckOK, Attempt: att}); !errors.Is(err, ErrNoOutputs) ||
		!errors.Is(err, ErrStaleAttempt) {
		t.Errorf("late check after the release: %v, want ErrNoOutputs and ErrStaleAttempt", err)
	}
	if err := db.SetOutputCheck(ctx, sw, "s1", OutputCheck{Result: OutputCheckOK}); !errors.Is(err, ErrNoOutputs) ||
		errors.Is(err, ErrStaleAttempt) {
		t.Errorf("check without an attempt after the release: %v, want ErrNoOutputs", err)
	}
	// Nor does a check of the old attempt land on the next attempt's outputs.
	att2 := run("s1", "h4")
	if err := db.SetOutputCheck(ctx, sw, "s1", OutputCheck{Result: OutputCheckMismatch, Attempt: att}); !errors.Is(err, ErrStaleAttempt) {
		t.Errorf("check of attempt %d on attempt %d: %v, want ErrStaleAttempt", att, att2, err)
	}
	// running -> pending: RecoverInterrupted.
	if n, err := db.RecoverInterrupted(ctx, sw, ""); err != nil || n != 1 {
		t.Fatalf("recover: %d %v", n, err)
	}
	noOutputs(t, db, sw, "s1", "recover")

	// failed -> pending: RequeuePoints, also for a point failed by the check itself.
	att = run("s2", "h4")
	finish("s2", att, PointFinish{State: PointFailed, FailureClass: FailOutputMismatch})
	if o := outputsOf(t, db, sw, "s2"); o.Outputs == nil || o.Check == "" {
		t.Errorf("failed s2 lost its outputs: %+v", o)
	}
	if n, err := db.RequeuePoints(ctx, sw, "retry", PointFailed); err != nil || n != 1 {
		t.Fatalf("requeue failed: %d %v", n, err)
	}
	noOutputs(t, db, sw, "s2", "requeue failed")

	// cancelled -> pending: RequeuePoints.
	att = run("s2", "h4")
	finish("s2", att, PointFinish{State: PointCancelled})
	if n, err := db.RequeuePoints(ctx, sw, "retry", PointCancelled); err != nil || n != 1 {
		t.Fatalf("requeue cancelled: %d %v", n, err)
	}
	noOutputs(t, db, sw, "s2", "requeue cancelled")

	// A done point keeps them; running and cancelled points of a resumed sweep lose them; a
	// running point of a dead daemon (RequeueRunning) too.
	att = run("b4", "h4")
	finish("b4", att, PointFinish{State: PointDone})
	run("s2", "h4")
	att = run("b8", "h8")
	finish("b8", att, PointFinish{State: PointCancelled})
	if err := db.SetSweepState(ctx, sw, SweepRunning, ""); err != nil {
		t.Fatal(err)
	}
	if err := db.SetSweepState(ctx, sw, SweepInterrupted, "killed"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ResumeSweep(ctx, sw, "resumed"); err != nil {
		t.Fatal(err)
	}
	noOutputs(t, db, sw, "s2", "resume (running)")
	noOutputs(t, db, sw, "b8", "resume (cancelled)")
	if o := outputsOf(t, db, sw, "b4"); o.State != PointDone || o.Outputs == nil || o.Check != OutputCheckReference {
		t.Errorf("done b4 after the resume: %+v", o)
	}
	run("s1t8", "h8")
	if err := db.SetSweepState(ctx, sw, SweepRunning, ""); err != nil {
		t.Fatal(err)
	}
	if ids, _, err := db.RequeueRunning(ctx, "daemon restarted", 0); err != nil || len(ids) != 1 {
		t.Fatalf("requeue running: %v %v", ids, err)
	}
	noOutputs(t, db, sw, "s1t8", "requeue running")

	// running -> waiting: a searched point.
	ss := searchSweep(t, db, "searched")
	if err := db.ApplySearch(ctx, ss, []SearchDecision{{PointID: "s1", Reason: "go"}}, nil); err != nil {
		t.Fatal(err)
	}
	att, err := db.ClaimPoint(ctx, ss, "s1", "h4")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetPointOutputs(ctx, ss, "s1", att, outputsJSON("a")); err != nil {
		t.Fatal(err)
	}
	if err := db.SetOutputCheck(ctx, ss, "s1", OutputCheck{Result: OutputCheckOK}); err != nil {
		t.Fatal(err)
	}
	if err := db.ReleasePoint(ctx, ss, "s1", att, "host lost"); err != nil {
		t.Fatal(err)
	}
	if o := outputsOf(t, db, ss, "s1"); o.State != PointWaiting {
		t.Errorf("searched s1 released: %+v", o)
	}
	noOutputs(t, db, ss, "s1", "release of a searched point")
}

func TestOutputChecksReader(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "reader")
	if outs, err := db.OutputChecks(ctx, sw+100); err != nil || len(outs) != 0 {
		t.Errorf("unknown sweep: %+v %v", outs, err)
	}
	att, err := db.ClaimPoint(ctx, sw, "b4", "h4")
	if err != nil {
		t.Fatal(err)
	}
	b4 := outputsJSON("a", "b")
	if err := db.SetPointOutputs(ctx, sw, "b4", att, b4); err != nil {
		t.Fatal(err)
	}
	if err := db.SetOutputCheck(ctx, sw, "b4", OutputCheck{Result: OutputCheckReference, Agreement: fp(0.5),
		Evidence: json.RawMessage(`{"prompt":1,"position":3}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ClaimPoint(ctx, sw, "s1t8", "h8"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	// The reader works on a read-only store (a report or a later comparison), which refuses the writers.
	ro, err := OpenReadOnly(ctx, db.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	outs, err := ro.OutputChecks(ctx, sw)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range outs {
		a := "nil"
		if o.Agreement != nil {
			a = fmt.Sprint(*o.Agreement)
		}
		got = append(got, fmt.Sprintf("%s tp%d %v %s %d %s %q %s %s", o.PointID, o.TP, o.Baseline, o.State,
			o.Attempt, o.Outputs, o.Check, a, o.Evidence))
	}
	want := []string{
		`b4 tp4 true running 1 ` + string(b4) + ` "reference" 0.5 {"prompt":1,"position":3}`,
		`s1 tp4 false pending 0  "" nil `,
		`s2 tp4 false pending 0  "" nil `,
		`b8 tp8 true pending 0  "" nil `,
		`s1t8 tp8 false running 1  "" nil `,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("OutputChecks:\n got %q\nwant %q", got, want)
	}
	if err := ro.SetPointOutputs(ctx, sw, "s1t8", 1, b4); !errors.Is(err, ErrReadOnly) {
		t.Errorf("SetPointOutputs read-only: %v", err)
	}
	if err := ro.SetOutputCheck(ctx, sw, "b4", OutputCheck{Result: OutputCheckReference}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("SetOutputCheck read-only: %v", err)
	}

	// point_summary's new columns.
	sums, err := ro.PointSummaries(ctx, sw)
	if err != nil || len(sums) != 5 {
		t.Fatalf("point summaries: %+v %v", sums, err)
	}
	if p := sums[0]; p.OutputCheck != OutputCheckReference || p.OutputAgreement == nil || *p.OutputAgreement != 0.5 {
		t.Errorf("b4's summary: %q %v", p.OutputCheck, p.OutputAgreement)
	}
	if p := sums[4]; p.OutputCheck != "" || p.OutputAgreement != nil {
		t.Errorf("s1t8's summary: %q %v", p.OutputCheck, p.OutputAgreement)
	}
	rows, err := ro.Query(ctx, "SELECT point_id, output_check, output_agreement FROM point_summary WHERE sweep_id = ?", sw)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(rows.Values); got != "[[b4 reference 0.5] [s1 <nil> <nil>] [s2 <nil> <nil>] [b8 <nil> <nil>] [s1t8 <nil> <nil>]]" {
		t.Errorf("point_summary: %s", got)
	}
}

// TestOutputColumnsChecked: the table refuses what the API refuses, for writers of their own SQL.
func TestOutputColumnsChecked(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "sql")
	for _, set := range []string{
		`outputs = '{"prompts":'`,
		`output_check = 'same'`,
		`output_check = ''`,
		`output_agreement = 1.5`,
		`output_agreement = -0.5`,
		`output_agreement = 'high'`,
		`output_evidence = 'not json'`,
	} {
		if _, err := db.rw.ExecContext(ctx, "UPDATE points SET "+set+" WHERE sweep_id = ?", sw); err == nil ||
			!strings.Contains(err.Error(), "CHECK") {
			t.Errorf("SET %s: %v, want a CHECK failure", set, err)
		}
	}
	for _, set := range []string{
		`outputs = '{"prompts":1,"runs":[["a"],["a"]]}'`, `outputs = NULL`,
		`output_check = 'ok'`, `output_check = 'mismatch'`, `output_check = 'reference'`, `output_check = NULL`,
		`output_agreement = 0`, `output_agreement = 1`, `output_agreement = 0.5`, `output_agreement = NULL`,
		`output_evidence = '{"prompt":0}'`, `output_evidence = NULL`,
	} {
		if _, err := db.rw.ExecContext(ctx, "UPDATE points SET "+set+" WHERE sweep_id = ?", sw); err != nil {
			t.Errorf("SET %s: %v", set, err)
		}
	}
}

// TestOutputMigrationConcurrentOpens: several processes open a version-5 file with points at once;
// one adds the columns, the others see it done, and every point keeps its values with no outputs.
func TestOutputMigrationConcurrentOpens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v5.db")
	raw, err := sql.Open("sqlite3", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	p, err := newProvider(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := seeds[5](ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	const v5Columns = v4PointColumns + ", reason, searched"
	before := dump(t, raw, "SELECT "+v5Columns+" FROM points ORDER BY id")
	raw.Close()

	dbs := make([]*DB, 4)
	errs := make([]error, len(dbs))
	var wg sync.WaitGroup
	for i := range dbs {
		wg.Go(func() { dbs[i], errs[i] = Open(ctx, path) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer dbs[i].Close()
	}
	db := dbs[0]
	if got := dump(t, db.rw, "SELECT "+v5Columns+" FROM points ORDER BY id"); !reflect.DeepEqual(got, before) {
		t.Errorf("points after the upgrade:\n got %v\nwant %v", got, before)
	}
	if got := dump(t, db.rw, `SELECT count(*) FROM points WHERE outputs IS NOT NULL OR output_check IS NOT NULL
		OR output_agreement IS NOT NULL OR output_evidence IS NOT NULL`); got[0][0] != int64(0) {
		t.Errorf("%v points have outputs after the upgrade", got[0][0])
	}
	if got := dump(t, db.rw, "SELECT count(*) FROM goose_db_version WHERE version_id = 6"); got[0][0] != int64(1) {
		t.Errorf("version 6 recorded %v times", got[0][0])
	}
	checkSeeded(t, db, 5)
}
