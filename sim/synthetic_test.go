package sim

import (
	"fmt"
	"strings"
	"testing"
)

// throughputCurve is output tok/s of an EAGLE-3 chain (topk 1) at TP tp for
// num_steps 1..10 at concurrency c, as bench/sim_speed computes it: the
// scheduler in virtual time, closed loop, 1024-token prompts, 512 tokens out.
func throughputCurve(t testing.TB, p *Profile, tp, c int) []float64 {
	t.Helper()
	out := make([]float64, 10)
	for k := 1; k <= 10; k++ {
		argv := eagle3(k)
		argv[1] = fmt.Sprint(tp)
		m := profileModel(t, p, argv...)
		if m.Plan.OOM != "" {
			t.Fatalf("%s steps %d: OOM %s", p.Name, k, m.Plan.OOM)
		}
		out[k-1] = Simulate(m, c, max(4*c, 8), 1024, 512, 1).OutputTokS
	}
	return out
}

func curveString(c []float64) string {
	var b strings.Builder
	for _, v := range c {
		fmt.Fprintf(&b, " %5.0f", v)
	}
	return b.String()
}

func argmax(c []float64) int {
	best := 0
	for i, v := range c {
		if v > c[best] {
			best = i
		}
	}
	return best + 1 // num_steps
}

// The three synthetic profiles of the search benchmarks have the shapes
// their names claim at concurrency 1 (EAGLE-3, topk 1, TP 4).
func TestSyntheticProfileShapes(t *testing.T) {
	t.Logf("output tok/s, EAGLE3 topk 1, TP 4, num_steps 1..10")
	for _, tc := range []struct {
		name  string
		check func(c []float64) string
	}{
		{"early-plateau", func(c []float64) string {
			peak := c[argmax(c)-1]
			if k := argmax(c); k < 2 || k > 3 {
				return fmt.Sprintf("peak at num_steps %d, want 2-3", k)
			}
			for k := 4; k <= 10; k++ {
				if c[k-1] > c[k-2]*1.005 {
					return fmt.Sprintf("rises again at num_steps %d", k)
				}
			}
			if c[3] < 0.9*peak || c[9] > 0.8*peak {
				return "want a plateau at 4 (within 10% of the peak) and a fall by 10 (below 80%)"
			}
			return ""
		}},
		{"late-peak", func(c []float64) string {
			if k := argmax(c); k < 8 || k > 9 {
				return fmt.Sprintf("peak at num_steps %d, want 8-9", k)
			}
			for k := 2; k <= 8; k++ {
				if c[k-1] <= c[k-2] {
					return fmt.Sprintf("falls at num_steps %d before the peak", k)
				}
			}
			return ""
		}},
		{"second-rise", func(c []float64) string {
			if !(c[2] > c[1] && c[1] > c[0]) {
				return "does not rise to num_steps 3"
			}
			for k := 4; k <= 6; k++ {
				if c[k-1] >= 0.95*c[2] {
					return fmt.Sprintf("num_steps %d is not a dip (%.0f against %.0f at 3)", k, c[k-1], c[2])
				}
			}
			if k := argmax(c); k < 8 || k > 9 || c[k-1] < 1.2*c[2] {
				return fmt.Sprintf("peak at num_steps %d (%.0f), want 8-9 and well above num_steps 3 (%.0f)", k, c[k-1], c[2])
			}
			if !(c[6] > c[5] && c[7] > c[6]) {
				return "no second rise from 6 to 8"
			}
			return ""
		}},
	} {
		p := loadTestProfile(t, tc.name)
		c1 := throughputCurve(t, p, 4, 1)
		c64 := throughputCurve(t, p, 4, 64)
		t.Logf("%-14s c=1 %s", tc.name, curveString(c1))
		t.Logf("%-14s c=64%s", tc.name, curveString(c64))
		if msg := tc.check(c1); msg != "" {
			t.Errorf("%s at c=1: %s:%s", tc.name, msg, curveString(c1))
		}
	}
}
