package web

import (
	"sort"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/sweep"
)

// ResultsJSON is GET /api/sweeps/{id}/results: the report's tables (report.Live) and what the page
// draws beside them: how settled each level's figures are (Levels: a best per level stays
// provisional until every point planned at its tp is measured there or has ended) and the live
// chart's curves (Chart: output tok/s against num_steps, one curve per level).
type ResultsJSON struct {
	report.Live
	Levels []LevelJSON `json:"levels"`
	Chart  []CurveJSON `json:"chart"`
}

// LevelJSON is one tp and concurrency level of the best table: how many points are planned at its tp
// (pruned ones are not), how many of them have a figure at the level, and whether the figures there
// are final (every planned point measured at the level with all its repeats, or ended).
type LevelJSON struct {
	TP          int  `json:"tp"`
	Concurrency int  `json:"concurrency"`
	Planned     int  `json:"planned"`
	Measured    int  `json:"measured"`
	Final       bool `json:"final"`
}

// CurveJSON is one level's curve: the best median output tok/s at each num_steps (over the
// methods and tree shapes with that many steps), and the baseline's at the level (nil when it has
// none).
type CurveJSON struct {
	TP          int              `json:"tp"`
	Concurrency int              `json:"concurrency"`
	Points      []CurvePointJSON `json:"points"`
	Baseline    *float64         `json:"baseline"`
}

// CurvePointJSON is a curve's point: num_steps, the best median output tok/s there and the
// configuration that reached it.
type CurvePointJSON struct {
	NumSteps int     `json:"num_steps"`
	TokS     float64 `json:"tok_s"`
	Label    string  `json:"label"`
}

// ended reports whether a point's state is final for the figures: it runs no more (done, failed,
// cancelled, or pruned by the search).
func ended(state string) bool {
	switch state {
	case "done", "failed", "cancelled", "pruned":
		return true
	}
	return false
}

// plannedRepeats is the number of repeats the sweep's spec plans at each level (ok), or the most
// recorded when the stored spec no longer parses.
func plannedRepeats(specText string, recorded int) (n int, ok bool) {
	if s, err := sweep.Parse("spec", []byte(specText)); err == nil && s.Workload.Repeats > 0 {
		return s.Workload.Repeats, true
	}
	return max(1, recorded), false
}

// liveResults adds the levels' settledness and the chart's curves to the report's tables of s;
// repeats is the number planned at each level.
func liveResults(s *report.Sweep, repeats int) ResultsJSON {
	out := ResultsJSON{Live: report.LiveTables(s), Levels: []LevelJSON{}, Chart: []CurveJSON{}}
	if s == nil {
		return out
	}
	for _, tp := range s.TPs {
		for _, c := range s.Levels {
			lv := LevelJSON{TP: tp, Concurrency: c, Final: true}
			curve := CurveJSON{TP: tp, Concurrency: c, Points: []CurvePointJSON{}}
			best := map[int]CurvePointJSON{}
			for _, p := range s.Points {
				if p.TP != tp || p.State == "pruned" {
					continue
				}
				lv.Planned++
				cell := p.Cells[c]
				measured := cell != nil && cell.TokS.OK()
				if measured {
					lv.Measured++
				}
				// A running point measured here may still add repeats at this level.
				if !ended(p.State) && (!measured || cell.TokS.N < repeats) {
					lv.Final = false
				}
				if !measured || p.Mismatch() {
					continue
				}
				tok := cell.TokS.Median
				switch {
				case p.Baseline:
					if curve.Baseline == nil {
						curve.Baseline = &tok
					}
				case p.NumSteps > 0:
					if b, ok := best[p.NumSteps]; !ok || tok > b.TokS {
						best[p.NumSteps] = CurvePointJSON{NumSteps: p.NumSteps, TokS: tok, Label: p.Label()}
					}
				}
			}
			for _, pt := range best {
				curve.Points = append(curve.Points, pt)
			}
			sort.Slice(curve.Points, func(i, j int) bool { return curve.Points[i].NumSteps < curve.Points[j].NumSteps })
			out.Levels = append(out.Levels, lv)
			if len(curve.Points) > 0 || curve.Baseline != nil {
				out.Chart = append(out.Chart, curve)
			}
		}
	}
	return out
}
