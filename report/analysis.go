package report

import (
	"fmt"
	"sort"

	"github.com/specsweep/specsweep/sweep"
)

// Noise tells whether the winner's margin over the runner-up is outside run-to-run noise: the one
// aggregation's verdict (sweep.NoiseOf), which the search applies too.
type Noise = sweep.Noise

// The verdicts (sweep.NoiseClear, NoiseWithin, NoiseUnknown).
const (
	NoiseClear   = sweep.NoiseClear
	NoiseWithin  = sweep.NoiseWithin
	NoiseUnknown = sweep.NoiseUnknown
)

// Best is the winning configuration at one tp and concurrency level.
type Best struct {
	TP, Concurrency int
	Best            *Cell
	RunnerUp        *Cell // nil when only one configuration ran
	Baseline        *Cell // the first baseline point at this tp and level, nil if none
	// MarginPct is how much faster the best is than the runner-up, in percent of the runner-up's
	// median output tok/s.
	MarginPct float64
	Noise     Noise
	// Candidates is the number of configurations compared.
	Candidates int
	// Mismatched is the number of configurations measured at this level but left out because
	// their output check failed (they do not answer as the baseline does).
	Mismatched int
	// Plateau is the configuration with the fewest num_steps of the best's method, topk and draft
	// shape that is as good as the best: within run-to-run noise (ranges overlap) with repeats,
	// within PlateauTolerance otherwise. It is Best itself when no fewer steps are as good; nil for
	// a baseline.
	Plateau *Cell
}

// PlateauTolerance is how close (relative) to the best a configuration with fewer steps must be,
// without repeats, to count as the start of the plateau.
const PlateauTolerance = 0.02

func plateau(best *Cell, cells []*Cell) *Cell {
	bp := best.Point
	if bp.Baseline {
		return nil
	}
	out := best
	for _, c := range cells {
		p := c.Point
		if p.Baseline || p.Method != bp.Method || p.TopK != bp.TopK || p.NumSteps >= out.Point.NumSteps ||
			(p.NumDraftTokens == p.NumSteps+1) != (bp.NumDraftTokens == bp.NumSteps+1) {
			continue
		}
		asGood := c.TokS.Median >= best.TokS.Median*(1-PlateauTolerance)
		if c.TokS.N > 1 && best.TokS.N > 1 {
			asGood = sweep.NoiseOf(best.TokS, c.TokS) != NoiseClear
		}
		if asGood {
			out = c
		}
	}
	return out
}

// BestPerLevel ranks the configurations of each tp and concurrency level by median output tok/s
// over repeats (baselines included: a baseline that wins says speculation does not pay there).
// A point whose output check failed (Point.Mismatch) does not compete: it is fast and wrong, so it
// is never the best, the runner-up or the plateau; Mismatched counts those left out.
func BestPerLevel(s *Sweep) []Best {
	return bestPerLevel(s, func(p *Point) map[int]*Cell { return p.Cells })
}

// BestPerLevelOn is BestPerLevel on one prompt source's own figures (Point.BySource): the answer
// for that set (or length) alone.
func BestPerLevelOn(s *Sweep, src sweep.SourceKey) []Best {
	return bestPerLevel(s, func(p *Point) map[int]*Cell { return p.BySource[src] })
}

func bestPerLevel(s *Sweep, cellsOf func(p *Point) map[int]*Cell) []Best {
	var out []Best
	for _, tp := range s.TPs {
		for _, c := range s.Levels {
			var cells []*Cell
			var base *Cell
			mismatched := 0
			for _, p := range s.Points {
				if p.TP != tp {
					continue
				}
				cell := cellsOf(p)[c]
				if cell == nil || !cell.TokS.OK() {
					continue
				}
				if p.Mismatch() {
					mismatched++
					continue
				}
				cells = append(cells, cell)
				if p.Baseline && base == nil {
					base = cell
				}
			}
			if len(cells) == 0 {
				continue
			}
			sort.SliceStable(cells, func(i, j int) bool { return cells[i].TokS.Median > cells[j].TokS.Median })
			b := Best{TP: tp, Concurrency: c, Best: cells[0], Baseline: base, Candidates: len(cells), Noise: NoiseUnknown,
				Plateau: plateau(cells[0], cells), Mismatched: mismatched}
			if len(cells) > 1 {
				r := cells[1]
				b.RunnerUp = r
				if r.TokS.Median > 0 {
					b.MarginPct = 100 * (cells[0].TokS.Median/r.TokS.Median - 1)
				}
				b.Noise = sweep.NoiseOf(cells[0].TokS, r.TokS)
			}
			out = append(out, b)
		}
	}
	return out
}

