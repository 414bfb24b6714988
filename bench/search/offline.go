package main

import (
	"fmt"
	"math"
	"sort"

	"github.com/specsweep/specsweep/sweep"
)

// outcome is one strategy's run of a spec: the points it ran and what they cost.
type outcome struct {
	ran     []string
	gpuSecs float64
	pruned  []sweep.Decided
	order   []sweep.Decided
}

// replay drives Decide as the orchestrator does, with every released point finishing at once with
// its figures from all.
func replay(spec *sweep.Spec, plan *sweep.Plan, all map[string]sweep.PointResult, secs map[string]float64) (outcome, error) {
	known := map[string]sweep.PointResult{}
	var o outcome
	for round := 0; ; round++ {
		if round > 10*len(plan.Points)+10 {
			return o, fmt.Errorf("the search does not end")
		}
		d := spec.Decide(plan, known)
		if len(d.Release) == 0 && len(d.Prune) == 0 {
			break
		}
		for _, r := range d.Release {
			known[r.PointID] = all[r.PointID]
			o.ran = append(o.ran, r.PointID)
			o.gpuSecs += secs[r.PointID]
			o.order = append(o.order, r)
		}
		for _, p := range d.Prune {
			known[p.PointID] = sweep.PointResult{Knowledge: sweep.Dropped}
			o.pruned = append(o.pruned, p)
		}
	}
	for _, pt := range plan.Points {
		if known[pt.ID].Knowledge == sweep.Undecided {
			return o, fmt.Errorf("point %s left undecided", pt.Label())
		}
	}
	return o, nil
}

// bestPer returns, per level, the point with the highest median output tok/s among ids.
func bestPer(levels []int, ids []string, res map[string]sweep.PointResult) map[int]string {
	out := map[int]string{}
	for _, c := range levels {
		bv := math.Inf(-1)
		sorted := append([]string(nil), ids...)
		sort.Strings(sorted)
		for _, id := range sorted {
			l, ok := res[id].Levels[c]
			if !ok || len(l.OutputTokS) == 0 {
				continue
			}
			if v := median(l.OutputTokS); v > bv {
				bv, out[c] = v, id
			}
		}
	}
	return out
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
