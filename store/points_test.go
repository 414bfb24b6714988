package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestPointTransitionsTable(t *testing.T) {
	all := []PointState{PointWaiting, PointPending, PointRunning, PointDone, PointFailed, PointCancelled, PointPruned}
	legal := map[[2]PointState]bool{
		{PointWaiting, PointPending}: true, {PointWaiting, PointPruned}: true, {PointWaiting, PointCancelled}: true,
		{PointPending, PointRunning}: true, {PointPending, PointCancelled}: true,
		{PointRunning, PointDone}: true, {PointRunning, PointFailed}: true,
		{PointRunning, PointCancelled}: true, {PointRunning, PointPending}: true, {PointRunning, PointWaiting}: true,
		{PointFailed, PointPending}: true, {PointCancelled, PointPending}: true,
		{PointFailed, PointWaiting}: true, {PointCancelled, PointWaiting}: true,
	}
	for _, from := range all {
		if !from.Valid() {
			t.Errorf("%s: not valid", from)
		}
		if want := from == PointDone || from == PointPruned; from.Final() != want {
			t.Errorf("%s: Final = %v", from, !want)
		}
		for _, to := range all {
			if got := from.CanTransition(to); got != legal[[2]PointState{from, to}] {
				t.Errorf("%s -> %s: CanTransition = %v", from, to, got)
			}
		}
	}
	if PointState("bogus").Valid() || PointState("bogus").Final() {
		t.Error("unknown state valid or final")
	}
}

