package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// searchSweep creates a sweep whose baseline b4 is planned as usual and whose eagle3 points s1 to
// s4 are searched; one host h4 of 4 GPUs; each point plans runs at concurrency 1 and 16.
func searchSweep(t *testing.T, db *DB, name string) int64 {
	t.Helper()
	pts := []NewPoint{{ID: "b4", Method: "baseline", Baseline: true, TP: 4, Runs: 2}}
	for steps := 1; steps <= 4; steps++ {
		pts = append(pts, NewPoint{ID: fmt.Sprintf("s%d", steps), Method: "eagle3", TP: 4, Runs: 2, Searched: true,
			NumSteps: ip(steps), TopK: ip(1), NumDraftTokens: ip(steps + 1)})
	}
	id, err := db.CreateSweep(context.Background(), NewSweep{Name: name, SpecHash: "h", SpecText: "x"},
		[]NewHost{{Name: "h4", GPUs: 4}}, pts)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// states renders the sweep's points as "id:state" in plan order.
func states(t *testing.T, db *DB, sweepID int64) string {
	t.Helper()
	pts, err := db.Points(context.Background(), sweepID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pts {
		out = append(out, p.ID+":"+string(p.State))
	}
	return strings.Join(out, " ")
}

// eventLines renders a point's events as "kind: detail".
func eventLines(t *testing.T, db *DB, sweepID int64, point string) []string {
	t.Helper()
	evs, err := db.Events(context.Background(), sweepID, point)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind+": "+e.Detail)
	}
	return out
}

func TestSearchedPointsWait(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := searchSweep(t, db, "wait")
	if got := states(t, db, sw); got != "b4:pending s1:waiting s2:waiting s3:waiting s4:waiting" {
		t.Errorf("states after create: %s", got)
	}
	p, err := db.Point(ctx, sw, "s1")
	if err != nil || !p.Searched || p.Reason != "" || p.State != PointWaiting {
		t.Errorf("s1: %+v %v", p, err)
	}
	if p, _ := db.Point(ctx, sw, "b4"); p.Searched {
		t.Error("b4 searched")
	}
	s, _ := db.Sweep(ctx, sw)
	if want := (PointCounts{Pending: 1, Waiting: 4}); s.PointCounts != want || s.Points != 5 || s.Total() != 5 {
		t.Errorf("counts %+v (total %d), want %+v", s.PointCounts, s.Points, want)
	}
	evs, _ := db.Events(ctx, sw, "")
	if len(evs) != 1 || evs[0].Detail != "created queued (5 points, 4 of them searched, 1 hosts)" {
		t.Errorf("create event: %+v", evs)
	}
	// Workers claim only released points.
	if got, err := db.ClaimNextPoint(ctx, sw, "h4"); err != nil || got.ID != "b4" {
		t.Fatalf("claim next: %+v %v", got, err)
	}
	if _, err := db.ClaimNextPoint(ctx, sw, "h4"); !errors.Is(err, ErrNotFound) {
		t.Errorf("claim next with only waiting points left: %v, want ErrNotFound", err)
	}
	if _, err := db.ClaimPoint(ctx, sw, "s1", "h4"); !errors.Is(err, ErrTransition) {
		t.Errorf("claim a waiting point: %v, want ErrTransition", err)
	}
	// The schema keeps waiting and pruned to searched points.
	for _, st := range []PointState{PointWaiting, PointPruned} {
		if _, err := db.rw.ExecContext(ctx, "UPDATE points SET state = ? WHERE sweep_id = ? AND point_id = 'b4'", st, sw); err == nil {
			t.Errorf("a point that is not searched made %s", st)
		}
	}
}

