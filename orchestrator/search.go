package orchestrator

import (
	"context"
	"fmt"
	"sync"

	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// searchStore is what the search needs of the store (*store.DB satisfies it).
type searchStore interface {
	SearchInputs(ctx context.Context, sweepID int64) ([]store.SearchPoint, error)
	ApplySearch(ctx context.Context, sweepID int64, release, prune []store.SearchDecision) error
}

// searcher applies a spec's search to a running sweep: after every point it decides again, from
// the store alone, which waiting points run and which are pruned (sweep.Spec.Decide replays the
// same decisions from the same recorded runs, so a resumed sweep goes on where it stopped), and
// wakes the workers waiting for a next point.
type searcher struct {
	st   searchStore
	spec *sweep.Spec
	plan *sweep.Plan

	mu      sync.Mutex
	changed chan struct{} // closed (and replaced) at every decision
}

func newSearcher(st Store, spec *sweep.Spec) (*searcher, error) {
	ss, ok := st.(searchStore)
	if !ok {
		return nil, fmt.Errorf("orchestrator: the store cannot run a search (strategy %s)", spec.Search.Strategy)
	}
	return &searcher{st: ss, spec: spec, plan: spec.Plan(), changed: make(chan struct{})}, nil
}

// searchState is what decide saw: whether a worker without a point should wait for one.
type searchState struct {
	waiting, pending, running int
	released                  int
}

// decide runs the search once and applies its decisions.
func (s *searcher) decide(ctx context.Context, sweepID int64) (searchState, []sweep.Decided, []sweep.Decided, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pts, err := s.st.SearchInputs(ctx, sweepID)
	if err != nil {
		return searchState{}, nil, nil, fmt.Errorf("orchestrator: search of sweep %d: %w", sweepID, err)
	}
	known := make(map[string]sweep.PointResult, len(pts))
	var state searchState
	for _, p := range pts {
		known[p.PointID] = knowledge(p)
		switch p.State {
		case store.PointWaiting:
			state.waiting++
		case store.PointPending:
			state.pending++
		case store.PointRunning:
			state.running++
		}
	}
	d := s.spec.Decide(s.plan, known)
	if len(d.Release) == 0 && len(d.Prune) == 0 {
		return state, nil, nil, nil
	}
	if err := s.st.ApplySearch(ctx, sweepID, decisions(d.Release), decisions(d.Prune)); err != nil {
		return state, nil, nil, fmt.Errorf("orchestrator: search of sweep %d: %w", sweepID, err)
	}
	state.waiting -= len(d.Release) + len(d.Prune)
	state.pending += len(d.Release)
	state.released = len(d.Release)
	close(s.changed)
	s.changed = make(chan struct{})
	return state, d.Release, d.Prune, nil
}

// wait returns a channel closed at the next decision.
func (s *searcher) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// knowledge is what the search knows of a stored point: its ok runs, by level.
func knowledge(p store.SearchPoint) sweep.PointResult {
	switch p.State {
	case store.PointWaiting:
		return sweep.PointResult{Knowledge: sweep.Undecided}
	case store.PointPending, store.PointRunning:
		return sweep.PointResult{Knowledge: sweep.Released}
	case store.PointDone, store.PointFailed:
	default: // pruned, cancelled
		return sweep.PointResult{Knowledge: sweep.Dropped}
	}
	r := sweep.PointResult{Knowledge: sweep.Measured, Levels: map[int]sweep.LevelResult{}}
	accept := map[int][]float64{}
	failed := map[int]bool{}
	for _, run := range p.Runs {
		if run.Status != store.RunOK || run.OutputTokS == nil {
			failed[run.Concurrency] = true
			continue
		}
		l := r.Levels[run.Concurrency]
		l.OutputTokS = append(l.OutputTokS, *run.OutputTokS)
		r.Levels[run.Concurrency] = l
		if run.AcceptLength != nil {
			accept[run.Concurrency] = append(accept[run.Concurrency], *run.AcceptLength)
		}
	}
	for c, l := range r.Levels {
		if failed[c] {
			// A level counts only when every repeat of it measured (docs/schema.md's rule for a run).
			delete(r.Levels, c)
			continue
		}
		if a := accept[c]; len(a) == len(l.OutputTokS) {
			l.AcceptLength = sweep.Median(a)
			r.Levels[c] = l
		}
	}
	return r
}

func decisions(ds []sweep.Decided) []store.SearchDecision {
	out := make([]store.SearchDecision, len(ds))
	for i, d := range ds {
		out[i] = store.SearchDecision{PointID: d.PointID, Reason: d.Reason}
	}
	return out
}
