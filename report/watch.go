package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// Watching a deployed configuration (issue 29; docs/cli.md "watch"): a watch sweep runs the applied
// configuration (method sweep.WatchMethod) and the baseline at the mix's levels; each of its figures
// is compared with the figure the deployment was decided on (the reference point of the decision's
// sweep at that level), and one that fell beyond the reference's noise and the watch's tolerance is a
// regression.

// Regression measures: the store's (one vocabulary for the events, the metrics and the words).
const (
	MeasureTokS    = store.MeasureTokS
	MeasureSpeedup = store.MeasureSpeedup
	MeasureAccept  = store.MeasureAccept
	MeasureOutput  = store.MeasureOutput
)

// Regression is one figure of the watch that fell below what the deployment was decided on.
type Regression struct {
	Measure     string  `json:"measure"`
	Concurrency int     `json:"concurrency,omitempty"` // 0 for the output check
	Before      float64 `json:"before,omitempty"`      // the decision's figure (its median)
	Floor       float64 `json:"floor,omitempty"`       // the lowest the watch may measure: the reference's lowest repeat less the tolerance
	After       float64 `json:"after,omitempty"`       // the watch's figure (its median)
	// EngineBefore and EngineAfter are the engine versions of the reference's and the watch's servers
	// ("" when not recorded).
	EngineBefore string `json:"engine_before,omitempty"`
	EngineAfter  string `json:"engine_after,omitempty"`
	Detail       string `json:"detail,omitempty"` // the output check's words
}

// Words says the regression in a line: "tok_s at c=16 fell from 1502.3 to 611.0 (floor 1341.2), SGLang 0.5.9 -> 0.5.10".
func (r Regression) Words() string {
	var b strings.Builder
	if r.Measure == MeasureOutput {
		fmt.Fprintf(&b, "output check mismatched: %s", r.Detail)
	} else {
		fmt.Fprintf(&b, "%s at c=%d fell from %.2f to %.2f (floor %.2f)", r.Measure, r.Concurrency, r.Before, r.After, r.Floor)
	}
	if r.EngineBefore != r.EngineAfter && r.EngineBefore+r.EngineAfter != "" {
		fmt.Fprintf(&b, ", SGLang %s -> %s", orUnknown(r.EngineBefore), orUnknown(r.EngineAfter))
	} else if r.EngineAfter != "" {
		fmt.Fprintf(&b, ", SGLang %s (unchanged)", r.EngineAfter)
	}
	return b.String()
}

func orUnknown(v string) string {
	if v == "" {
		return "unknown"
	}
	return v
}

// WatchResult is a watch sweep against its decision.
type WatchResult struct {
	Applied     *Point // the watch's applied point (nil: it measured nothing)
	Regressions []Regression
	// Checked are the measures compared at each level ("tok_s@16"); a level the watch did not measure
	// is Missing.
	Checked, Missing []string
	EngineBefore     string
	EngineAfter      string
}

// Regressions compares a watch sweep (spec.Watch set) with the sweep its deployment was decided on.
func Regressions(decision, watch *Sweep, w *sweep.Watch) WatchResult {
	var res WatchResult
	for _, p := range watch.Points {
		if p.Method == sweep.WatchMethod {
			res.Applied = p
			break
		}
	}
	byID := map[string]*Point{}
	for _, p := range decision.Points {
		byID[p.ID] = p
	}
	if res.Applied != nil {
		res.EngineAfter = engineOf(res.Applied)
	}
	levels := make([]int, 0, len(w.Reference))
	for c := range w.Reference {
		levels = append(levels, c)
	}
	slices.Sort(levels)
	for _, c := range levels {
		ref := byID[w.Reference[c]]
		if ref == nil {
			res.Missing = append(res.Missing, fmt.Sprintf("reference %s@%d (not in sweep %d)", w.Reference[c], c, w.SweepID))
			continue
		}
		if res.EngineBefore == "" {
			res.EngineBefore = engineOf(ref)
		}
		var got *Cell
		if res.Applied != nil {
			got = res.Applied.Cells[c]
		}
		was := ref.Cells[c]
		if got == nil || was == nil {
			res.Missing = append(res.Missing, fmt.Sprintf("c=%d", c))
			continue
		}
		for _, m := range []struct {
			name     string
			was, got Stat
		}{{MeasureTokS, was.TokS, got.TokS}, {MeasureSpeedup, was.Speedup, got.Speedup}, {MeasureAccept, was.Accept, got.Accept}} {
			if !m.was.OK() || !m.got.OK() {
				continue
			}
			res.Checked = append(res.Checked, fmt.Sprintf("%s@%d", m.name, c))
			floor := min(m.was.Min, m.was.Median) * (1 - w.Tolerance)
			if m.got.Median < floor {
				res.Regressions = append(res.Regressions, Regression{Measure: m.name, Concurrency: c, Before: m.was.Median, Floor: floor,
					After: m.got.Median, EngineBefore: engineOf(ref), EngineAfter: res.EngineAfter})
			}
		}
	}
	if res.Applied != nil && res.Applied.OutputCheck == store.OutputCheckMismatch {
		detail := "against the watch's baseline"
		if res.Applied.OutputAgreement != nil {
			detail = fmt.Sprintf("agreement %.2f with the watch's baseline", *res.Applied.OutputAgreement)
		}
		res.Regressions = append(res.Regressions, Regression{Measure: MeasureOutput, Detail: detail,
			EngineBefore: res.EngineBefore, EngineAfter: res.EngineAfter})
	}
	return res
}

// engineOf is the engine version a point's server reported ("" when not recorded).
func engineOf(p *Point) string {
	if p.Provenance == nil {
		return ""
	}
	return p.Provenance.EngineVer
}
