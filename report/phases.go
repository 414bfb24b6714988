package report

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/specsweep/specsweep/internal/argparse"
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
		Head: []string{"configuration", "tp", "repeat", "phase", "concurrency", "for", "output tok/s", "first quarter", "last quarter", "settled after", "TTFT p50 ms", "ITL p50 ms", "steps"},
		Num:  []bool{false, true, true, true, true, false, true, true, true, true, true, true, false}, Wide: true}
	t.Note += " Settled after: the time from the phase's first request until its tok/s (a 3 s rolling mean) " +
		"stays within 10% of the phase's steady figure (the median of its second half). Steps: what the server ran, " +
		"and for an adaptive server (--speculative-adaptive) each switch it logged during the phase (\"Adaptive spec params updated\")."
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
		steps := startSteps(p)
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
			first, last, settled := "-", "-", "-"
			ser := p.series(round, i%len(s.PhasePlan)+1)
			ser.TokS = withinPhase(ser, ph.For)
			if len(ser.TokS) >= 4 {
				q := len(ser.TokS) / 4
				first, last = fmt.Sprintf("%.1f", meanOf(ser.TokS[:q])), fmt.Sprintf("%.1f", meanOf(ser.TokS[len(ser.TokS)-q:]))
			}
			if d, ok := SettleTime(ser.TokS, time.Duration(ser.WidthMS)*time.Millisecond); ok {
				settled = fmt.Sprintf("%.0f s", d.Seconds())
			}
			var stepWords string
			stepWords, steps = stepsWords(p, steps, ser)
			tok := f(r.tokS, 1)
			if r.status != store.RunOK {
				tok = string(r.status)
			}
			t.Rows = append(t.Rows, []string{p.Label(), fmt.Sprint(p.TP), fmt.Sprint(round), fmt.Sprint(i%len(s.PhasePlan) + 1),
				fmt.Sprint(ph.Concurrency), ph.For.String(), tok, first, last, settled, f(r.ttft50, 1), f(r.itl50, 2), stepWords})
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

// withinPhase is a phase's series up to the phase's end: the intervals that begin within its time
// (after it, the requests in flight drain and the figure falls to nothing: not the load's).
func withinPhase(ser store.PhaseSeries, d time.Duration) []float64 {
	if ser.WidthMS <= 0 || d <= 0 {
		return ser.TokS
	}
	n := int((d.Milliseconds() + ser.WidthMS - 1) / ser.WidthMS)
	if n < len(ser.TokS) {
		return ser.TokS[:n]
	}
	return ser.TokS
}

// SettleTime is how long a phase's tok/s took to settle: the start of the first interval from which
// the rolling mean of 3 intervals never again falls below 90% of the phase's steady figure (the median
// of its second half). The series is the phase's own (withinPhase); its last interval, partly after
// the phase's end, is left out. False when the series is too short (under 6 intervals) or the steady
// figure is not positive.
func SettleTime(tokS []float64, width time.Duration) (time.Duration, bool) {
	if len(tokS) > 2 {
		tokS = tokS[:len(tokS)-1]
	}
	const window = 3
	if len(tokS) < 2*window || width <= 0 {
		return 0, false
	}
	half := slices.Clone(tokS[len(tokS)/2:])
	slices.Sort(half)
	steady := half[len(half)/2]
	if len(half)%2 == 0 {
		steady = (half[len(half)/2-1] + half[len(half)/2]) / 2
	}
	if steady <= 0 {
		return 0, false
	}
	settled := 0
	for i := 0; i+window <= len(tokS); i++ {
		if meanOf(tokS[i:i+window]) < 0.9*steady {
			settled = i + 1
		}
	}
	return time.Duration(settled) * width, true
}

// isAdaptive: the point's server changes its steps at run time (--speculative-adaptive).
func isAdaptive(p *Point) bool {
	return argparse.Has(p.Argv, "--speculative-adaptive")
}

// startSteps is the steps a point's server starts with: its num_steps (an adaptive server's initial
// steps), -1 for a baseline or when unknown.
func startSteps(p *Point) int {
	if p.Baseline || p.NumSteps == 0 {
		return -1
	}
	return p.NumSteps
}

// stepsWords says which steps a phase ran, from the steps it started at and the switches the server
// logged: "7", "3 → 5 → 7" (at most 6 shown), "base" for a baseline; and the steps it ended at. The
// worker's switches (what ran) are read where the log has them, else the policy's decisions.
func stepsWords(p *Point, from int, ser store.PhaseSeries) (string, int) {
	if p.Baseline {
		return "base", from
	}
	if !isAdaptive(p) {
		if from < 0 {
			return "-", from
		}
		return fmt.Sprint(from), from
	}
	var runtime, policy []store.StepSwitch
	for _, x := range ser.Switches {
		if x.Runtime {
			runtime = append(runtime, x)
		} else {
			policy = append(policy, x)
		}
	}
	sw, noun := policy, "policy update"
	if len(runtime) > 0 {
		sw, noun = runtime, "switch"
	}
	seq := []string{}
	if len(sw) > 0 {
		from = sw[0].From
	}
	if from >= 0 {
		seq = append(seq, fmt.Sprint(from))
	}
	for _, x := range sw {
		seq = append(seq, fmt.Sprint(x.To))
		from = x.To
	}
	if len(seq) == 0 {
		return "-", from
	}
	const show = 6
	words := strings.Join(seq, " → ")
	if len(seq) > show {
		words = strings.Join(seq[:3], " → ") + " → … → " + strings.Join(seq[len(seq)-2:], " → ")
	}
	n := len(sw)
	if ser.SwitchCount > len(ser.Switches) {
		n += ser.SwitchCount - len(ser.Switches) // those not kept: counted, not told apart
	}
	if n > 0 {
		words += fmt.Sprintf(" (%d %s%s)", n, noun, map[bool]string{true: "", false: "s"}[n == 1])
		if noun == "switch" && n != 1 {
			words = strings.TrimSuffix(words, "switchs)") + "switches)"
		}
	}
	return words, from
}
