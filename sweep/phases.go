package sweep

import (
	"time"

	"go.yaml.in/yaml/v3"
)

// Phases (issue 28; docs/spec.md, "phases"): a load that shifts over time, to see how a server
// configuration (an adaptive one above all) follows it. Instead of levels measured one after the
// other for a number of requests, each phase keeps its concurrency for a time, back to back on the
// same server, and records a run (its repeat is the concurrency's occurrence: phases 1, 64, 1 give
// c=1 repeats 1 and 2) with its output tok/s over time.

// Phase is one entry of workload.phases.
type Phase struct {
	Concurrency int           `json:"concurrency"`
	For         time.Duration `json:"for"`
}

// PhaseSeriesWidth is the interval of a phase's tok/s over time (workload.Config.SeriesWidth).
const PhaseSeriesWidth = time.Second

// Loads is how many runs one repeat of a point on one prompt source records: its phases, or its
// concurrency levels.
func (w Workload) Loads() int {
	if len(w.Phases) > 0 {
		return len(w.Phases)
	}
	return len(w.Concurrency)
}

// Occurrences numbers each phase of a sequence repeated repeats times as the store keys its run:
// the n-th phase (of all repeats) at a concurrency is that concurrency's repeat n.
func (w Workload) Occurrences() [][]int {
	seen := map[int]int{}
	out := make([][]int, w.Repeats)
	for r := range out {
		out[r] = make([]int, len(w.Phases))
		for i, ph := range w.Phases {
			seen[ph.Concurrency]++
			out[r][i] = seen[ph.Concurrency]
		}
	}
	return out
}

// phases decodes workload.phases: a non-empty list of {concurrency, for}.
func (p *parser) phases(n *yaml.Node, w *Workload) {
	const path = "workload.phases"
	items, ok := p.nonEmpty(n, path)
	if !ok {
		return
	}
	p.boundedLen(n, path, LimitPhases, "phases", len(items))
	for i, it := range items {
		at := index(path, i)
		ph := Phase{}
		_, ok := p.object(it, at, []field{
			{"concurrency", true, func(v *yaml.Node) {
				if x, ok := p.bounded(v, at+".concurrency", LimitConcurrency); ok {
					ph.Concurrency = x
				}
			}},
			{"for", true, func(v *yaml.Node) {
				if d, ok := p.boundedDuration(v, at+".for", LimitPhaseFor); ok {
					ph.For = d
				}
			}},
		})
		if ok && ph.Concurrency > 0 && ph.For > 0 {
			w.Phases = append(w.Phases, ph)
		}
	}
}