func TestPointStateMachine(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "sm")

	att, err := db.ClaimPoint(ctx, sw, "s1", "h4")
	if err != nil || att != 1 {
		t.Fatalf("claim: attempt %d, %v", att, err)
	}
	if _, err := db.ClaimPoint(ctx, sw, "s1", "h8"); !errors.Is(err, ErrTransition) {
		t.Errorf("second claim: %v, want ErrTransition", err)
	}
	if _, err := db.ClaimPoint(ctx, sw, "nope", "h4"); !errors.Is(err, ErrNotFound) {
		t.Errorf("claim unknown point: %v, want ErrNotFound", err)
	}
	if _, err := db.ClaimPoint(ctx, sw, "s2", "nohost"); !errors.Is(err, ErrNotFound) {
		t.Errorf("claim on unknown host: %v, want ErrNotFound", err)
	}
	// done needs its planned runs.
	if err := db.FinishPoint(ctx, sw, "s1", 1, PointFinish{State: PointDone}); !errors.Is(err, ErrIncomplete) {
		t.Errorf("done without runs: %v, want ErrIncomplete", err)
	}
	if err := db.FinishPoint(ctx, sw, "s1", 1, PointFinish{State: PointFailed}); err == nil {
		t.Error("failed without a class: no error")
	}
	if err := db.FinishPoint(ctx, sw, "s1", 1, PointFinish{State: PointFailed, FailureClass: "bogus"}); err == nil {
		t.Error("failed with an unknown class: no error")
	}
	if err := db.FinishPoint(ctx, sw, "s1", 1, PointFinish{State: PointPending}); !errors.Is(err, ErrTransition) {
		t.Errorf("finish as pending: %v, want ErrTransition", err)
	}
	if err := db.FinishPoint(ctx, sw, "s1", 2, PointFinish{State: PointCancelled}); !errors.Is(err, ErrStaleAttempt) {
		t.Errorf("finish with wrong attempt: %v, want ErrStaleAttempt", err)
	}
	for _, c := range []int{1, 16} {
		if err := db.RecordRun(ctx, okRun(sw, "s1", 1, c, 1, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FinishPoint(ctx, sw, "s1", 1, PointFinish{State: PointDone}); err != nil {
		t.Fatal(err)
	}
	// done is final.
	if _, err := db.ClaimPoint(ctx, sw, "s1", "h4"); !errors.Is(err, ErrTransition) {
		t.Errorf("claim a done point: %v", err)
	}
	if err := db.ReleasePoint(ctx, sw, "s1", 1, "x"); !errors.Is(err, ErrTransition) {
		t.Errorf("release a done point: %v", err)
	}
	if err := db.RecordRun(ctx, okRun(sw, "s1", 1, 32, 1, 100)); !errors.Is(err, ErrTransition) {
		t.Errorf("run for a done point: %v", err)
	}
	if _, err := db.RequeuePoints(ctx, sw, "", PointDone); !errors.Is(err, ErrTransition) {
		t.Errorf("requeue done points: %v", err)
	}
	// pending cannot finish or be released.
	if err := db.FinishPoint(ctx, sw, "s2", 0, PointFinish{State: PointDone}); !errors.Is(err, ErrTransition) {
		t.Errorf("finish a pending point: %v", err)
	}

	// failed -> pending supersedes the runs, and the next claim is attempt 2.
	att, _ = db.ClaimPoint(ctx, sw, "s2", "h4")
	if err := db.RecordRun(ctx, okRun(sw, "s2", att, 1, 1, 90)); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishPoint(ctx, sw, "s2", att, PointFinish{State: PointFailed, FailureClass: FailOOM, FailureDetail: "CUDA out of memory"}); err != nil {
		t.Fatal(err)
	}
	p, _ := db.Point(ctx, sw, "s2")
	if p.State != PointFailed || p.FailureClass != FailOOM || p.FailureDetail != "CUDA out of memory" || p.FinishedAt.IsZero() {
		t.Errorf("failed point: %+v", p)
	}
	if n, err := db.RequeuePoints(ctx, sw, "retry", PointFailed); err != nil || n != 1 {
		t.Fatalf("requeue: %d, %v", n, err)
	}
	runStatuses(t, db, sw, "s2", "superseded")
	if att, err := db.ClaimPoint(ctx, sw, "s2", "h4"); err != nil || att != 2 {
		t.Errorf("reclaim: attempt %d, %v", att, err)
	}
	p, _ = db.Point(ctx, sw, "s2")
	if p.FailureClass != "" || p.Host != "h4" || p.Attempts != 2 || p.State != PointRunning {
		t.Errorf("reclaimed point: %+v", p)
	}

	// cancel pending points, then requeue them.
	if n, err := db.CancelPoints(ctx, sw, "user cancel"); err != nil || n != 3 {
		t.Errorf("cancel: %d, %v", n, err)
	}
	if n, err := db.RequeuePoints(ctx, sw, "resume", PointCancelled); err != nil || n != 3 {
		t.Errorf("requeue cancelled: %d, %v", n, err)
	}
	s, err := db.Sweep(ctx, sw)
	if err != nil {
		t.Fatal(err)
	}
	want := PointCounts{Pending: 3, Running: 1, Done: 1}
	if s.PointCounts != want || s.Points != 5 {
		t.Errorf("counts %+v (total %d), want %+v", s.PointCounts, s.Points, want)
	}
}

func runStatuses(t *testing.T, db *DB, sweepID int64, point string, want ...string) {
	t.Helper()
	rows, err := db.Query(context.Background(),
		"SELECT status FROM run_detail WHERE sweep_id = ? AND point_id = ? ORDER BY run_id", sweepID, point)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows.Values {
		got = append(got, r[0].(string))
	}
	if len(got) != len(want) {
		t.Fatalf("runs of %s: %q, want %q", point, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("runs of %s: %q, want %q", point, got, want)
		}
	}
}

func TestReleaseAndRecover(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "rec")
	att, _ := db.ClaimPoint(ctx, sw, "b4", "h4")
	if err := db.RecordRun(ctx, okRun(sw, "b4", att, 1, 1, 100)); err != nil {
		t.Fatal(err)
	}
	if err := db.ReleasePoint(ctx, sw, "b4", att, "host rebooted"); err != nil {
		t.Fatal(err)
	}
	runStatuses(t, db, sw, "b4", "superseded")
	p, _ := db.Point(ctx, sw, "b4")
	if p.State != PointPending || p.FailureClass != FailInterrupted || p.FailureDetail != "host rebooted" {
		t.Errorf("released point: %+v", p)
	}
	att2, err := db.ClaimPoint(ctx, sw, "b4", "h8")
	if err != nil || att2 != 2 {
		t.Fatalf("reclaim: %d %v", att2, err)
	}
	// The same level in the new attempt is a new run.
	if err := db.RecordRun(ctx, okRun(sw, "b4", att2, 1, 1, 110)); err != nil {
		t.Fatal(err)
	}
	// A stale worker of attempt 1 can neither record nor finish.
	if err := db.RecordRun(ctx, okRun(sw, "b4", att, 16, 1, 100)); !errors.Is(err, ErrStaleAttempt) {
		t.Errorf("stale record: %v", err)
	}
	if err := db.SetPointInfo(ctx, sw, "b4", att, PointInfo{ExecStart: "x"}); !errors.Is(err, ErrStaleAttempt) {
		t.Errorf("stale info: %v", err)
	}
	if _, err := db.ClaimPoint(ctx, sw, "s1", "h4"); err != nil {
		t.Fatal(err)
	}
	n, err := db.RecoverInterrupted(ctx, sw, "")
	if err != nil || n != 2 {
		t.Fatalf("recover: %d %v", n, err)
	}
	runStatuses(t, db, sw, "b4", "superseded", "superseded")
	s, _ := db.Sweep(ctx, sw)
	if s.Running != 0 || s.Pending != 5 {
		t.Errorf("after recover: %+v", s.PointCounts)
	}
	evs, err := db.Events(ctx, sw, "b4")
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, e := range evs {
		details = append(details, e.Kind+": "+e.Detail)
	}
	want := []string{
		"state: pending -> running (attempt 1)",
		"state: running -> pending (interrupted: host rebooted)",
		"state: pending -> running (attempt 2)",
		"state: running -> pending (interrupted: recovered after the process running it ended)",
	}
	if len(details) != len(want) {
		t.Fatalf("events %q, want %q", details, want)
	}
	for i := range want {
		if details[i] != want[i] {
			t.Errorf("event %d: %q, want %q", i, details[i], want[i])
		}
	}
	if evs[2].Host != "h8" {
		t.Errorf("claim event host %q", evs[2].Host)
	}
}

func TestSetPointInfo(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "info")
	att, _ := db.ClaimPoint(ctx, sw, "s1", "h4")
	if err := db.SetPointInfo(ctx, sw, "s1", att, PointInfo{EffectiveArgs: []byte("{bad")}); err == nil {
		t.Error("invalid JSON accepted")
	}
	if err := db.SetPointInfo(ctx, sw, "s1", att, PointInfo{ExecStart: "/bin/python -m x", Load: 1500 * 1e6}); err != nil {
		t.Fatal(err)
	}
	if err := db.SetPointInfo(ctx, sw, "s1", att, PointInfo{EffectiveArgs: []byte(`{"tp_size":4}`), Provenance: []byte(`{"sglang":"0.5.6"}`)}); err != nil {
		t.Fatal(err)
	}
	p, _ := db.Point(ctx, sw, "s1")
	if p.ExecStart != "/bin/python -m x" || p.Load.Seconds() != 1.5 || string(p.EffectiveArgs) != `{"tp_size":4}` ||
		string(p.Provenance) != `{"sglang":"0.5.6"}` {
		t.Errorf("info: %+v", p.PointInfo)
	}
	if *p.NumSteps != 1 || p.Env["SGL_X"] != "1" || len(p.Argv) != 5 || p.Runs != 2 || p.PlanOrder != 1 {
		t.Errorf("point: %+v", p)
	}
	// The effective speculative parameters the server reports, beside the requested ones.
	if err := db.SetPointInfo(ctx, sw, "s1", att, PointInfo{EffectiveNumSteps: ip(1), EffectiveTopK: ip(1), EffectiveNumDraftTokens: ip(2)}); err != nil {
		t.Fatal(err)
	}
	p, _ = db.Point(ctx, sw, "s1")
	if p.EffectiveNumDraftTokens == nil || *p.EffectiveNumDraftTokens != 2 || *p.EffectiveTopK != 1 || p.ExecStart != "/bin/python -m x" {
		t.Errorf("effective values: %+v", p.PointInfo)
	}
	rows, err := db.Query(ctx, "SELECT num_draft_tokens, effective_num_draft_tokens FROM point_summary WHERE point_id = 's1'")
	if err != nil || len(rows.Values) != 1 || rows.Values[0][0] != int64(2) || rows.Values[0][1] != int64(2) {
		t.Errorf("point_summary: %+v %v", rows, err)
	}
	// Where the accept length came from, per run.
	run := okRun(sw, "s1", att, 1, 1, 100)
	run.Metrics.AcceptLengthSource = "decode_log"
	if err := db.RecordRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	rows, err = db.Query(ctx, "SELECT accept_length, accept_length_source FROM run_summary WHERE point_id = 's1'")
	if err != nil || len(rows.Values) != 1 || rows.Values[0][1] != "decode_log" {
		t.Errorf("run_summary accept_length_source: %+v %v", rows, err)
	}
}