func TestApplySearch(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := searchSweep(t, db, "apply")
	other := searchSweep(t, db, "other")

	if err := db.ApplySearch(ctx, sw, []SearchDecision{{PointID: "s1", Reason: "first step"}, {PointID: "s2"}},
		[]SearchDecision{{PointID: "s4", Reason: "after steps 2: +0.3% at c=1, below min_gain 2%"}}); err != nil {
		t.Fatal(err)
	}
	if got := states(t, db, sw); got != "b4:pending s1:pending s2:pending s3:waiting s4:pruned" {
		t.Errorf("states: %s", got)
	}
	s1, _ := db.Point(ctx, sw, "s1")
	s2, _ := db.Point(ctx, sw, "s2")
	s4, _ := db.Point(ctx, sw, "s4")
	if s1.Reason != "first step" || s2.Reason != "" || s4.Reason != "after steps 2: +0.3% at c=1, below min_gain 2%" ||
		s4.FinishedAt.IsZero() || !s1.FinishedAt.IsZero() {
		t.Errorf("after apply: s1 %+v, s2 %+v, s4 %+v", s1, s2, s4)
	}
	if got := eventLines(t, db, sw, "s1"); !reflect.DeepEqual(got, []string{"released: first step"}) {
		t.Errorf("events of s1: %q", got)
	}
	if got := eventLines(t, db, sw, "s2"); !reflect.DeepEqual(got, []string{"released: "}) {
		t.Errorf("events of s2: %q", got)
	}
	if got := eventLines(t, db, sw, "s4"); !reflect.DeepEqual(got, []string{"pruned: after steps 2: +0.3% at c=1, below min_gain 2%"}) {
		t.Errorf("events of s4: %q", got)
	}
	s, _ := db.Sweep(ctx, sw)
	if want := (PointCounts{Pending: 3, Waiting: 1, Pruned: 1}); s.PointCounts != want || s.Points != 5 {
		t.Errorf("counts %+v (total %d), want %+v", s.PointCounts, s.Points, want)
	}
	// The released point runs as any other; its reason stays.
	att, err := db.ClaimPoint(ctx, sw, "s1", "h4")
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := db.Point(ctx, sw, "s1"); p.Reason != "first step" || p.State != PointRunning {
		t.Errorf("claimed s1: %+v", p)
	}

	// One bad decision: nothing is applied, no event written.
	allEvents := func() int {
		evs, err := db.Events(ctx, sw, "")
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	n := allEvents()
	for _, c := range []struct {
		name           string
		release, prune []SearchDecision
		want           error
	}{
		{"unknown point", []SearchDecision{{PointID: "s3"}}, []SearchDecision{{PointID: "nope"}}, ErrNotFound},
		{"unknown point after a good one", nil, []SearchDecision{{PointID: "s3"}, {PointID: "b4x"}}, ErrNotFound},
		{"pending point", []SearchDecision{{PointID: "s3"}, {PointID: "s2"}}, nil, ErrTransition},
		{"running point", []SearchDecision{{PointID: "s3"}}, []SearchDecision{{PointID: "s1"}}, ErrTransition},
		{"pruned point", []SearchDecision{{PointID: "s3"}, {PointID: "s4"}}, nil, ErrTransition},
		{"not searched", []SearchDecision{{PointID: "s3"}, {PointID: "b4"}}, nil, ErrTransition},
		{"released and pruned", []SearchDecision{{PointID: "s3"}}, []SearchDecision{{PointID: "s3"}}, ErrTransition},
		{"released twice", []SearchDecision{{PointID: "s3"}, {PointID: "s3"}}, nil, ErrTransition},
	} {
		err := db.ApplySearch(ctx, sw, c.release, c.prune)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if got := states(t, db, sw); got != "b4:pending s1:running s2:pending s3:waiting s4:pruned" {
			t.Errorf("%s: states %s", c.name, got)
		}
		if got := allEvents(); got != n {
			t.Errorf("%s: %d events, want %d", c.name, got, n)
		}
	}
	if err := db.ApplySearch(ctx, sw, nil, nil); err != nil {
		t.Errorf("no decisions: %v", err)
	}
	// The other sweep's points of the same ids are untouched.
	if got := states(t, db, other); got != "b4:pending s1:waiting s2:waiting s3:waiting s4:waiting" {
		t.Errorf("other sweep: %s", got)
	}

	// pruned is final: no requeue, claim or cancel moves it.
	if _, err := db.ClaimPoint(ctx, sw, "s4", "h4"); !errors.Is(err, ErrTransition) {
		t.Errorf("claim a pruned point: %v", err)
	}
	if _, err := db.RequeuePoints(ctx, sw, "", PointPruned); !errors.Is(err, ErrTransition) {
		t.Errorf("requeue pruned points: %v", err)
	}
	// Cancelling cancels the waiting and the pending points; the running one is its worker's.
	if n, err := db.CancelPoints(ctx, sw, "user cancel"); err != nil || n != 3 {
		t.Errorf("cancel: %d %v", n, err)
	}
	if got := states(t, db, sw); got != "b4:cancelled s1:running s2:cancelled s3:cancelled s4:pruned" {
		t.Errorf("after cancel: %s", got)
	}
	if got := eventLines(t, db, sw, "s3"); !reflect.DeepEqual(got, []string{"state: waiting -> cancelled (user cancel)"}) {
		t.Errorf("events of s3: %q", got)
	}
	if err := db.FinishPoint(ctx, sw, "s1", att, PointFinish{State: PointCancelled}); err != nil {
		t.Fatal(err)
	}
	// Requeued, the searched points wait for the search again (their reasons cleared); b4 is pending.
	if n, err := db.RequeuePoints(ctx, sw, "resume", PointCancelled); err != nil || n != 4 {
		t.Errorf("requeue: %d %v", n, err)
	}
	if got := states(t, db, sw); got != "b4:pending s1:waiting s2:waiting s3:waiting s4:pruned" {
		t.Errorf("after requeue: %s", got)
	}
	if p, _ := db.Point(ctx, sw, "s1"); p.Reason != "" {
		t.Errorf("requeued s1 kept its reason %q", p.Reason)
	}
	if p, _ := db.Point(ctx, sw, "s4"); p.Reason == "" {
		t.Error("pruned s4 lost its reason")
	}
	s, _ = db.Sweep(ctx, sw)
	if want := (PointCounts{Pending: 1, Waiting: 3, Pruned: 1}); s.PointCounts != want || s.Points != 5 {
		t.Errorf("counts %+v (total %d), want %+v", s.PointCounts, s.Points, want)
	}
}

// TestSearchedPointGoesBackToWaiting: every way a point goes back to pending puts a searched
// point back to waiting, with its runs superseded.
func TestSearchedPointGoesBackToWaiting(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := searchSweep(t, db, "back")
	run := func(point string) int {
		t.Helper()
		if err := db.ApplySearch(ctx, sw, []SearchDecision{{PointID: point, Reason: "go"}}, nil); err != nil {
			t.Fatal(err)
		}
		att, err := db.ClaimPoint(ctx, sw, point, "h4")
		if err != nil {
			t.Fatal(err)
		}
		if err := db.RecordRun(ctx, okRun(sw, point, att, 1, 1, 100)); err != nil {
			t.Fatal(err)
		}
		return att
	}
	waiting := func(what, point string, superseded int) {
		t.Helper()
		p, err := db.Point(ctx, sw, point)
		if err != nil || p.State != PointWaiting || p.Reason != "" {
			t.Errorf("%s: %s is %s (reason %q, %v), want waiting", what, point, p.State, p.Reason, err)
		}
		var st []string
		for range superseded {
			st = append(st, "superseded")
		}
		runStatuses(t, db, sw, point, st...)
	}

	att := run("s1")
	if err := db.ReleasePoint(ctx, sw, "s1", att, "host rebooted"); err != nil {
		t.Fatal(err)
	}
	waiting("release", "s1", 1)
	if p, _ := db.Point(ctx, sw, "s1"); p.FailureClass != FailInterrupted || p.FailureDetail != "host rebooted" {
		t.Errorf("released s1: %+v", p)
	}

	run("s1")
	if n, err := db.RecoverInterrupted(ctx, sw, ""); err != nil || n != 1 {
		t.Fatalf("recover: %d %v", n, err)
	}
	waiting("recover", "s1", 2)

	att = run("s1")
	if err := db.FinishPoint(ctx, sw, "s1", att, PointFinish{State: PointFailed, FailureClass: FailOOM}); err != nil {
		t.Fatal(err)
	}
	if n, err := db.RequeuePoints(ctx, sw, "retry", PointFailed); err != nil || n != 1 {
		t.Fatalf("requeue: %d %v", n, err)
	}
	waiting("requeue failed", "s1", 3)

	// A daemon died running the sweep.
	if _, err := db.ClaimNextSweep(ctx); err != nil {
		t.Fatal(err)
	}
	run("s1")
	if ids, _, err := db.RequeueRunning(ctx, "daemon restarted", 0); err != nil || len(ids) != 1 {
		t.Fatalf("requeue running: %v %v", ids, err)
	}
	waiting("requeue running", "s1", 4)

	// Cancelled and resumed: running and cancelled searched points wait, the baseline is pending.
	run("s1")
	if err := db.CancelSweep(ctx, sw, "stop"); err != nil {
		t.Fatal(err)
	}
	if got := states(t, db, sw); got != "b4:cancelled s1:running s2:cancelled s3:cancelled s4:cancelled" {
		t.Errorf("after cancel sweep: %s", got)
	}
	if s, err := db.ResumeSweep(ctx, sw, "resumed"); err != nil || s.Pending != 1 || s.Waiting != 4 {
		t.Fatalf("resume: %+v %v", s.PointCounts, err)
	}
	waiting("resume", "s1", 5)
	waiting("resume", "s2", 0)
	if p, _ := db.Point(ctx, sw, "b4"); p.State != PointPending {
		t.Errorf("resumed b4: %s", p.State)
	}

	want := []string{
		"released: go", "state: pending -> running (attempt 1)",
		"state: running -> waiting (interrupted: host rebooted)",
		"released: go", "state: pending -> running (attempt 2)",
		"state: running -> waiting (interrupted: recovered after the process running it ended)",
		"released: go", "state: pending -> running (attempt 3)", "state: running -> failed (oom)",
		"state: failed -> waiting (retry)",
		"released: go", "state: pending -> running (attempt 4)",
		"state: running -> waiting (interrupted: daemon restarted)",
		"released: go", "state: pending -> running (attempt 5)",
		"state: running -> waiting (interrupted: resumed)",
	}
	if got := eventLines(t, db, sw, "s1"); !reflect.DeepEqual(got, want) {
		t.Errorf("events of s1:\n got %q\nwant %q", got, want)
	}
}

func TestSearchInputs(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := searchSweep(t, db, "inputs")
	searchSweep(t, db, "other") // same point ids, no runs

	att, _ := db.ClaimPoint(ctx, sw, "b4", "h4")
	for _, c := range []int{16, 1} {
		if err := db.RecordRun(ctx, okRun(sw, "b4", att, c, 1, float64(100*c))); err != nil {
			t.Fatal(err)
		}
	}
	// s1: attempt 1 interrupted (its run superseded), attempt 2 with an ok and a failed run.
	if err := db.ApplySearch(ctx, sw, []SearchDecision{{PointID: "s1", Reason: "start"}}, nil); err != nil {
		t.Fatal(err)
	}
	att, _ = db.ClaimPoint(ctx, sw, "s1", "h4")
	if err := db.RecordRun(ctx, okRun(sw, "s1", att, 1, 1, 90)); err != nil {
		t.Fatal(err)
	}
	if err := db.ReleasePoint(ctx, sw, "s1", att, "x"); err != nil {
		t.Fatal(err)
	}
	if err := db.ApplySearch(ctx, sw, []SearchDecision{{PointID: "s1", Reason: "again"}},
		[]SearchDecision{{PointID: "s3", Reason: "too far"}}); err != nil {
		t.Fatal(err)
	}
	att, _ = db.ClaimPoint(ctx, sw, "s1", "h4")
	if err := db.RecordRun(ctx, okRun(sw, "s1", att, 1, 1, 150)); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordRun(ctx, Run{SweepID: sw, PointID: "s1", Attempt: att, Concurrency: 16, Repeat: 1, Status: RunFailed,
		Error: "boom"}); err != nil {
		t.Fatal(err)
	}

	got, err := db.SearchInputs(ctx, sw)
	if err != nil {
		t.Fatal(err)
	}
	render := func(pts []SearchPoint) string {
		var b strings.Builder
		for _, p := range pts {
			fmt.Fprintf(&b, "%s %s searched=%v reason=%q:", p.PointID, p.State, p.Searched, p.Reason)
			for _, r := range p.Runs {
				f := func(x *float64) string {
					if x == nil {
						return "nil"
					}
					return fmt.Sprint(*x)
				}
				fmt.Fprintf(&b, " c%d/r%d %s %s %s", r.Concurrency, r.Repeat, r.Status, f(r.OutputTokS), f(r.AcceptLength))
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	want := `b4 running searched=false reason="": c1/r1 ok 100 nil c16/r1 ok 1600 nil
s1 running searched=true reason="again": c1/r1 ok 150 2.5 c16/r1 failed nil nil
s2 waiting searched=true reason="":
s3 pruned searched=true reason="too far":
s4 waiting searched=true reason="":
`
	if r := render(got); r != want {
		t.Errorf("search inputs:\n%s\nwant:\n%s", r, want)
	}
	if got, err := db.SearchInputs(ctx, 999); err != nil || len(got) != 0 {
		t.Errorf("inputs of a missing sweep: %v %v", got, err)
	}
	// A read-only store reads them too.
	ro, err := OpenReadOnly(ctx, db.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got, err := ro.SearchInputs(ctx, sw); err != nil || render(got) != want {
		t.Errorf("read-only: %v %v", got, err)
	}
	if err := ro.ApplySearch(ctx, sw, []SearchDecision{{PointID: "s2"}}, nil); !errors.Is(err, ErrReadOnly) {
		t.Errorf("apply through read-only: %v", err)
	}
}

func TestSearchSummaries(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := searchSweep(t, db, "sums")
	if err := db.ApplySearch(ctx, sw, []SearchDecision{{PointID: "s1", Reason: "start here"}},
		[]SearchDecision{{PointID: "s4", Reason: "below min_gain 2%"}}); err != nil {
		t.Fatal(err)
	}
	pts, err := db.PointSummaries(ctx, sw)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pts {
		got = append(got, fmt.Sprintf("%s:%s:%s", p.PointID, p.State, p.Reason))
	}
	if w := "b4:pending: s1:pending:start here s2:waiting: s3:waiting: s4:pruned:below min_gain 2%"; strings.Join(got, " ") != w {
		t.Errorf("point summaries: %q, want %s", got, w)
	}
	rows, err := db.Query(ctx, "SELECT point_id, state, reason FROM point_summary WHERE sweep_id = ? AND reason IS NOT NULL", sw)
	if err != nil || fmt.Sprint(rows.Values) != "[[s1 pending start here] [s4 pruned below min_gain 2%]]" {
		t.Errorf("point_summary.reason: %v %v", rows, err)
	}
	rows, err = db.Query(ctx, "SELECT point_id, kind, detail FROM event_log WHERE sweep_id = ? AND kind IN ('released', 'pruned')", sw)
	if err != nil || fmt.Sprint(rows.Values) != "[[s1 released start here] [s4 pruned below min_gain 2%]]" {
		t.Errorf("event_log: %v %v", rows, err)
	}
	c, err := db.StateCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, w := fmt.Sprint(c.Points), "[{pending  2} {pruned  1} {waiting  2}]"; got != w {
		t.Errorf("state counts: %s, want %s", got, w)
	}
}
