package store

import (
	"context"
	"errors"
	"testing"
)

func TestCancelAndResumeSweep(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	id := sampleSweep(t, db, "cr")
	att, err := db.ClaimPoint(ctx, id, "b4", "h4")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.RecordRun(ctx, okRun(id, "b4", att, 1, 1, 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ResumeSweep(ctx, id, "x"); !errors.Is(err, ErrNotResumable) {
		t.Errorf("resume of a queued sweep: %v, want ErrNotResumable", err)
	}
	if err := db.CancelSweep(ctx, id, "by user"); err != nil {
		t.Fatal(err)
	}
	s, _ := db.Sweep(ctx, id)
	// The running point is left to its runner; the pending ones are cancelled at once.
	if s.State != SweepCancelled || s.Cancelled != 4 || s.Running != 1 {
		t.Fatalf("after cancel: %+v", s)
	}
	s, err = db.ResumeSweep(ctx, id, "resumed")
	if err != nil {
		t.Fatal(err)
	}
	if s.State != SweepQueued || s.Pending != 5 || s.Running != 0 || s.Cancelled != 0 {
		t.Fatalf("after resume: %+v", s)
	}
	rows, err := db.QueryRuns(ctx, RunsQuery{Sweep: "cr", Where: "status = 'superseded'"})
	if err != nil || len(rows.Values) != 1 {
		t.Errorf("the interrupted attempt's run should be superseded: %v %v", rows, err)
	}
	if err := db.CancelSweep(ctx, 999, "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("cancel of a missing sweep: %v", err)
	}
}

func TestScheduleInstancesAndRequeueRunning(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	tmpl, err := db.CreateSweep(ctx, NewSweep{Name: "nightly", SpecHash: "h", SpecText: "x", Schedule: "@every 1h",
		State: SweepScheduled}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.LatestInstance(ctx, tmpl); !errors.Is(err, ErrNotFound) {
		t.Errorf("no instance yet: %v", err)
	}
	id := sampleSweep(t, db, "nightly@1")
	inst, err := db.CreateSweep(ctx, NewSweep{Name: "nightly@2", SpecHash: "h", SpecText: "x", ScheduleID: tmpl}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := db.LatestInstance(ctx, tmpl); err != nil || got.ID != inst || got.ScheduleID != tmpl {
		t.Errorf("latest instance: %+v %v, want %d", got, err, inst)
	}
	// A daemon died with a sweep running and a point claimed.
	if _, err := db.ClaimNextSweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ClaimPoint(ctx, id, "s1", "h4"); err != nil {
		t.Fatal(err)
	}
	ids, err := db.RequeueRunning(ctx, "daemon restarted")
	if err != nil || len(ids) != 1 || ids[0] != id {
		t.Fatalf("requeued %v %v, want [%d]", ids, err, id)
	}
	s, _ := db.Sweep(ctx, id)
	if s.State != SweepQueued || s.Running != 0 || s.Pending != 5 {
		t.Errorf("after requeue: %+v", s)
	}
	// A cancelled template resumes as scheduled, not queued.
	if err := db.CancelSweep(ctx, tmpl, "stop"); err != nil {
		t.Fatal(err)
	}
	if s, err := db.ResumeSweep(ctx, tmpl, "again"); err != nil || s.State != SweepScheduled {
		t.Errorf("resumed template: %+v %v", s, err)
	}
}