func TestClaimRace(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "race")
	var wins, losses atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, err := db.ClaimPoint(ctx, sw, "s1", "h4")
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, ErrTransition):
				losses.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 || losses.Load() != 7 {
		t.Errorf("wins %d, losses %d", wins.Load(), losses.Load())
	}

	// Two hosts (two store handles, like two processes) take the rest.
	db2, err := Open(ctx, db.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	claimed := make(chan string, 10)
	for _, w := range []struct {
		db   *DB
		host string
	}{{db, "h8"}, {db2, "h8"}} {
		wg.Go(func() {
			for {
				p, err := w.db.ClaimNextPoint(ctx, sw, w.host)
				if errors.Is(err, ErrNotFound) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				claimed <- p.ID
			}
		})
	}
	wg.Wait()
	close(claimed)
	seen := map[string]bool{}
	for id := range claimed {
		if seen[id] {
			t.Errorf("%s claimed twice", id)
		}
		seen[id] = true
	}
	if len(seen) != 4 {
		t.Errorf("claimed %v, want the 4 remaining points", seen)
	}
	// h4 (4 GPUs) cannot take tp-8 points.
	if _, err := db.ClaimNextPoint(ctx, sw, "h4"); !errors.Is(err, ErrNotFound) {
		t.Errorf("claim next with nothing left: %v", err)
	}
}

