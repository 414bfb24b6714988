package sweep

import (
	"math"
	"slices"
)

// The weighted objective (issue 27; docs/report.md, "Prompt sets and lengths"): a level of a point
// is measured on every cell of the workload, and the figure that ranks configurations is the
// traffic mix's, the cells weighed by their share of the traffic. Each repeat is mixed over its
// cells first, then the repeats are aggregated as ever (Repeats), so a workload of one cell reads
// exactly as before.

// Mix is the run of the traffic mix of one point at one level and repeat, from the runs of its
// cells (runs keyed by Cell.Key). Weights are shares of the output tokens, so:
//   - output tok/s is the weighted harmonic mean (the mix's tokens over the time they take);
//   - accept length likewise (the mix's tokens over its verify steps);
//   - the speedup is the baseline's time for the mix over this point's, from each cell's speedup;
//   - median latencies are weighted means, the p99 TTFT the worst cell's.
//
// The mix counts (OK) only when every cell ran ok and measured its output tok/s; a figure missing
// in some cell is missing in the mix. With one cell, its run is returned unchanged whatever its key
// (runs recorded before cells existed carry none).
func Mix(cells []Cell, runs map[CellKey]RepeatRun) RepeatRun {
	if len(cells) == 1 && len(runs) == 1 {
		for _, r := range runs {
			return r
		}
	}
	var out RepeatRun
	if len(cells) == 0 {
		return out
	}
	var (
		time, steps, baseTime, weight float64
		latency                       [numFigures]float64
		p99                           = math.Inf(-1)
		missing                       [numFigures]bool
	)
	for _, c := range cells {
		r, ok := runs[c.Key()]
		if !ok || !r.OK || r.Figures[OutputTokS] == nil || !(*r.Figures[OutputTokS] > 0) {
			return RepeatRun{}
		}
		t := c.Weight / *r.Figures[OutputTokS]
		time += t
		weight += c.Weight
		for f, x := range r.Figures {
			if x == nil || math.IsNaN(*x) {
				missing[f] = true
			}
		}
		if x := r.Figures[AcceptLength]; x != nil && *x > 0 {
			steps += c.Weight / *x
		} else {
			missing[AcceptLength] = true
		}
		if x := r.Figures[Speedup]; x != nil && *x > 0 {
			baseTime += t * *x
		} else {
			missing[Speedup] = true
		}
		for _, f := range []Figure{TTFTP50Ms, TPOTP50Ms, ITLP50Ms} {
			if x := r.Figures[f]; x != nil {
				latency[f] += c.Weight * *x
			}
		}
		if x := r.Figures[TTFTP99Ms]; x != nil {
			p99 = max(p99, *x)
		}
	}
	out.OK = true
	set := func(f Figure, v float64) {
		if !missing[f] && !math.IsNaN(v) && !math.IsInf(v, 0) {
			out.Figures[f] = &v
		}
	}
	set(OutputTokS, weight/time)
	set(AcceptLength, weight/steps)
	set(Speedup, baseTime/time)
	for _, f := range []Figure{TTFTP50Ms, TPOTP50Ms, ITLP50Ms} {
		set(f, latency[f]/weight)
	}
	set(TTFTP99Ms, p99)
	return out
}

// Mixer gathers a point's runs by level, repeat and cell, and hands each level's repeats, mixed
// over the cells, to the one aggregation (Repeats).
type Mixer struct {
	cells []Cell
	runs  map[int]map[int]map[CellKey]RepeatRun // level, repeat, cell
}

// NewMixer mixes over cells (Workload.Cells).
func NewMixer(cells []Cell) *Mixer {
	return &Mixer{cells: cells, runs: map[int]map[int]map[CellKey]RepeatRun{}}
}

// Add counts one run of a cell at a level and repeat.
func (m *Mixer) Add(level, repeat int, cell CellKey, run RepeatRun) {
	reps := m.runs[level]
	if reps == nil {
		reps = map[int]map[CellKey]RepeatRun{}
		m.runs[level] = reps
	}
	cs := reps[repeat]
	if cs == nil {
		cs = map[CellKey]RepeatRun{}
		reps[repeat] = cs
	}
	cs[cell] = run
}

// Levels are the levels that have runs, ascending.
func (m *Mixer) Levels() []int {
	var out []int
	for l := range m.runs {
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// Repeats is a level's repeats, each mixed over the cells (nil when the level has no run).
func (m *Mixer) Repeats(level int) *Repeats {
	reps := m.runs[level]
	if reps == nil {
		return nil
	}
	var keys []int
	for r := range reps {
		keys = append(keys, r)
	}
	slices.Sort(keys)
	out := &Repeats{}
	for _, r := range keys {
		out.Add(Mix(m.cells, reps[r]))
	}
	return out
}

// Cell is one cell's repeats at a level (nil when it has none): the per-set figures.
func (m *Mixer) Cell(level int, cell CellKey) *Repeats {
	reps := m.runs[level]
	var keys []int
	for r, cs := range reps {
		if _, ok := cs[cell]; ok {
			keys = append(keys, r)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	out := &Repeats{}
	for _, r := range keys {
		out.Add(reps[r][cell])
	}
	return out
}
