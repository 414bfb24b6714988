package report

import (
	"fmt"
	"slices"
	"time"

	"github.com/specsweep/specsweep/store"
)

// Verification under shifting load (issue 28; docs/report.md, "Adaptive against fixed"): a sweep of
// phases that holds adaptive servers (--speculative-adaptive) beside fixed configurations compares
// each adaptive one, phase by phase, with the best fixed configuration of that phase, and over the
// whole run with the single best fixed configuration. `specsweep verify` writes such a sweep.

// VerifyTolerance is how far below a phase's best fixed configuration an adaptive server may be and
// still count as matching it (the 5 %).
const VerifyTolerance = 0.05

// PhaseVerdict compares an adaptive point with the best fixed configuration over one phase of the
// plan (Phase >= 1) or the whole run (Phase 0: time-weighted over the phases).
type PhaseVerdict struct {
	Phase       int
	Concurrency int // 0 for the whole run
	For         time.Duration
	TokS        float64 // the adaptive point's output tok/s (the median over repeats)
	Best        *Point  // the best fixed configuration (nil: none measured)
	BestTokS    float64
}

// Ratio is the adaptive point's figure over the best fixed one's.
func (v PhaseVerdict) Ratio() float64 { return v.TokS / v.BestTokS }

// Within reports whether the adaptive point is at most VerifyTolerance below the best fixed one.
func (v PhaseVerdict) Within() bool { return v.Ratio() >= 1-VerifyTolerance }

// AdaptiveCheck is one adaptive point against the fixed configurations of its tp.
type AdaptiveCheck struct {
	Point  *Point
	Phases []PhaseVerdict
	// Whole is the whole run against the single best fixed configuration over the whole run; its
	// Best is nil when no fixed configuration ran every phase.
	Whole PhaseVerdict
}

// AdaptiveChecks compares each adaptive point of a phased sweep with the fixed ones of its tp (nil
// unless the sweep has phases, an adaptive point and a fixed one with figures).
func AdaptiveChecks(s *Sweep) []AdaptiveCheck {
	if len(s.PhasePlan) == 0 {
		return nil
	}
	figures := map[*Point][]float64{}
	for _, p := range s.Points {
		if f := phaseFigures(s, p); f != nil {
			figures[p] = f
		}
	}
	var out []AdaptiveCheck
	for _, a := range s.Points {
		fa, ok := figures[a]
		if !ok || !isAdaptive(a) {
			continue
		}
		var fixed []*Point
		for _, p := range s.Points {
			if _, ok := figures[p]; ok && p.TP == a.TP && !isAdaptive(p) {
				fixed = append(fixed, p)
			}
		}
		if len(fixed) == 0 {
			continue
		}
		ch := AdaptiveCheck{Point: a}
		for i, ph := range s.PhasePlan {
			v := PhaseVerdict{Phase: i + 1, Concurrency: ph.Concurrency, For: ph.For, TokS: fa[i]}
			for _, p := range fixed {
				if x := figures[p][i]; x > 0 && x > v.BestTokS {
					v.Best, v.BestTokS = p, x
				}
			}
			ch.Phases = append(ch.Phases, v)
		}
		ch.Whole = PhaseVerdict{For: planLength(s), TokS: wholeRun(s, fa)}
		for _, p := range fixed {
			if x := wholeRun(s, figures[p]); x > ch.Whole.BestTokS {
				ch.Whole.Best, ch.Whole.BestTokS = p, x
			}
		}
		out = append(out, ch)
	}
	return out
}

