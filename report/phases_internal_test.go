package report

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// TestSettleTime: a phase settles where its rolling mean last rose past 90% of its steady figure;
// a series too short, or without a positive figure, has no settling time.
func TestSettleTime(t *testing.T) {
	for _, c := range []struct {
		tokS []float64
		want string
	}{
		{[]float64{100, 100, 100, 100, 100, 100, 100, 5}, "0s"},
		// Slow for three intervals, then steady: the windows starting at 0..2 hold a slow one.
		{[]float64{20, 30, 40, 100, 101, 99, 100, 100, 100, 100, 3}, "3s"},
		// A dip late in the phase counts: settling is never falling again.
		{[]float64{100, 100, 100, 100, 100, 10, 100, 100, 100, 100, 100, 100, 3}, "6s"},
		{[]float64{100, 100, 100, 100}, "none"},
		{[]float64{0, 0, 0, 0, 0, 0, 0, 0}, "none"},
	} {
		got := "none"
		if d, ok := SettleTime(c.tokS, time.Second); ok {
			got = d.String()
		}
		if got != c.want {
			t.Errorf("SettleTime(%v) = %s, want %s", c.tokS, got, c.want)
		}
	}
}

// TestPhaseFiguresLeaveOutTheDrain: the phases table's quarters and settling read the phase's own
// intervals, not the drain of its requests in flight after its end (which fell to a tenth of the
// load's figure and made the last quarter of a steady phase read a fraction of its figure).
func TestPhaseFiguresLeaveOutTheDrain(t *testing.T) {
	tok := 1200.0
	p := &Point{Config: Config{Method: "baseline", Baseline: true, TP: 1},
		phaseRuns: map[phaseKey]phaseRun{{1, 1}: {tokS: &tok, status: store.RunOK}},
		Phases: []store.PhaseSeries{{Phase: 1, Of: 1, Repeat: 1, Concurrency: 1, Occurrence: 1, WidthMS: 1000,
			TokS: []float64{1199, 1201, 1200, 1198, 1202, 1200, 1199, 1201, 120, 40}}}}
	s := &Sweep{PhasePlan: []sweep.Phase{{Concurrency: 1, For: 8 * time.Second}}, Points: []*Point{p}}
	tb := phasesTable(s)
	if len(tb.Rows) != 1 {
		t.Fatalf("rows %v", tb.Rows)
	}
	row := strings.Join(tb.Rows[0], " | ")
	if !strings.Contains(row, "| 8s | 1200.0 | 1200.0 | 1200.0 | 0 s |") {
		t.Errorf("row %q: want the first and last quarter of the phase's own six intervals, settled at 0 s", row)
	}
}

// TestStepsWords: a fixed point's steps, a baseline's, and an adaptive server's switches in order.
func TestStepsWords(t *testing.T) {
	fixed := &Point{Config: Config{Method: "eagle3", NumSteps: 3}, Argv: []string{"--speculative-algorithm", "EAGLE3"}}
	adaptive := &Point{Config: Config{Method: "a", NumSteps: 7}, Argv: []string{"--speculative-algorithm", "EAGLE3", "--speculative-adaptive"}}
	sw := func(runtime bool, pairs ...int) store.PhaseSeries {
		var out store.PhaseSeries
		for i := 0; i+1 < len(pairs); i += 2 {
			out.Switches = append(out.Switches, store.StepSwitch{Runtime: runtime, From: pairs[i], To: pairs[i+1]})
		}
		out.SwitchCount = len(out.Switches)
		return out
	}
	routed := sw(true, 7, 0, 0, 7)
	routed.Switches = append(routed.Switches, store.StepSwitch{From: 7, To: 5}) // a policy update between: not what ran
	routed.SwitchCount = 900
	var got []string
	for _, c := range []struct {
		p    *Point
		from int
		sw   store.PhaseSeries
	}{
		{&Point{Config: Config{Baseline: true}}, -1, store.PhaseSeries{}},
		{fixed, startSteps(fixed), store.PhaseSeries{}},
		{adaptive, startSteps(adaptive), store.PhaseSeries{}},
		{adaptive, 7, sw(false, 7, 5, 5, 3)},
		{adaptive, 3, sw(false, 3, 5, 5, 7, 7, 5, 5, 7, 7, 5, 5, 7, 7, 8)},
		{adaptive, 7, sw(true, 7, 0)},
		{adaptive, 7, routed},
	} {
		w, end := stepsWords(c.p, c.from, c.sw)
		got = append(got, fmt.Sprintf("%s [%d]", w, end))
	}
	want := []string{"base [-1]", "3 [3]", "7 [7]", "7 → 5 → 3 (2 policy updates) [3]", "3 → 5 → 7 → … → 7 → 8 (7 policy updates) [8]",
		"7 → 0 (1 switch) [0]", "7 → 0 → 7 (899 switches) [7]"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("steps words:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
