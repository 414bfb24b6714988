package workload

import (
	"math"
	"testing"
	"time"

	"github.com/specsweep/specsweep/sim"
)

// TestPrecisionCoverageInVirtualTime: the level's interval and its precision rule (the same
// interval and stopping decision as a level's, intervalAcc.decide) on the simulator's own
// scheduler and speed noise in virtual time (sim.SimulateEach), against the configuration's
// long-run rate. No clock and no other load on the machine touches it: the coverage it measures is
// the method's, the same on every run.
//
// Two figures, at confidence 0.9: a fixed window (1600 requests, the interval at the end) covers
// 172 of 200, near the 180 asked; a level that stops at its first interval within ±3% covers 145 of
// 200: stopping when the interval first looks narrow picks the runs whose 10 batches happened to
// agree (their spread is 2.66% against the 1.62% the intervals claim). That shortfall is open
// (docs/bench.md, "Precision-targeted levels"); the second bound keeps it from growing unseen.
func TestPrecisionCoverageInVirtualTime(t *testing.T) {
	const (
		runs            = 200
		c               = 8
		input, output   = 32, 256
		conf, target    = 0.9, 0.03
		checkEvery      = precisionCheckEvery
		longRunRequests = 40000
		fixedRequests   = 1600
	)
	p := *sim.Profiles[sim.DefaultProfile]
	p.Name, p.Match, p.Noise = "noisy", nil, 0.2
	a, _, err := sim.ParseArgs([]string{"--model-path", "/models/Qwen3.5-122B-A10B", "--tp-size", "4",
		"--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
		"--speculative-num-draft-tokens", "4"})
	if err != nil {
		t.Fatal(err)
	}
	m := sim.NewModel(a, &p, 96)
	// The truth: the long-run rate, over runs of other seeds than the levels'.
	var truth float64
	for s := range 4 {
		truth += sim.Simulate(m, c, longRunRequests, input, output, uint64(1_000_000+s)).OutputTokS / 4
	}

	// A fixed window: the interval of the whole level, up to its last request sent.
	fixed := 0
	for i := range runs {
		acc := newIntervalAcc(MetricOutputTokS, c)
		var lastSent time.Duration
		sim.SimulateEach(m, c, fixedRequests, input, output, uint64(i+1), func(x sim.Completion) bool {
			acc.add(x.FirstToken, x.End, int64(x.Tokens), x.FirstToken-x.Sent, x.End-x.Sent)
			lastSent = max(lastSent, x.Sent)
			return true
		})
		iv := acc.interval(lastSent, conf)
		if iv == nil {
			t.Fatalf("fixed run %d: no interval over %d requests", i, fixedRequests)
		}
		if iv.Low <= truth && truth <= iv.High {
			fixed++
		}
	}
	t.Logf("fixed windows of %d requests: covered %d of %d at %v (truth %.1f tok/s)", fixedRequests, fixed, runs, conf, truth)
	// With a true coverage of 0.9, 200 runs cover fewer than 168 with probability about 0.015
	// (binomial, sd 4.2 around 180); at 0.8 (a standard error underestimated by a third) they cover
	// 168 or more with probability about 0.13.
	if fixed < 168 {
		t.Errorf("fixed windows: the intervals covered the long-run rate in %d of %d runs at confidence %v (want at least 168)", fixed, runs, conf)
	}

	pr := Precision{Metric: MetricOutputTokS, Target: target, Confidence: conf}.normalized(c, 100_000)
	covered, reached := 0, 0
	var bias, sq, claimed float64
	var lens []float64
	for i := range runs {
		acc := newIntervalAcc(MetricOutputTokS, c)
		var stopAt, stopE2E, next time.Duration
		stopped, completed := false, 0
		sim.SimulateEach(m, c, pr.MaxRequests, input, output, uint64(i+1), func(x sim.Completion) bool {
			completed++
			acc.add(x.FirstToken, x.End, int64(x.Tokens), x.FirstToken-x.Sent, x.End-x.Sent)
			if stopped {
				return false
			}
			// The runner checks on a ticker; here at the first completion past each tick.
			for ; next <= x.End; next += checkEvery {
				if at, ok := acc.decide(next, completed, pr); ok {
					stopAt, stopE2E, stopped = at, acc.meanE2E(), true
					return false
				}
			}
			return true
		})
		if !stopped {
			t.Fatalf("run %d never reached ±%g%% in %d requests", i, 100*target, pr.MaxRequests)
		}
		iv := acc.planned(acc.intervalE2E(stopAt, conf, stopE2E))
		if iv == nil {
			t.Fatalf("run %d: no final interval at %v", i, stopAt)
		}
		if iv.RelHalfWidth <= target {
			reached++
		}
		if iv.Low <= truth && truth <= iv.High {
			covered++
		}
		lens = append(lens, iv.WindowEnd.Seconds()-iv.WindowStart.Seconds())
		dev := iv.Mean/truth - 1
		bias += dev / runs
		sq += dev * dev / runs
		se := iv.RelHalfWidth / studentT(iv.Batches-1, (1+conf)/2)
		claimed += se * se / runs
	}
	mean := 0.0
	for _, l := range lens {
		mean += l / runs
	}
	t.Logf("covered %d of %d at %v (truth %.1f tok/s); reached %d; mean window %.1f s; bias %+.2f%%, rms deviation %.2f%%, claimed standard error %.2f%%",
		covered, runs, conf, truth, reached, mean, 100*bias, 100*math.Sqrt(sq), 100*math.Sqrt(claimed))
	// Deterministic (virtual time, fixed seeds): 168 as measured, near the fixed windows' 172 (the
	// stopping rule costs the interval little of its coverage). Stopping at the first interval within
	// the target covered 145, and a pilot of batches of 2 E2Es 158: below 164 the rule got worse.
	if covered < 164 {
		t.Errorf("stopped levels: the intervals covered the long-run rate in %d of %d runs at confidence %v (168 measured; want at least 164)", covered, runs, conf)
	}
	if reached != runs {
		t.Errorf("%d of %d final intervals are wider than the target the decision saw met", runs-reached, runs)
	}
	if math.IsNaN(mean) || mean <= 0 {
		t.Errorf("mean window %v", mean)
	}
}
