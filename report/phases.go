package report

import (
	"context"
	"fmt"

	"github.com/specsweep/specsweep/store"
)

// Phases (issue 28; docs/spec.md, "phases"): a sweep whose load shifts over time records a run per
// phase, numbered by its concurrency's occurrence, and a phase event with its tok/s over time. The
// report lists each point's phases in order with their figures.

// phaseRun is what the phases table reads of one run.
type phaseRun struct {
	tokS, ttft50, itl50 *float64
	status              store.RunStatus
}

// phaseKey is a run of a phased point: its concurrency and repeat (the occurrence).
type phaseKey struct{ concurrency, occurrence int }

// setPhases reads the phase events of a phased sweep's points, in order.
func setPhases(ctx context.Context, db *store.DB, sweepID int64, byID map[string]*Point) error {
	evs, err := db.Events(ctx, sweepID, "")
	if err != nil {
		return err
	}
	for _, e := range evs {
		if p := byID[e.PointID]; p != nil {
			if ph, ok := e.PhaseSeries(); ok {
				p.Phases = append(p.Phases, ph)
			}
		}
	}
	return nil
}

// addPhaseRun keeps a phased point's run.
func (p *Point) addPhaseRun(r *store.RunSummary) {
	if r.Status == store.RunSuperseded {
		return
	}
	if p.phaseRuns == nil {
		p.phaseRuns = map[phaseKey]phaseRun{}
	}
	p.phaseRuns[phaseKey{r.Concurrency, r.Repeat}] = phaseRun{tokS: r.OutputTokS, ttft50: r.TTFTP50Ms, itl50: r.ITLP50Ms, status: r.Status}
}

// phasesTable is "Phases": each point's phases in the order they ran, with their figures; no rows
// unless the sweep's workload has phases.
func phasesTable(s *Sweep) Table {
	t := Table{Title: "Phases", Note: "Each phase held its concurrency for its time, back to back on the same server; output tok/s over the phase, " +
		"and over its first and last quarter (how the server followed the shift).",
		Head: []string{"configuration", "tp", "repeat", "phase", "concurrency", "for", "output tok/s", "first quarter", "last quarter", "TTFT p50 ms", "ITL p50 ms"},
		Num:  []bool{false, true, true, true, true, false, true, true, true, true, true}, Wide: true}
	if len(s.PhasePlan) == 0 {
		return t
	}
	f := func(v *float64, digits int) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.*f", digits, *v)
	}
	for _, p := range s.Points {
		if len(p.phaseRuns) == 0 {
			continue
		}
		seen := map[int]int{}
		round := 1
		for i := 0; ; i++ {
			ph := s.PhasePlan[i%len(s.PhasePlan)]
			if i > 0 && i%len(s.PhasePlan) == 0 {
				round++
			}
			seen[ph.Concurrency]++
			r, ok := p.phaseRuns[phaseKey{ph.Concurrency, seen[ph.Concurrency]}]
			if !ok {
				break
			}
			first, last := "-", "-"
			if ser := p.series(round, i%len(s.PhasePlan)+1); len(ser.TokS) >= 4 {
				q := len(ser.TokS) / 4
				first, last = fmt.Sprintf("%.1f", meanOf(ser.TokS[:q])), fmt.Sprintf("%.1f", meanOf(ser.TokS[len(ser.TokS)-q:]))
			}
			tok := f(r.tokS, 1)
			if r.status != store.RunOK {
				tok = string(r.status)
			}
			t.Rows = append(t.Rows, []string{p.Label(), fmt.Sprint(p.TP), fmt.Sprint(round), fmt.Sprint(i%len(s.PhasePlan) + 1),
				fmt.Sprint(ph.Concurrency), ph.For.String(), tok, first, last, f(r.ttft50, 1), f(r.itl50, 2)})
		}
	}
	return t
}

// series is the recorded tok/s over time of a phase of a repeat (empty when none was recorded).
func (p *Point) series(round, phase int) store.PhaseSeries {
	for _, ph := range p.Phases {
		if ph.Repeat == round && ph.Phase == phase {
			return ph
		}
	}
	return store.PhaseSeries{}
}

func meanOf(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
