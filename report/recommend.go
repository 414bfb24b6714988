package report

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/specsweep/specsweep/sweep"
)

// The recommendation (issue 28; docs/report.md, "Recommendation"): a report answers which
// configuration wins at each concurrency, but a server runs one configuration. Recommend picks the
// one that serves a traffic mix best: the highest time-weighted mean of output tok/s, Σ share_c ×
// tok/s_c, each level's figure the one aggregation's median over repeats (Cell.TokS). Only the
// configurations measured at every level of the mix compete; one whose output check failed never
// does, nor one that breaks an SLO at some level of the mix.

// RecommendOptions say what to recommend for.
type RecommendOptions struct {
	// Traffic is the mix; nil: equal shares over the sweep's measured levels.
	Traffic Traffic
	// SLOs every level of the mix must meet; none: no latency target.
	SLOs []SLO
	// TP restricts the competition to one tp; 0: every tp competes.
	TP int
}

// Recommendation is the one configuration for a traffic mix and how it stands.
type Recommendation struct {
	Sweep   *Sweep
	Traffic Traffic
	// DefaultTraffic: the mix is the default (equal shares over the measured levels).
	DefaultTraffic bool
	SLOs           []SLO
	TP             int // the options' (0: every tp competed)
	// Candidates is how many configurations competed.
	Candidates int
	// Winner has the highest mix; RunnerUp the next (nil when one competed); Baseline is the
	// first baseline at the winner's tp measured at every level of the mix, SLOs or not (nil when
	// there is none, or the winner is a baseline).
	Winner, RunnerUp, Baseline *Choice
	// OverBaseline and OverRunnerUp are the winner's gains over the mix (nil without them).
	OverBaseline, OverRunnerUp *Gain
	// Levels are the winner's standing at each level of the mix, in the mix's order.
	Levels []Standing
	// Dropped are the configurations measured at some level of the mix that did not compete, in
	// plan order, with why; Unmeasured counts the points with no figure at any level of the mix
	// (failed, pruned or not run yet).
	Dropped    []Dropped
	Unmeasured int
	// Next is the next sweep to run when the winner sits at the edge of the swept range at some
	// level of the mix (nil otherwise).
	Next *NextSweep
	// Deploy is how to run the winner.
	Deploy Deploy
}

// Choice is one configuration over the mix.
type Choice struct {
	Point *Point
	// TokS is the mix: Σ share_c × the median output tok/s at c.
	TokS float64
	// Repeats is the mix of each repeat (repeat i at every level), for the noise verdict.
	Repeats []float64
	// Cells are its cells at the mix's levels, in the mix's order.
	Cells []*Cell
}

// Gain is how much more a winner's mix is than another's.
type Gain struct {
	// Pct is 100 × (winner / other - 1).
	Pct float64
	// Noise is sweep.NoiseOf on the repeats' mixes: clear, within noise, or unknown with one
	// repeat.
	Noise Noise
}

// Standing is the winner at one level of the mix.
type Standing struct {
	Concurrency int
	Share       float64
	Cell        *Cell // the winner's
	// Best is the competing configuration with the highest median there (the winner's own cell
	// when it is the best); Pct is 100 × (winner / best - 1), 0 or below, and Noise the verdict
	// on the best over the winner ("" when the winner is the best).
	Best  *Cell
	Pct   float64
	Noise Noise
}

// IsBest reports whether the winner is the best competing configuration at the level.
func (st Standing) IsBest() bool { return st.Best == st.Cell }

// Dropped is a configuration that did not compete, and why.
type Dropped struct {
	Point  *Point
	Reason string
}