// Speedup is the best's speedup over the baseline: the median of the per-repeat speedups of
// run_summary; 0 when unknown.
func (b Best) Speedup() float64 {
	if b.Best.Speedup.OK() {
		return b.Best.Speedup.Median
	}
	return 0
}

// ParetoPoint is one cell placed on the per-user against per-GPU throughput plane.
type ParetoPoint struct {
	Cell    *Cell
	PerGPU  float64 // output tok/s / tp
	PerUser float64 // 1000 / median TPOT
	Front   bool
}

// Pareto places every cell with a known TPOT and marks the Pareto front: the cells no other cell
// beats on both per-user and per-GPU tok/s. The result is sorted by per-GPU tok/s, ascending. The
// cells of a point whose output check failed are left out (they are not a trade-off one may make).
func Pareto(s *Sweep) []ParetoPoint {
	var pts []ParetoPoint
	for _, cell := range s.Cells() {
		if cell.Point.Mismatch() {
			continue
		}
		if u := cell.PerUser(); u > 0 {
			pts = append(pts, ParetoPoint{Cell: cell, PerGPU: cell.PerGPU(), PerUser: u})
		}
	}
	for i := range pts {
		pts[i].Front = true
		for j := range pts {
			if i != j && dominates(pts[j], pts[i]) {
				pts[i].Front = false
				break
			}
		}
	}
	sort.SliceStable(pts, func(i, j int) bool {
		if pts[i].PerGPU != pts[j].PerGPU {
			return pts[i].PerGPU < pts[j].PerGPU
		}
		return pts[i].PerUser > pts[j].PerUser
	})
	return pts
}

func dominates(a, b ParetoPoint) bool {
	return a.PerGPU >= b.PerGPU && a.PerUser >= b.PerUser && (a.PerGPU > b.PerGPU || a.PerUser > b.PerUser)
}

// Front returns only the front of Pareto's result.
func Front(pts []ParetoPoint) []ParetoPoint {
	var out []ParetoPoint
	for _, p := range pts {
		if p.Front {
			out = append(out, p)
		}
	}
	return out
}

// Comparison sets two sweeps side by side.
type Comparison struct {
	A, B *Sweep
	// Matched are the points of the same configuration (method, num_steps, topk, num_draft_tokens,
	// tp) measured at the same level in both sweeps.
	Matched []Pair
	// Bests pairs the best configuration of each sweep at each tp and level both measured (for
	// sweeps of different methods, e.g. a tree against a linear draft).
	Bests []BestPair
}

// Pair is one configuration at one level in both sweeps.
type Pair struct {
	Config      Config
	Concurrency int
	A, B        *Cell
}

// Ratio is B's median output tok/s over A's.
func (p Pair) Ratio() float64 { return ratio(p.B, p.A) }

// BestPair is the winners of both sweeps at one tp and level.
type BestPair struct {
	TP, Concurrency int
	A, B            Best
}

// Ratio is B's best median output tok/s over A's.
func (p BestPair) Ratio() float64 { return ratio(p.B.Best, p.A.Best) }

func ratio(b, a *Cell) float64 {
	if a == nil || b == nil || a.TokS.Median == 0 {
		return 0
	}
	return b.TokS.Median / a.TokS.Median
}

// Compare matches sweep b against sweep a.
func Compare(a, b *Sweep) *Comparison {
	cmp := &Comparison{A: a, B: b}
	bByKey := map[string]*Point{}
	for _, p := range b.Points {
		if _, dup := bByKey[p.key()]; !dup {
			bByKey[p.key()] = p
		}
	}
	for _, pa := range a.Points {
		pb := bByKey[pa.key()]
		if pb == nil {
			continue
		}
		for _, c := range a.Levels {
			ca, cb := pa.Cells[c], pb.Cells[c]
			if ca != nil && cb != nil {
				cmp.Matched = append(cmp.Matched, Pair{Config: pa.Config, Concurrency: c, A: ca, B: cb})
			}
		}
	}
	bb := map[[2]int]Best{}
	for _, x := range BestPerLevel(b) {
		bb[[2]int{x.TP, x.Concurrency}] = x
	}
	for _, x := range BestPerLevel(a) {
		if y, ok := bb[[2]int{x.TP, x.Concurrency}]; ok {
			cmp.Bests = append(cmp.Bests, BestPair{TP: x.TP, Concurrency: x.Concurrency, A: x, B: y})
		}
	}
	return cmp
}

// fmtStat renders a median with its range when there are repeats: "1234.5 [1200.1–1250.0]".
func fmtStat(s Stat, digits int, rangeSep string) string {
	if !s.OK() {
		return "-"
	}
	m := fmt.Sprintf("%.*f", digits, s.Median)
	if s.N > 1 {
		m += fmt.Sprintf(" [%.*f%s%.*f]", digits, s.Min, rangeSep, digits, s.Max)
	}
	return m
}
