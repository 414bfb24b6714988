package sweep

import (
	"math"
	"slices"
)

// The weighted objective (issue 27; docs/report.md, "Prompt sets and lengths"): a level of a point
// is measured on every source of the workload, and the figure that ranks configurations is the
// traffic mix's, the sources weighed by their share of the traffic. Each repeat is mixed over its
// sources first, then the repeats are aggregated as ever (Repeats), so a workload of one source reads
// exactly as before.

// Mix is the run of the traffic mix of one point at one level and repeat, from the runs of its
// sources (runs keyed by Source.Key). Weights are shares of the output tokens, so:
//   - output tok/s is the weighted harmonic mean (the mix's tokens over the time they take);
//   - accept length likewise (the mix's tokens over its verify steps);
//   - the speedup is the baseline's time for the mix over this point's, from each source's speedup;
//   - median latencies are weighted means, the p99 TTFT the worst source's.
//
// The mix counts (OK) only when every source ran ok and measured its output tok/s; a figure missing
// in some source is missing in the mix. With one source, its run is returned unchanged whatever its key
// (runs recorded before sources existed carry none).
func Mix(sources []Source, runs map[SourceKey]RepeatRun) RepeatRun {
	if len(sources) == 1 && len(runs) == 1 {
		for _, r := range runs {
			return r
		}
	}
	var out RepeatRun
	if len(sources) == 0 {
		return out
	}
	var (
		time, steps, baseTime, weight float64
		lowTime, highTime             float64 // the mix of the intervals' bounds (NaN: some source has none)
		latency                       [numFigures]float64
		p99                           = math.Inf(-1)
		missing                       [numFigures]bool
	)
	for _, c := range sources {
		r, ok := runs[c.Key()]
		if !ok || !r.OK || r.Figures[OutputTokS] == nil || !(*r.Figures[OutputTokS] > 0) {
			return RepeatRun{}
		}
		t := c.Weight / *r.Figures[OutputTokS]
		time += t
		out.Missed = out.Missed || r.Missed
		// The mix is monotone in each source's tok/s: the bounds' mix bounds it.
		if b := r.TokS; b != nil && b.Low > 0 && b.High >= b.Low {
			lowTime += c.Weight / b.Low
			highTime += c.Weight / b.High
		} else {
			lowTime = math.NaN()
		}
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
	if lo, hi := weight/lowTime, weight/highTime; !math.IsNaN(lo) && !math.IsInf(hi, 0) && lo > 0 {
		out.TokS = &Bounds{Low: lo, High: hi}
	}
	set(AcceptLength, weight/steps)
	set(Speedup, baseTime/time)
	for _, f := range []Figure{TTFTP50Ms, TPOTP50Ms, ITLP50Ms} {
		set(f, latency[f]/weight)
	}
	set(TTFTP99Ms, p99)
	return out
}

// Mixer gathers a point's runs by level, repeat and source, and hands each level's repeats, mixed
// over the sources, to the one aggregation (Repeats).
type Mixer struct {
	sources []Source
	runs    map[int]map[int]map[SourceKey]RepeatRun // level, repeat, source
}

// NewMixer mixes over sources (Workload.Sources).
func NewMixer(sources []Source) *Mixer {
	return &Mixer{sources: sources, runs: map[int]map[int]map[SourceKey]RepeatRun{}}
}

// Over is the mixer with the same runs mixing over sources instead (whoever gathers the runs may
// learn the sources after).
func (m *Mixer) Over(sources []Source) *Mixer { return &Mixer{sources: sources, runs: m.runs} }

// Add counts one run of a source at a level and repeat.
func (m *Mixer) Add(level, repeat int, source SourceKey, run RepeatRun) {
	reps := m.runs[level]
	if reps == nil {
		reps = map[int]map[SourceKey]RepeatRun{}
		m.runs[level] = reps
	}
	cs := reps[repeat]
	if cs == nil {
		cs = map[SourceKey]RepeatRun{}
		reps[repeat] = cs
	}
	cs[source] = run
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

// Repeats is a level's repeats, each mixed over the sources (nil when the level has no run).
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
		out.Add(Mix(m.sources, reps[r]))
	}
	return out
}

// Source is one source's repeats at a level (nil when it has none): the per-set figures.
func (m *Mixer) Source(level int, source SourceKey) *Repeats {
	reps := m.runs[level]
	var keys []int
	for r, cs := range reps {
		if _, ok := cs[source]; ok {
			keys = append(keys, r)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	out := &Repeats{}
	for _, r := range keys {
		out.Add(reps[r][source])
	}
	return out
}