// Recommend picks the configuration of s that serves opt's traffic mix best (see the top of this
// file). It fails, in words, when the sweep has no measured level, the mix names a level the
// sweep did not measure (the measured ones named), tp is not swept, no configuration was measured
// at every level of the mix, or none meets the SLOs (the best value seen per SLO named).
func Recommend(s *Sweep, opt RecommendOptions) (*Recommendation, error) {
	if s == nil || len(s.Levels) == 0 {
		return nil, errors.New("no level of the sweep is measured yet (a level counts when every repeat of it is ok): nothing to recommend")
	}
	r := &Recommendation{Sweep: s, Traffic: opt.Traffic, SLOs: opt.SLOs, TP: opt.TP}
	if len(r.Traffic) == 0 {
		r.Traffic, r.DefaultTraffic = EqualTraffic(s.Levels), true
	}
	sum := 0.0
	for _, sh := range r.Traffic {
		sum += sh.Share
	}
	if math.Abs(sum-1) > ShareTolerance { // a mix ParseTraffic did not read
		return nil, fmt.Errorf("the mix %s: the shares sum to %g, not 1", r.Traffic, sum)
	}
	var unmeasured []string
	for _, sh := range r.Traffic {
		if !slices.Contains(s.Levels, sh.Concurrency) {
			unmeasured = append(unmeasured, strconv.Itoa(sh.Concurrency))
		}
	}
	if len(unmeasured) > 0 {
		return nil, fmt.Errorf("the mix names concurrency %s, which the sweep did not measure (measured levels: %s)",
			strings.Join(unmeasured, ", "), joinInts(s.Levels))
	}
	if opt.TP != 0 && !slices.Contains(s.TPs, opt.TP) {
		return nil, fmt.Errorf("the sweep has no point at tp %d (its tp: %s)", opt.TP, joinInts(s.TPs))
	}

	var candidates, measured []*Choice // measured: at every level, output check not failed
	mismatched := 0
	for _, p := range s.Points {
		if opt.TP != 0 && p.TP != opt.TP {
			continue
		}
		ch, missing := choiceOf(p, r.Traffic)
		switch {
		case len(missing) == len(r.Traffic):
			r.Unmeasured++
			continue
		case len(missing) > 0:
			r.Dropped = append(r.Dropped, Dropped{p, fmt.Sprintf("no figure at c=%s (a repeat failed there, or it has not run)", joinInts(missing))})
			continue
		case p.Mismatch():
			mismatched++
			r.Dropped = append(r.Dropped, Dropped{p, "output check MISMATCH: it does not answer as the baseline does (not lossless)"})
			continue
		}
		measured = append(measured, ch)
		if broken := sloBreaks(ch, opt.SLOs); len(broken) > 0 {
			r.Dropped = append(r.Dropped, Dropped{p, strings.Join(broken, "; ")})
			continue
		}
		candidates = append(candidates, ch)
	}
	if len(candidates) == 0 {
		return nil, noCandidate(s, r, measured, mismatched)
	}
	// The highest mix wins; a tie keeps the plan's order.
	sort.SliceStable(candidates, func(i, j int) bool { return candidates[i].TokS > candidates[j].TokS })
	r.Candidates = len(candidates)
	r.Winner = candidates[0]
	if len(candidates) > 1 {
		r.RunnerUp = candidates[1]
		r.OverRunnerUp = gainOf(r.Winner, r.RunnerUp)
	}
	if !r.Winner.Point.Baseline {
		for _, ch := range measured {
			if p := ch.Point; p.Baseline && p.TP == r.Winner.Point.TP {
				r.Baseline = ch
				r.OverBaseline = gainOf(r.Winner, ch)
				break
			}
		}
		if r.Baseline == nil {
			// A baseline broken by an SLO is still the reference of the gain.
			for _, p := range s.Points {
				if ch, missing := choiceOf(p, r.Traffic); p.Baseline && p.TP == r.Winner.Point.TP && len(missing) == 0 {
					r.Baseline = ch
					r.OverBaseline = gainOf(r.Winner, ch)
					break
				}
			}
		}
	}
	for i, sh := range r.Traffic {
		st := Standing{Concurrency: sh.Concurrency, Share: sh.Share, Cell: r.Winner.Cells[i], Best: r.Winner.Cells[i]}
		for _, ch := range candidates {
			if ch.Cells[i].TokS.Median > st.Best.TokS.Median {
				st.Best = ch.Cells[i]
			}
		}
		if !st.IsBest() && st.Best.TokS.Median > 0 {
			st.Pct = 100 * (st.Cell.TokS.Median/st.Best.TokS.Median - 1)
			st.Noise = sweep.NoiseOf(st.Best.TokS, st.Cell.TokS)
		}
		r.Levels = append(r.Levels, st)
	}
	r.Next = nextSweep(s, r)
	r.Deploy = deployOf(s, r.Winner.Point)
	return r, nil
}

// choiceOf is p over the mix, and the mix's levels at which p has no figure.
func choiceOf(p *Point, t Traffic) (*Choice, []int) {
	ch := &Choice{Point: p}
	var missing []int
	n := -1 // the repeats every level has
	for _, sh := range t {
		c := p.Cells[sh.Concurrency]
		if c == nil || !c.TokS.OK() {
			missing = append(missing, sh.Concurrency)
			continue
		}
		ch.Cells = append(ch.Cells, c)
		ch.TokS += sh.Share * c.TokS.Median
		if n < 0 || len(c.TokSByRepeat) < n {
			n = len(c.TokSByRepeat)
		}
	}
	if len(missing) > 0 {
		return nil, missing
	}
	// Each repeat mixed over the levels (repeat i of each level), then the noise verdict on those.
	for i := 0; i < n; i++ {
		v := 0.0
		for j, sh := range t {
			v += sh.Share * ch.Cells[j].TokSByRepeat[i]
		}
		ch.Repeats = append(ch.Repeats, v)
	}
	return ch, nil
}

