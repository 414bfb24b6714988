package workload_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/specsweep/specsweep/workload"
)

// TestSeries: a level's output tok/s over time adds up to its tokens, interval by interval from its
// start, and covers its duration.
func TestSeries(t *testing.T) {
	sim := startSim(t, simOpts{spec: true, scale: "0.05"})
	w := 100 * time.Millisecond
	res, err := workload.Run(context.Background(), workload.Config{URL: sim.URL, Concurrency: 4, Duration: time.Second, SeriesWidth: w,
		InputTokens: 16, OutputTokens: 32})
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed == 0 {
		t.Fatal("nothing completed")
	}
	sum := 0.0
	for _, v := range res.Series {
		if v < 0 {
			t.Fatalf("a negative interval: %v", res.Series)
		}
		sum += v * w.Seconds()
	}
	if math.Abs(sum-float64(res.TotalOutputTokens)) > 1e-6*float64(res.TotalOutputTokens) {
		t.Errorf("the series holds %.3f tokens, the level %d", sum, res.TotalOutputTokens)
	}
	if want := int(math.Ceil(float64(res.Duration) / float64(w))); len(res.Series) < want-1 || len(res.Series) > want {
		t.Errorf("%d intervals over %v", len(res.Series), res.Duration)
	}
	t.Logf("%d completed, %d tokens, series %v", res.Completed, res.TotalOutputTokens, res.Series)

	// Without a width, no series.
	res, err = workload.Run(context.Background(), workload.Config{URL: sim.URL, Concurrency: 1, Requests: 2, InputTokens: 8, OutputTokens: 8})
	if err != nil || res.Series != nil {
		t.Errorf("series %v without a width (%v)", res.Series, err)
	}
}
