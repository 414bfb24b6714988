package main

import (
	"fmt"

	"github.com/specsweep/specsweep/sim"
	"github.com/specsweep/specsweep/sweep"
)

// modelResults computes every planned point's figures with the simulator's own scheduler in
// virtual time (sim.Simulate): what a real run on sglangsim measures, without the noise.
func modelResults(p *sim.Profile, spec *sweep.Spec, plan *sweep.Plan) (map[string]sweep.PointResult, map[string]float64, error) {
	w := spec.Workload
	out := map[string]sweep.PointResult{}
	secs := map[string]float64{}
	for _, pt := range plan.Points {
		a, _, err := sim.ParseArgs(pt.Argv[1:])
		if err != nil {
			return nil, nil, fmt.Errorf("point %s: %w", pt.Label(), err)
		}
		m := sim.NewModel(a, p, 96)
		r := sweep.PointResult{Knowledge: sweep.Measured, Levels: map[int]sweep.LevelResult{}}
		t := float64(modelLoadSeconds)
		for _, c := range w.Concurrency {
			res := sim.Simulate(m, c, w.Requests, w.InputTokens, w.OutputTokens, 1)
			if res.OutputTokS <= 0 {
				continue
			}
			r.Levels[c] = sweep.LevelResult{OutputTokS: []float64{res.OutputTokS}, AcceptLength: res.AcceptLen}
			t += float64(w.Requests*w.OutputTokens) / res.OutputTokS * float64(w.Repeats)
		}
		out[pt.ID], secs[pt.ID] = r, t
	}
	return out, secs, nil
}

// modelLoadSeconds is a point's start-up in the model figures: the field reports' 80-100 s.
const modelLoadSeconds = 90
