package sweep

import (
	"math"
	"slices"
)

// The one aggregation of a point's repeats at a concurrency level (docs/report.md, "What is in a
// report"): which repeats count, the median with its range, the spread and the noise verdict. The
// report, the CLI's results table, `runs --best` and the search all read a level through it, so they
// agree on every cell.

// Figure names one figure of a run that is aggregated over repeats.
type Figure int

// The figures Repeats aggregates.
const (
	OutputTokS   Figure = iota // output tok/s
	Speedup                    // run_summary.speedup
	AcceptLength               // accept length
	TTFTP99Ms                  // ms
	TTFTP50Ms                  // ms
	TPOTP50Ms                  // ms
	ITLP50Ms                   // ms
	numFigures
)

// RepeatRun is one recorded run of a point at a level, as the aggregation reads it: whether its
// status is ok, and its figures (nil: not measured).
type RepeatRun struct {
	OK      bool
	Figures [numFigures]*float64
	// TokS is the run's confidence interval of output tok/s (runs.ci_low/ci_high when ci_metric is
	// output_tok_s), nil without one.
	TokS *Bounds
	// Missed: the level had a precision target (workload.precision) and ran to its cap before
	// its interval reached it.
	Missed bool
}

// Bounds are a confidence interval's.
type Bounds struct{ Low, High float64 }

// Repeats collects the runs of one point at one concurrency level (the current attempt's, never a
// superseded one). A level counts only when every repeat of it recorded so far is ok and measured
// its output tok/s: a failed repeat says the server did not serve that load, so the level is not a
// measurement of the configuration (docs/schema.md, runs.status), and the ok repeats beside it do
// not stand in for it.
type Repeats struct {
	failed bool
	v      [numFigures][]float64
	// bounds are the counted repeats' output tok/s intervals; noBounds: some repeat had none.
	bounds   []Bounds
	noBounds bool
	missed   bool
}

// Add counts one run.
func (r *Repeats) Add(run RepeatRun) {
	r.missed = r.missed || run.Missed
	if !run.OK || run.Figures[OutputTokS] == nil || math.IsNaN(*run.Figures[OutputTokS]) {
		r.failed = true
		return
	}
	for f, x := range run.Figures {
		if x != nil && !math.IsNaN(*x) {
			r.v[f] = append(r.v[f], *x)
		}
	}
	if b := run.TokS; b != nil && b.Low <= b.High && !math.IsNaN(b.Low) && !math.IsNaN(b.High) {
		r.bounds = append(r.bounds, *b)
	} else {
		r.noBounds = true
	}
}

// Counts reports whether the level is a measurement: some repeat measured, none failed.
func (r *Repeats) Counts() bool { return r != nil && !r.failed && len(r.v[OutputTokS]) > 0 }

// Values are the values of f over the repeats that measured it, in the order added; nil when the
// level does not count.
func (r *Repeats) Values(f Figure) []float64 {
	if !r.Counts() {
		return nil
	}
	return r.v[f]
}

// Missed reports whether some repeat ran to its cap before reaching its precision target.
func (r *Repeats) Missed() bool { return r != nil && r.missed }

// Stat is f aggregated over the repeats (the zero Stat when the level does not count); output
// tok/s carries the repeats' confidence intervals when every repeat has one.
func (r *Repeats) Stat(f Figure) Stat {
	s := NewStat(r.Values(f))
	if f == OutputTokS && s.N > 0 && !r.noBounds && len(r.bounds) == s.N {
		s.CI = envelope(r.bounds)
	}
	return s
}

// Bounds of the repeats' intervals together: the lowest low and the highest high.
func envelope(bs []Bounds) *Bounds {
	out := bs[0]
	for _, b := range bs[1:] {
		out.Low, out.High = min(out.Low, b.Low), max(out.High, b.High)
	}
	return &out
}

// Stat summarises one figure over a level's repeats.
type Stat struct {
	N                int // number of values (0: none recorded)
	Median, Min, Max float64
	// CI is the confidence interval of the figure (output tok/s only): a single repeat's, or the
	// envelope of every repeat's; nil when some repeat had none.
	CI *Bounds
}

// NewStat is the median and range of v (v is not changed).
func NewStat(v []float64) Stat {
	if len(v) == 0 {
		return Stat{}
	}
	return Stat{N: len(v), Median: Median(v), Min: slices.Min(v), Max: slices.Max(v)}
}

// OK reports whether the figure was recorded at least once.
func (s Stat) OK() bool { return s.N > 0 }

// Spread is (max-min)/median, the relative run-to-run spread; 0 with fewer than two values.
func (s Stat) Spread() float64 {
	if s.N < 2 || s.Median == 0 {
		return 0
	}
	return (s.Max - s.Min) / s.Median
}

// Median is the median of v (the mean of the middle two for an even count); v is not changed.
func Median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Noise tells whether a winner's margin over a runner-up is outside run-to-run noise.
type Noise string

const (
	// NoiseClear: with repeats, the winner's slowest run beats the runner-up's fastest.
	NoiseClear Noise = "clear"
	// NoiseWithin: the ranges of the repeats overlap; the order may be chance.
	NoiseWithin Noise = "within noise"
	// NoiseUnknown: one repeat (or no runner-up): the noise is not measured.
	NoiseUnknown Noise = "unknown"
)

// NoiseOf is the verdict on a over b. With two repeats or more on both sides: clear when the
// slowest of a beats the fastest of b. Otherwise, with confidence intervals on both sides
// (precision-targeted levels, or any level with enough batches): clear when a's interval lies
// wholly above b's. Within noise otherwise; unknown when neither is measured (NoiseMeasured).
func NoiseOf(a, b Stat) Noise {
	switch {
	case a.N >= 2 && b.N >= 2:
		if a.Min > b.Max {
			return NoiseClear
		}
		return NoiseWithin
	case a.N >= 1 && b.N >= 1 && a.CI != nil && b.CI != nil:
		if a.CI.Low > b.CI.High {
			return NoiseClear
		}
		return NoiseWithin
	}
	return NoiseUnknown
}

// NoiseMeasured reports whether NoiseOf can judge a against b: repeats on both sides, or intervals.
func NoiseMeasured(a, b Stat) bool { return NoiseOf(a, b) != NoiseUnknown }

// ClearlyAbove is the "clear" rule for repeated measurements: the slowest of a beats the fastest
// of b.
func ClearlyAbove(a, b []float64) bool {
	return len(a) > 0 && len(b) > 0 && slices.Min(a) > slices.Max(b)
}
