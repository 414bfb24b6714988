package store

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestApplyHistory: an apply is recorded as it begins and ends; the history is per host, newest
// first; the table refuses what its checks refuse.
func TestApplyHistory(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sw, err := db.CreateSweep(ctx, NewSweep{Name: "s", SpecHash: "h", SpecText: "name: s"}, []NewHost{{Name: "gpu1", Driver: "ssh", GPUs: 1}},
		[]NewPoint{{ID: "p1", Method: "baseline", Baseline: true, TP: 1, Argv: []string{"x"}, Runs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := db.BeginApply(ctx, NewApply{Action: ApplyActionApply, Host: "gpu1", Unit: "sglang.service", SweepID: sw, PointID: "p1",
		Choice: "recommended", Label: "baseline tp=1", By: "me@laptop"})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.FinishApply(ctx, first, ApplyEnd{Result: ApplyRolledBack, Failure: "speed", Detail: "412.0 tok/s, want at least 480.0",
		Evidence: json.RawMessage(`{"tok_s": 412}`), EngineVersion: "0.5.10"}); err != nil {
		t.Fatal(err)
	}
	second, err := db.BeginApply(ctx, NewApply{Action: ApplyActionUnapply, Host: "gpu1", Unit: "sglang.service", By: "me@laptop"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.BeginApply(ctx, NewApply{Action: ApplyActionApply, Host: "gpu2", SweepID: sw, PointID: "p1", Choice: "point"}); err != nil {
		t.Fatal(err)
	}
	got, err := db.Applies(ctx, "gpu1", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != second || got[0].Result != ApplyRunning || !got[0].FinishedAt.IsZero() || got[0].SweepID != 0 {
		t.Fatalf("history %+v", got)
	}
	if a := got[1]; a.ID != first || a.Result != ApplyRolledBack || a.Failure != "speed" || a.SweepID != sw || a.Label != "baseline tp=1" ||
		string(a.Evidence) != `{"tok_s": 412}` || a.EngineVersion != "0.5.10" || a.FinishedAt.IsZero() {
		t.Fatalf("first apply %+v", a)
	}
	if all, _ := db.Applies(ctx, "", 10); len(all) != 3 {
		t.Errorf("every host: %d rows", len(all))
	}
	if err := db.FinishApply(ctx, first, ApplyEnd{Result: "sideways"}); err == nil || !strings.Contains(err.Error(), "CHECK") {
		t.Errorf("a result the table does not know: %v", err)
	}
	if _, err := db.BeginApply(ctx, NewApply{Action: "reapply", Host: "gpu1"}); err == nil {
		t.Error("an unknown action was taken")
	}
}

// TestLatestWatches: each host's latest watch verdict, with the regressions of that watch only.
func TestLatestWatches(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mk := func(name string) int64 {
		id, err := db.CreateSweep(ctx, NewSweep{Name: name, SpecHash: "h", SpecText: "name: " + name}, []NewHost{{Name: "gpu1", Driver: "ssh", GPUs: 1}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	old, newer, other := mk("w1"), mk("w2"), mk("w3")
	at := func(ms int64) time.Time { return time.UnixMilli(1_700_000_000_000 + ms) }
	for _, e := range []Event{
		{SweepID: old, Host: "gpu1", Kind: EventRegression, Data: json.RawMessage(`{"measure":"tok_s"}`), At: at(1)},
		{SweepID: old, Host: "gpu1", Kind: EventWatch, Detail: "1 regression", At: at(2)},
		{SweepID: newer, Host: "gpu1", Kind: EventRegression, Data: json.RawMessage(`{"measure":"accept_length"}`), At: at(3)},
		{SweepID: newer, Host: "gpu1", Kind: EventRegression, Data: json.RawMessage(`{"measure":"accept_length"}`), At: at(3)},
		{SweepID: newer, Host: "gpu1", Kind: EventWatch, Detail: "2 regressions", At: at(4)},
		{SweepID: other, Host: "gpu2", Kind: EventWatch, Detail: "no regression", At: at(5)},
	} {
		if err := db.AddEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.LatestWatches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Host != "gpu1" || got[0].SweepID != newer || got[0].Regressions[MeasureAccept] != 2 || got[0].Regressions[MeasureTokS] != 0 ||
		got[1].Host != "gpu2" || len(got[1].Regressions) != 0 {
		t.Fatalf("latest watches %+v", got)
	}
}