func TestClaimNextRespectsTP(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "tp")
	var got []string
	for {
		p, err := db.ClaimNextPoint(ctx, sw, "h4")
		if errors.Is(err, ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.Attempts != 1 || p.State != PointRunning || p.Host != "h4" {
			t.Errorf("claimed %+v", p)
		}
		got = append(got, p.ID)
	}
	if len(got) != 3 || got[0] != "b4" || got[1] != "s1" || got[2] != "s2" {
		t.Errorf("h4 claimed %q, want b4 s1 s2 in plan order", got)
	}
}

func TestRecordRunAndFinishAtomic(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "atomic")
	att, _ := db.ClaimPoint(ctx, sw, "s1", "h4")
	if err := db.RecordRun(ctx, okRun(sw, "s1", att, 1, 1, 100)); err != nil {
		t.Fatal(err)
	}
	// A duplicate run with a finish: neither happens.
	err := db.RecordRunAndFinish(ctx, okRun(sw, "s1", att, 1, 1, 100), &PointFinish{State: PointDone})
	if !errors.Is(err, ErrDuplicateRun) {
		t.Fatalf("duplicate: %v", err)
	}
	p, _ := db.Point(ctx, sw, "s1")
	if p.State != PointRunning {
		t.Errorf("state after failed duplicate: %s", p.State)
	}
	// A finish that fails rolls the run back.
	err = db.RecordRunAndFinish(ctx, okRun(sw, "s1", att, 16, 1, 100), &PointFinish{State: PointFailed, FailureClass: "nope"})
	if err == nil {
		t.Fatal("bad finish accepted")
	}
	runStatuses(t, db, sw, "s1", "ok")
	// The last run and done, together.
	if err := db.RecordRunAndFinish(ctx, okRun(sw, "s1", att, 16, 1, 100), &PointFinish{State: PointDone}); err != nil {
		t.Fatal(err)
	}
	runStatuses(t, db, sw, "s1", "ok", "ok")
	p, _ = db.Point(ctx, sw, "s1")
	if p.State != PointDone {
		t.Errorf("state %s", p.State)
	}
	// A failed run without metrics.
	att, _ = db.ClaimPoint(ctx, sw, "s2", "h4")
	err = db.RecordRunAndFinish(ctx, Run{SweepID: sw, PointID: "s2", Attempt: att, Concurrency: 1, Repeat: 1,
		Status: RunFailed, Error: "connection refused"},
		&PointFinish{State: PointFailed, FailureClass: FailCrashDuringLoad, FailureDetail: "exit 1"})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryRuns(ctx, RunsQuery{Where: "point_id = 's2'"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows.Values) != 1 || rows.Values[0][15] != nil || rows.Values[0][11] != "failed" {
		t.Errorf("failed run row: %v", rows.Values)
	}
	if err := db.RecordRun(ctx, Run{SweepID: sw, PointID: "s1", Attempt: 1, Concurrency: 1, Repeat: 1, Status: RunSuperseded}); err == nil {
		t.Error("superseded status accepted from a caller")
	}
}

