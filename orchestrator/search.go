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
	st      searchStore
	spec    *sweep.Spec
	plan    *sweep.Plan
	sources []sweep.Source // the weighted objective's sources

	mu      sync.Mutex
	changed chan struct{} // closed (and replaced) at every decision
}

func newSearcher(st Store, spec *sweep.Spec) (*searcher, error) {
	ss, ok := st.(searchStore)
	if !ok {
		return nil, fmt.Errorf("orchestrator: the store cannot run a search (strategy %s)", spec.Search.Strategy)
	}
	return &searcher{st: ss, spec: spec, plan: spec.Plan(), sources: spec.Workload.Sources(), changed: make(chan struct{})}, nil
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
		known[p.PointID] = SearchKnowledge(p, s.sources)
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

// SearchKnowledge is what the search knows of a stored point: its levels that count, each repeat
// mixed over the workload's sources (sweep.Mix: the weighted objective), by the one aggregation of
// repeats (sweep.Repeats) the report and `runs --best` read too.
func SearchKnowledge(p store.SearchPoint, sources []sweep.Source) sweep.PointResult {
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
	m := sweep.NewMixer(sources)
	for _, run := range p.Runs {
		var rr sweep.RepeatRun
		rr.OK = run.Status == store.RunOK
		rr.Figures[sweep.OutputTokS], rr.Figures[sweep.AcceptLength] = run.OutputTokS, run.AcceptLength
		if run.TokSLow != nil && run.TokSHigh != nil {
			rr.TokS = &sweep.Bounds{Low: *run.TokSLow, High: *run.TokSHigh}
		}
		m.Add(run.Concurrency, run.Repeat, sweep.SourceKey{Dataset: run.Dataset, InputTokens: run.InputTokens}, rr)
	}
	for _, c := range m.Levels() {
		// The one rule of which repeats count (sweep.Repeats), as the report's: a level with a
		// failed repeat (or a source that failed or never ran) is not a measurement of the configuration.
		reps := m.Repeats(c)
		if !reps.Counts() {
			continue
		}
		l := sweep.LevelResult{OutputTokS: reps.Values(sweep.OutputTokS), TokS: reps.Stat(sweep.OutputTokS).CI}
		if a := reps.Stat(sweep.AcceptLength); a.N == len(l.OutputTokS) {
			l.AcceptLength = a.Median
		}
		r.Levels[c] = l
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