// sloBreaks words each SLO ch breaks at some level of its mix (a figure not recorded breaks it:
// nothing says it is met).
func sloBreaks(ch *Choice, slos []SLO) []string {
	var out []string
	for _, o := range slos {
		limit := float64(o.Max) / float64(time.Millisecond)
		var over, unknown []string
		for _, c := range ch.Cells {
			v := sloValue(c, o.Metric)
			switch {
			case !v.OK():
				unknown = append(unknown, strconv.Itoa(c.Concurrency))
			case v.Median > limit:
				over = append(over, fmt.Sprintf("%s at c=%d", fmtMs(v.Median), c.Concurrency))
			}
		}
		if len(over) > 0 {
			out = append(out, fmt.Sprintf("%s %s, above %s", o.Metric, strings.Join(over, ", "), o.Max))
		}
		if len(unknown) > 0 {
			out = append(out, fmt.Sprintf("%s not recorded at c=%s", o.Metric, strings.Join(unknown, ", ")))
		}
	}
	return out
}

// gainOf is a over b.
func gainOf(a, b *Choice) *Gain {
	g := &Gain{Noise: sweep.NoiseOf(sweep.NewStat(a.Repeats), sweep.NewStat(b.Repeats))}
	if b.TokS > 0 {
		g.Pct = 100 * (a.TokS/b.TokS - 1)
	}
	return g
}

// noCandidate words why no configuration competed: none measured at every level of the mix, every
// one measured mismatching, or none meeting the SLOs (with the best value seen per SLO: the lowest
// worst-level value among the configurations measured at every level).
func noCandidate(s *Sweep, r *Recommendation, measured []*Choice, mismatched int) error {
	tp := ""
	if r.TP != 0 {
		tp = fmt.Sprintf(" at tp %d", r.TP)
	}
	if len(measured) == 0 {
		if mismatched > 0 {
			return fmt.Errorf("every configuration measured at every level of the mix%s (%d) failed its output check: none is lossless", tp, mismatched)
		}
		var per []string
		for _, sh := range r.Traffic {
			n := 0
			for _, p := range s.Points {
				if (r.TP == 0 || p.TP == r.TP) && p.Cells[sh.Concurrency] != nil && !p.Mismatch() {
					n++
				}
			}
			per = append(per, fmt.Sprintf("c=%d: %d", sh.Concurrency, n))
		}
		return fmt.Errorf("no configuration%s was measured at every level of the mix (c=%s); configurations measured at each level: %s",
			tp, joinInts(r.Traffic.Levels()), strings.Join(per, ", "))
	}
	var best []string
	for _, o := range r.SLOs {
		seen, worstAt := -1.0, 0
		var who *Point
		for _, ch := range measured {
			worst, at, ok := 0.0, 0, true
			for _, c := range ch.Cells {
				v := sloValue(c, o.Metric)
				if !v.OK() {
					ok = false
					break
				}
				if v.Median > worst {
					worst, at = v.Median, c.Concurrency
				}
			}
			if ok && (who == nil || worst < seen) {
				seen, worstAt, who = worst, at, ch.Point
			}
		}
		if who == nil {
			best = append(best, fmt.Sprintf("%s (limit %s): not recorded at every level for any", o.Metric, o.Max))
			continue
		}
		best = append(best, fmt.Sprintf("%s (limit %s): %s, %s tp=%d at c=%d", o.Metric, o.Max, fmtMs(seen), who.Label(), who.TP, worstAt))
	}
	return fmt.Errorf("no configuration%s meets the SLOs %s at every level of the mix (c=%s); the best seen, the lowest worst level among the %d configuration(s) measured at every level: %s",
		tp, sloList(r.SLOs), joinInts(r.Traffic.Levels()), len(measured), strings.Join(best, "; "))
}

// sloList is "ttft_p99<=2s, itl_p50<=30ms".
func sloList(slos []SLO) string {
	out := make([]string, len(slos))
	for i, o := range slos {
		out[i] = o.Metric + "<=" + o.Max.String()
	}
	return strings.Join(out, ", ")
}

func joinInts(v []int) string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = strconv.Itoa(x)
	}
	return strings.Join(out, ", ")
}
