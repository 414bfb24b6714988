package workload_test

import (
	"math"
	"testing"

	"github.com/specsweep/specsweep/workload"
)

// A level with a Precision on a steady server ends before its cap, its target reached; with an
// unattainable target it runs to the cap, the precision reached recorded.
func TestPrecisionEndsEarly(t *testing.T) {
	s := startSim(t, simOpts{spec: true, scale: "0.03"})
	base := workload.Config{URL: s.URL, Concurrency: 8, InputTokens: 64, OutputTokens: 64, Warmup: 8}

	for _, p := range []workload.Precision{
		{Target: 0.05, MaxRequests: 100_000},
		{Metric: workload.MetricTTFT, Target: 0.2, MaxRequests: 100_000, Confidence: 0.9},
		{Metric: workload.MetricTPOT, Target: 0.05, MaxRequests: 100_000, MinRequests: 500},
	} {
		cfg := base
		cfg.Precision = &p
		res, err := workload.Run(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		iv := res.Interval
		if iv == nil {
			t.Fatalf("%+v: no interval (%d sent)", p, res.Sent)
		}
		t.Logf("%s: %d sent, %.4g [%.4g, %.4g] ±%.2f%%, window %v-%v, %d requests in it, %d batches",
			iv.Metric, res.Sent, iv.Mean, iv.Low, iv.High, 100*iv.RelHalfWidth, iv.WindowStart, iv.WindowEnd, iv.Requests, iv.Batches)
		want := p.Metric
		if want == "" {
			want = workload.MetricOutputTokS
		}
		conf := p.Confidence
		if conf == 0 {
			conf = 0.95
		}
		if res.Sent >= p.MaxRequests || !iv.Reached || iv.RelHalfWidth > p.Target || iv.Target != p.Target ||
			iv.Metric != want || iv.Confidence != conf || iv.Batches < 2 {
			t.Errorf("%+v: sent %d, interval %+v", p, res.Sent, iv)
		}
		// The requests in flight at the decision finished and count, as in any level.
		if res.Completed != res.Sent || res.Failed != 0 || res.Completed < max(p.MinRequests, 16) {
			t.Errorf("%+v: completed %d of %d, failed %d", p, res.Completed, res.Sent, res.Failed)
		}
		if iv.WindowStart <= 0 || iv.WindowEnd <= iv.WindowStart || iv.WindowEnd > res.Duration {
			t.Errorf("window %v-%v of a level of %v", iv.WindowStart, iv.WindowEnd, res.Duration)
		}
		// The figure is the level's: output tok/s within the interval's reach of the level's own.
		if want == workload.MetricOutputTokS && math.Abs(iv.Mean-res.OutputThroughput) > 0.1*res.OutputThroughput {
			t.Errorf("window rate %.1f, level %.1f", iv.Mean, res.OutputThroughput)
		}
	}

	// Unattainable: 0.01% on a level of 300 requests. It runs to the cap; the interval says how far
	// it got.
	cfg := base
	cfg.Concurrency = 4
	cfg.Precision = &workload.Precision{Target: 1e-4, MaxRequests: 300}
	res, err := workload.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 300 || res.Completed != 300 {
		t.Errorf("sent %d, completed %d, want the cap of 300", res.Sent, res.Completed)
	}
	if iv := res.Interval; iv == nil || iv.Reached || iv.RelHalfWidth <= 1e-4 || iv.Target != 1e-4 || math.IsNaN(iv.RelHalfWidth) {
		t.Errorf("unattainable target: interval %+v", iv)
	} else {
		t.Logf("unattainable: ±%.3f%% after 300 requests", 100*iv.RelHalfWidth)
	}

	// Without a Precision a level runs as ever (its requests, all of them) and still has an interval
	// when it is long enough; a short one has none.
	cfg = base
	cfg.Concurrency, cfg.Requests = 4, 300
	res, err = workload.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if iv := res.Interval; res.Sent != 300 || iv == nil || iv.Metric != workload.MetricOutputTokS || iv.Confidence != 0.95 ||
		iv.Target != 0 || iv.Reached || !(iv.Low <= iv.Mean && iv.Mean <= iv.High) {
		t.Errorf("sent %d, interval %+v", res.Sent, iv)
	}
	cfg.Requests = 8
	if res, err = workload.Run(t.Context(), cfg); err != nil || res.Interval != nil {
		t.Errorf("a level of 8 requests: interval %+v (%v)", res.Interval, err)
	}
}
