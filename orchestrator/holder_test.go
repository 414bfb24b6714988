package orchestrator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
)

func TestRunHoldsTheSweepWithAHeartbeat(t *testing.T) {
	h := newHarness(t, 1, func(string, hostctl.Launch, int) behaviour { return behaviour{loadDelay: 5 * time.Millisecond} })
	var (
		mu    sync.Mutex
		beats []time.Time
	)
	_, out, err := h.run(context.Background(), func(c *Config) {
		c.Holder, c.PID, c.HostName, c.Heartbeat = store.HolderRun, 4711, "gpu-box", time.Millisecond
		obs := c.Observe
		c.Observe = func(u Update) {
			obs(u)
			sw, err := h.db.LatestSweepByName(context.Background(), "orch-test")
			if err == nil {
				mu.Lock()
				beats = append(beats, sw.Holder.Heartbeat)
				mu.Unlock()
			}
		}
	})
	if err != nil || out.State != store.SweepDone {
		t.Fatalf("run: %+v, %v", out, err)
	}
	sw, err := h.db.LatestSweepByName(context.Background(), "orch-test")
	if err != nil {
		t.Fatal(err)
	}
	if sw.Holder.Kind != store.HolderRun || sw.Holder.PID != 4711 || sw.Holder.Host != "gpu-box" {
		t.Fatalf("holder %+v", sw.Holder)
	}
	mu.Lock()
	defer mu.Unlock()
	moved := 0
	for i := 1; i < len(beats); i++ {
		if beats[i].After(beats[i-1]) {
			moved++
		}
	}
	if moved == 0 {
		t.Fatalf("the heartbeat never moved while the sweep ran (%d readings)", len(beats))
	}
}

func TestNoHolderRecordedWithoutAKind(t *testing.T) {
	h := newHarness(t, 1, nil)
	if _, _, err := h.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sw, _ := h.db.LatestSweepByName(context.Background(), "orch-test")
	if sw.Holder != (store.Holder{}) {
		t.Fatalf("holder %+v recorded by a runner without one", sw.Holder)
	}
	if _, err := New(Config{Store: h.db, Holder: "cron"}); err == nil {
		t.Fatal("an unknown holder kind was accepted")
	}
}

func TestOrphaned(t *testing.T) {
	t.Parallel()
	beat := time.Date(2026, 12, 5, 23, 14, 0, 0, time.UTC)
	running := store.Sweep{State: store.SweepRunning,
		Holder: store.Holder{Kind: store.HolderRun, PID: 99, Host: "here", Heartbeat: beat}}
	for _, c := range []struct {
		name string
		sw   store.Sweep
		l    Liveness
		want bool
	}{
		{"fresh heartbeat, pid alive", running, Liveness{Now: beat.Add(10 * time.Second), Host: "here", Alive: func(int) bool { return true }}, false},
		{"pid gone on this host", running, Liveness{Now: beat.Add(time.Second), Host: "here", Alive: func(int) bool { return false }}, true},
		{"pid reused, heartbeat stale", running, Liveness{Now: beat.Add(HolderTimeout + time.Second), Host: "here", Alive: func(int) bool { return true }}, true},
		{"other host, fresh", running, Liveness{Now: beat.Add(20 * time.Second), Host: "elsewhere", Alive: func(int) bool { return false }}, false},
		{"other host, stale", running, Liveness{Now: beat.Add(time.Minute), Host: "elsewhere"}, true},
		{"not running", func() store.Sweep { s := running; s.State = store.SweepDone; return s }(), Liveness{Now: beat.Add(time.Hour)}, false},
		{"never held", store.Sweep{State: store.SweepRunning}, Liveness{Now: beat.Add(time.Hour)}, false},
	} {
		got, since := c.l.Orphaned(c.sw)
		if got != c.want || (got && !since.Equal(beat)) {
			t.Errorf("%s: Orphaned = %v since %v, want %v", c.name, got, since, c.want)
		}
	}
	if !ProcessAlive(1) || ProcessAlive(1<<22+12345) || ProcessAlive(0) {
		t.Error("ProcessAlive: pid 1 should live, a pid above pid_max or 0 should not")
	}
}
