package web

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/specsweep/specsweep/store"
)

// stepStore is a streamStore of logged events only, whose LastIDs waits for the test: it says when
// it was asked (asked) and answers once gate is closed, with the events as they are then.
type stepStore struct {
	mu     sync.Mutex
	events []store.LoggedEvent
	gated  bool
	asked  chan struct{}
	gate   chan struct{}
}

func (s *stepStore) log(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, store.LoggedEvent{ID: id, Event: store.Event{Kind: "watch", At: time.UnixMilli(id)}})
}

func (s *stepStore) ListSweeps(context.Context, ...store.SweepState) ([]store.Sweep, error) {
	return nil, nil
}

func (s *stepStore) RunsAfter(context.Context, int64, int) ([]store.RunEvent, error) { return nil, nil }

func (s *stepStore) EventsAfter(_ context.Context, after int64, limit int) ([]store.LoggedEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.LoggedEvent
	for _, e := range s.events {
		if e.ID > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *stepStore) LastIDs(context.Context) (int64, int64, error) {
	s.mu.Lock()
	gated := s.gated
	s.mu.Unlock()
	if gated {
		close(s.asked)
		<-s.gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ev int64
	if n := len(s.events); n > 0 {
		ev = s.events[n-1].ID
	}
	return 0, ev, nil
}

// TestAnEventLoggedAsAPageOpensReachesIt: a page that subscribes while the hub's idle poll reads
// where the store stands gets every event logged after its hello, one logged before that read
// returns included (a watch added right after the dashboard opened never showed: CI, 2026-12-07).
// The idle poll moved the ids past it, so the next poll published nothing.
func TestAnEventLoggedAsAPageOpensReachesIt(t *testing.T) {
	st := &stepStore{asked: make(chan struct{}), gate: make(chan struct{})}
	st.log(1)
	h := newHub(st, nil)
	ctx := context.Background()
	if err := h.poll(ctx, true, false); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	st.gated = true
	st.mu.Unlock()
	polled := make(chan error, 1)
	go func() { polled <- h.poll(ctx, false, true) }() // no page listens yet
	<-st.asked
	sub := h.subscribe() // a page opens: its hello carries these ids
	if _, ev := h.ids(); ev != 1 {
		t.Fatalf("the page's hello says event %d, want 1", ev)
	}
	st.log(2) // a watch added while the page is open
	close(st.gate)
	if err := <-polled; err != nil {
		t.Fatal(err)
	}
	if err := h.poll(ctx, false, false); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-sub.ch:
		if m.kind != "log" || m.ev != 2 {
			t.Errorf("the page got %+v, want event 2", m)
		}
	default:
		t.Fatal("the page never got event 2, logged after its hello")
	}
}
