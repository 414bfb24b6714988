package report

import (
	"fmt"
)

// IntervalWords is a cell's confidence interval of output tok/s as a relative half-width around its
// median ("±1.8%"), with "*" when a repeat ran to the cap before reaching workload.precision's
// target; "±?" when the level has no interval.
func IntervalWords(c *Cell) string {
	ci := c.TokS.CI
	if ci == nil || !(c.TokS.Median > 0) {
		return "±?"
	}
	half := max(c.TokS.Median-ci.Low, ci.High-c.TokS.Median) / c.TokS.Median
	s := fmt.Sprintf("±%.1f%%", 100*half)
	if c.PrecisionMissed {
		s += "*"
	}
	return s
}
