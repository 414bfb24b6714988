package store

import (
	"context"
	"errors"
	"testing"
)

func TestHoldSweepAndHeartbeat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openTest(t)
	id := sampleSweep(t, db, "held")
	sw, err := db.Sweep(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if sw.Holder != (Holder{}) {
		t.Fatalf("a new sweep has a holder: %+v", sw.Holder)
	}
	if err := db.HoldSweep(ctx, id, Holder{Kind: HolderRun, PID: 4242, Host: "box"}); err != nil {
		t.Fatal(err)
	}
	sw, _ = db.Sweep(ctx, id)
	first := sw.Holder.Heartbeat
	if sw.Holder.Kind != HolderRun || sw.Holder.PID != 4242 || sw.Holder.Host != "box" || first.IsZero() {
		t.Fatalf("holder after HoldSweep: %+v", sw.Holder)
	}
	if err := db.Heartbeat(ctx, id, 4242); err != nil {
		t.Fatal(err)
	}
	sw, _ = db.Sweep(ctx, id)
	if !sw.Holder.Heartbeat.After(first) {
		t.Fatalf("heartbeat did not move: %v then %v", first, sw.Holder.Heartbeat)
	}
	// Another process took the sweep over: the old holder's heartbeats change nothing.
	if err := db.HoldSweep(ctx, id, Holder{Kind: HolderDaemon, PID: 7, Host: "other"}); err != nil {
		t.Fatal(err)
	}
	sw, _ = db.Sweep(ctx, id)
	taken := sw.Holder.Heartbeat
	if err := db.Heartbeat(ctx, id, 4242); err != nil {
		t.Fatal(err)
	}
	sw, _ = db.Sweep(ctx, id)
	if sw.Holder.Kind != HolderDaemon || sw.Holder.PID != 7 || !sw.Holder.Heartbeat.Equal(taken) {
		t.Fatalf("a former holder's heartbeat changed the sweep: %+v", sw.Holder)
	}
	list, err := db.ListSweeps(ctx)
	if err != nil || len(list) != 1 || list[0].Holder != sw.Holder {
		t.Fatalf("ListSweeps holder: %+v, %v", list, err)
	}
	for _, bad := range []Holder{{Kind: "cron", PID: 1}, {Kind: HolderRun, PID: 0}} {
		if err := db.HoldSweep(ctx, id, bad); err == nil {
			t.Errorf("HoldSweep(%+v) accepted", bad)
		}
	}
	if err := db.HoldSweep(ctx, id+100, Holder{Kind: HolderRun, PID: 1}); !errors.Is(err, ErrNotFound) {
		t.Errorf("HoldSweep of a missing sweep: %v", err)
	}
}