// TestClaimNextUpTo: a packing host claims only what fits the GPUs free there now.
func TestClaimNextUpTo(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "upto")
	// h8 with 3 GPUs free: the tp-4 and tp-8 points do not fit.
	if _, err := db.ClaimNextPointUpTo(ctx, sw, "h8", 3); !errors.Is(err, ErrNotFound) {
		t.Errorf("3 free GPUs: %v", err)
	}
	p, err := db.ClaimNextPointUpTo(ctx, sw, "h8", 4)
	if err != nil || p.ID != "b4" {
		t.Errorf("4 free GPUs: %+v %v, want b4", p.ID, err)
	}
	// A cap above the host's GPUs is the host's GPUs.
	if p, err := db.ClaimNextPointUpTo(ctx, sw, "h4", 16); err != nil || p.TP > 4 {
		t.Errorf("cap above the host: %+v %v", p.ID, err)
	}
}

// TestClaimNextPointOf: a host that spans nodes (h4 as a group of two 4-GPU nodes) claims the
// points of the tps it takes, tp 8 above its own GPUs included, and nothing else.
func TestClaimNextPointOf(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "of")
	var got []string
	for {
		p, err := db.ClaimNextPointOf(ctx, sw, "h4", []int{8})
		if errors.Is(err, ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.ID)
	}
	if strings.Join(got, ",") != "b8,s1t8" {
		t.Errorf("claimed %v, want the tp 8 points b8, s1t8 only", got)
	}
	if _, err := db.ClaimNextPointOf(ctx, sw, "h4", nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("no tps: %v", err)
	}
	if p, err := db.ClaimNextPointOf(ctx, sw, "h4", []int{4, 8}); err != nil || p.ID != "b4" {
		t.Errorf("tps 4, 8: %v %v, want b4", p.ID, err)
	}
}