// phaseFigures is a point's output tok/s in each phase of the plan, the median over the rounds
// measured (0 where no round measured it); nil when the point measured no phase.
func phaseFigures(s *Sweep, p *Point) []float64 {
	if len(p.phaseRuns) == 0 {
		return nil
	}
	count := map[int]int{}
	for _, ph := range s.PhasePlan {
		count[ph.Concurrency]++
	}
	per := make([][]float64, len(s.PhasePlan))
	seen := map[int]int{}
	for round := 0; ; round++ {
		found := false
		for i, ph := range s.PhasePlan {
			seen[ph.Concurrency]++
			r, ok := p.phaseRuns[phaseKey{ph.Concurrency, seen[ph.Concurrency]}]
			if !ok {
				continue
			}
			found = true
			if r.status == store.RunOK && r.tokS != nil {
				per[i] = append(per[i], *r.tokS)
			}
		}
		if !found {
			break
		}
	}
	out := make([]float64, len(per))
	for i, v := range per {
		if len(v) > 0 {
			slices.Sort(v)
			out[i] = v[len(v)/2]
			if len(v)%2 == 0 {
				out[i] = (v[len(v)/2-1] + v[len(v)/2]) / 2
			}
		}
	}
	return out
}

// wholeRun is the time-weighted output tok/s over the plan's phases; 0 when a phase has no figure.
func wholeRun(s *Sweep, fig []float64) float64 {
	var tok, secs float64
	for i, ph := range s.PhasePlan {
		if fig[i] <= 0 {
			return 0
		}
		tok += fig[i] * ph.For.Seconds()
		secs += ph.For.Seconds()
	}
	return tok / secs
}

func planLength(s *Sweep) time.Duration {
	var d time.Duration
	for _, ph := range s.PhasePlan {
		d += ph.For
	}
	return d
}

// VerdictWords says how an adaptive figure stands against the best fixed one.
func VerdictWords(v PhaseVerdict) string {
	switch r := v.Ratio(); {
	case v.Best == nil || v.TokS <= 0:
		return "not measured"
	case r >= 1:
		return fmt.Sprintf("ahead by %.1f%%", (r-1)*100)
	case v.Within():
		return fmt.Sprintf("within %.0f%% (%.1f%% below)", VerifyTolerance*100, (1-r)*100)
	default:
		return fmt.Sprintf("%.1f%% below", (1-r)*100)
	}
}

// adaptiveTable is "Adaptive against fixed configurations": each adaptive point's phases and whole
// run against the best fixed configuration; no rows unless AdaptiveChecks finds some.
func adaptiveTable(s *Sweep) Table {
	t := Table{Title: "Adaptive against fixed configurations",
		Note: fmt.Sprintf("Each adaptive server (--speculative-adaptive) against the best fixed configuration of the same tp in each phase, "+
			"and over the whole run (output tok/s weighted by each phase's time) against the single best fixed configuration. "+
			"Within %.0f%%: the adaptive server followed the load as well as the best fixed choice for that phase.", VerifyTolerance*100),
		Head: []string{"adaptive configuration", "tp", "phase", "concurrency", "for", "output tok/s", "best fixed", "its tok/s", "adaptive / best", "verdict"},
		Num:  []bool{false, true, true, true, false, true, false, true, true, false}, Wide: true}
	row := func(p *Point, phase, conc string, v PhaseVerdict) {
		best, bestTok, ratio := "-", "-", "-"
		if v.Best != nil {
			best, bestTok = v.Best.Label(), fmt.Sprintf("%.1f", v.BestTokS)
			if v.TokS > 0 {
				ratio = fmt.Sprintf("%.3f", v.Ratio())
			}
		}
		tok := "-"
		if v.TokS > 0 {
			tok = fmt.Sprintf("%.1f", v.TokS)
		}
		t.Rows = append(t.Rows, []string{p.Label(), fmt.Sprint(p.TP), phase, conc, v.For.String(), tok, best, bestTok, ratio, VerdictWords(v)})
	}
	for _, ch := range AdaptiveChecks(s) {
		for _, v := range ch.Phases {
			row(ch.Point, fmt.Sprint(v.Phase), fmt.Sprint(v.Concurrency), v)
		}
		row(ch.Point, "whole run", "-", ch.Whole)
	}
	return t
}
