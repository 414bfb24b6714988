package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestFileMode(t *testing.T) {
	old := syscall.Umask(0) // the mode must not depend on a permissive umask
	defer syscall.Umask(old)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "new.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sampleSweep(t, db, "mode") // a write creates -wal and -shm
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if m := st.Mode().Perm(); m != 0o600 {
			t.Errorf("%s: mode %o, want 600", p, m)
		}
	}
}

func TestOpenSettings(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	for pragma, want := range map[string]int64{"foreign_keys": 1, "synchronous": 1, "busy_timeout": 5000} {
		var got int64
		if err := db.rw.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil || got != want {
			t.Errorf("%s = %d (%v), want %d", pragma, got, err, want)
		}
	}
	// Foreign keys are enforced.
	if _, err := db.rw.ExecContext(ctx, "INSERT INTO runs (point_ref, attempt, concurrency, repeat, status, started_at, finished_at) VALUES (999, 1, 1, 1, 'ok', 0, 0)"); err == nil {
		t.Error("run of a missing point accepted")
	}
}

func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "missing.db")
	_, err := OpenReadOnly(ctx, missing)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Error("OpenReadOnly created the file")
	}

	path := filepath.Join(t.TempDir(), "ro.db")
	rw, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	sw := sampleSweep(t, rw, "ro")
	// Read-only alongside a writer, and after the writer closed.
	for _, closeWriter := range []bool{false, true} {
		if closeWriter {
			rw.Close()
		}
		ro, err := OpenReadOnly(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if s, err := ro.FindSweep(ctx, "ro"); err != nil || s.Points != 5 {
			t.Errorf("read: %+v %v", s, err)
		}
		if _, err := ro.QueryRuns(ctx, RunsQuery{Where: "concurrency = 16"}); err != nil {
			t.Error(err)
		}
		if _, err := ro.ClaimPoint(ctx, sw, "b4", "h4"); !errors.Is(err, ErrReadOnly) {
			t.Errorf("write through read-only: %v", err)
		}
		if _, err := ro.CreateSweep(ctx, NewSweep{Name: "x"}, nil, nil); !errors.Is(err, ErrReadOnly) {
			t.Errorf("create through read-only: %v", err)
		}
		if _, err := ro.rw.ExecContext(ctx, "DELETE FROM events"); err == nil {
			t.Error("raw delete through read-only connection succeeded")
		}
		ro.Close()
	}
}

func TestOpenReadOnlyNeedsMigratedSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReadOnly(ctx, path); err == nil || !strings.Contains(err.Error(), "schema version is 0") {
		t.Errorf("unmigrated: %v", err)
	}
}

func TestConcurrentOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			db, err := Open(ctx, path)
			if err == nil {
				_, err = db.ListSweeps(ctx)
				db.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestSweeps(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	a1 := sampleSweep(t, db, "alpha")
	b := sampleSweep(t, db, "beta")
	a2 := sampleSweep(t, db, "alpha")
	num, err := db.CreateSweep(ctx, NewSweep{Name: "42", State: SweepScheduled, Schedule: "0 22 * * *"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]int64{"alpha": a2, "beta": b, " 1 ": a1, "4": num} {
		s, err := db.FindSweep(ctx, ref)
		if err != nil || s.ID != want {
			t.Errorf("FindSweep(%q) = %d, %v; want %d", ref, s.ID, err, want)
		}
	}
	// A name never means a schedule's template (its id does): "42" names only the template.
	if s, err := db.FindSweep(ctx, "42"); !errors.Is(err, ErrNotFound) {
		t.Errorf("FindSweep(42) = %d, %v; want not found (a template is addressed by its id)", s.ID, err)
	}
	if _, err := db.FindSweep(ctx, "gamma"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"gamma"`) {
		t.Errorf("FindSweep(gamma): %v", err)
	}
	if _, err := db.FindSweep(ctx, "99"); !errors.Is(err, ErrNotFound) {
		t.Errorf("FindSweep(99): %v", err)
	}
	s, _ := db.LatestSweepByName(ctx, "alpha")
	if s.ID != a2 || s.State != SweepQueued || s.SpecHash != "abc123" || s.CreatedAt.IsZero() || !s.StartedAt.IsZero() {
		t.Errorf("latest alpha: %+v", s)
	}
	hosts, err := db.Hosts(ctx, a1)
	if err != nil || len(hosts) != 2 || hosts[0].Name != "h4" || hosts[0].Driver != "ssh" || hosts[1].Driver != "local" || hosts[1].GPUs != 8 {
		t.Errorf("hosts: %+v %v", hosts, err)
	}
	all, _ := db.ListSweeps(ctx)
	if len(all) != 4 || all[0].ID != a1 || all[0].Points != 5 || all[0].Pending != 5 || all[3].Points != 0 {
		t.Errorf("ListSweeps: %+v", all)
	}
	sched, _ := db.ListSweeps(ctx, SweepScheduled)
	if len(sched) != 1 || sched[0].Schedule != "0 22 * * *" {
		t.Errorf("scheduled: %+v", sched)
	}

	// The queue: oldest first.
	got, err := db.ClaimNextSweep(ctx)
	if err != nil || got.ID != a1 || got.State != SweepRunning || got.StartedAt.IsZero() {
		t.Fatalf("ClaimNextSweep: %+v %v", got, err)
	}
	if err := db.SetSweepState(ctx, a1, SweepQueued, "x"); err != nil {
		t.Error(err)
	}
	if err := db.SetSweepState(ctx, a1, SweepDone, ""); !errors.Is(err, ErrTransition) {
		t.Errorf("queued -> done: %v", err)
	}
	if err := db.SetSweepState(ctx, 999, SweepDone, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown sweep: %v", err)
	}
	for _, to := range []SweepState{SweepRunning, SweepInterrupted, SweepRunning, SweepDone} {
		if err := db.SetSweepState(ctx, a1, to, ""); err != nil {
			t.Fatalf("-> %s: %v", to, err)
		}
	}
	s, _ = db.Sweep(ctx, a1)
	if s.FinishedAt.IsZero() || s.StartedAt != got.StartedAt {
		t.Errorf("done sweep times: %+v", s)
	}
	if err := db.SetSweepState(ctx, a1, SweepQueued, ""); !errors.Is(err, ErrTransition) {
		t.Errorf("done -> queued: %v", err)
	}
	// not_before holds a sweep back.
	later, _ := db.CreateSweep(ctx, NewSweep{Name: "later", NotBefore: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}, nil, nil)
	for _, want := range []int64{b, a2} {
		if s, err := db.ClaimNextSweep(ctx); err != nil || s.ID != want {
			t.Errorf("claim: %d %v, want %d", s.ID, err, want)
		}
	}
	if s, err := db.ClaimNextSweep(ctx); !errors.Is(err, ErrNotFound) {
		t.Errorf("claim with only a future sweep: %d %v (later=%d)", s.ID, err, later)
	}
	evs, _ := db.Events(ctx, a1, "")
	if len(evs) != 7 || evs[0].Detail != "created queued (5 points, 2 hosts)" || evs[1].Detail != "queued -> running: claimed" {
		for _, e := range evs {
			t.Log(e.Kind, e.Detail)
		}
		t.Errorf("sweep events: %d", len(evs))
	}
}

func TestCreateSweepIsAtomic(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	_, err := db.CreateSweep(ctx, NewSweep{Name: "dup"}, []NewHost{{Name: "h", GPUs: 1}},
		[]NewPoint{{ID: "p", Method: "m", TP: 1}, {ID: "p", Method: "m", TP: 1}})
	if err == nil || !strings.Contains(err.Error(), "point p") {
		t.Fatalf("duplicate point id: %v", err)
	}
	if all, _ := db.ListSweeps(ctx); len(all) != 0 {
		t.Errorf("half-created sweep left: %+v", all)
	}
	if _, err := db.CreateSweep(ctx, NewSweep{Name: "b"}, nil, []NewPoint{{ID: "p", Method: "m", TP: 1, Baseline: true, NumSteps: ip(1)}}); err == nil {
		t.Error("baseline with num_steps accepted")
	}
}
