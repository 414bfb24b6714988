package store

import (
	"context"
	"errors"
	"strings"
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
	ids, held, err := db.RequeueRunning(ctx, "daemon restarted", 3)
	if err != nil || len(ids) != 1 || ids[0] != id || len(held) != 0 {
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

// TestRequeueRunningHoldsASweepItsDaemonsDiedRunning: a spec that kills the daemon would be requeued
// at every start and kill it again; after holdAfter deaths during one sweep it is held (interrupted,
// with an event saying why), and a resume releases it with the count started afresh.
func TestRequeueRunningHoldsASweepItsDaemonsDiedRunning(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	id := sampleSweep(t, db, "killer")
	die := func() (requeued, held []int64) {
		t.Helper()
		if _, err := db.ClaimNextSweep(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ClaimPoint(ctx, id, "b4", "h4"); err != nil {
			t.Fatal(err)
		}
		r, h, err := db.RequeueRunning(ctx, "daemon restarted", 3)
		if err != nil {
			t.Fatal(err)
		}
		return r, h
	}
	for death := 1; death <= 2; death++ {
		r, h := die()
		if len(r) != 1 || r[0] != id || len(h) != 0 {
			t.Fatalf("death %d: requeued %v, held %v; want the sweep requeued", death, r, h)
		}
		if s, _ := db.Sweep(ctx, id); s.State != SweepQueued || s.DaemonDeaths != death {
			t.Fatalf("death %d: %+v", death, s)
		}
	}
	r, h := die()
	if len(r) != 0 || len(h) != 1 || h[0] != id {
		t.Fatalf("third death: requeued %v, held %v; want the sweep held", r, h)
	}
	s, _ := db.Sweep(ctx, id)
	if s.State != SweepInterrupted || s.DaemonDeaths != 3 || s.Running != 0 || s.Pending != 5 {
		t.Fatalf("held: %+v", s)
	}
	if _, err := db.ClaimNextSweep(ctx); !errors.Is(err, ErrNotFound) {
		t.Errorf("a held sweep was claimed: %v", err)
	}
	evs, err := db.Events(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if last.Kind != "sweep_state" || !strings.Contains(last.Detail, "died 3 times") || !strings.Contains(last.Detail, "resume") {
		t.Errorf("the hold's event: %+v", last)
	}
	// Another start finds nothing running: the held sweep stays held.
	if r, h, err := db.RequeueRunning(ctx, "daemon restarted", 3); err != nil || len(r)+len(h) != 0 {
		t.Errorf("a later start: requeued %v, held %v, %v", r, h, err)
	}
	if s, err := db.ResumeSweep(ctx, id, "operator"); err != nil || s.State != SweepQueued || s.DaemonDeaths != 0 {
		t.Fatalf("resume of a held sweep: %+v %v", s, err)
	}
	if r, h := die(); len(r) != 1 || len(h) != 0 {
		t.Errorf("after resume the count starts afresh: requeued %v, held %v", r, h)
	}
	// holdAfter 0: never held.
	for i := 0; i < 4; i++ {
		if _, err := db.ClaimNextSweep(ctx); err != nil {
			t.Fatal(err)
		}
		if r, h, err := db.RequeueRunning(ctx, "daemon restarted", 0); err != nil || len(r) != 1 || len(h) != 0 {
			t.Fatalf("holdAfter 0: requeued %v, held %v, %v", r, h, err)
		}
	}
}
