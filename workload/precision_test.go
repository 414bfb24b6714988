package workload

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// Student's t quantiles against tabulated values (e.g. NIST/SEMATECH's table of the t
// distribution's critical values, six significant digits).
func TestStudentTQuantile(t *testing.T) {
	for _, c := range []struct {
		nu   int
		p, t float64
	}{
		{1, 0.975, 12.7062}, {1, 0.95, 6.31375}, {2, 0.90, 1.88562}, {4, 0.95, 2.13185},
		{9, 0.975, 2.26216}, {9, 0.95, 1.83311}, {9, 0.995, 3.24984}, {29, 0.995, 2.75639},
		{30, 0.975, 2.04227}, {100, 0.975, 1.98397}, {9, 0.75, 0.702722}, {9, 0.9995, 4.78091},
	} {
		got := studentT(c.nu, c.p)
		if math.Abs(got-c.t) > 1e-5*c.t+1e-5 {
			t.Errorf("t(%d, %v) = %.6f, want %.6f", c.nu, c.p, got, c.t)
		}
		if neg := studentT(c.nu, 1-c.p); math.Abs(neg+got) > 1e-9*got {
			t.Errorf("t(%d, %v) = %v, not -t(%d, %v)", c.nu, 1-c.p, neg, c.nu, c.p)
		}
	}
	// Far out, the normal's: 1.95996 at 0.975.
	if got := studentT(1_000_000, 0.975); math.Abs(got-1.959964) > 1e-5 {
		t.Errorf("t(1e6, 0.975) = %v", got)
	}
	for _, bad := range []float64{0, 1, -1, math.NaN()} {
		if got := studentT(9, bad); !math.IsNaN(got) {
			t.Errorf("t(9, %v) = %v, want NaN", bad, got)
		}
	}
	if got := studentT(0, 0.9); !math.IsNaN(got) {
		t.Errorf("t(0, 0.9) = %v", got)
	}
}

// Batch means of a synthetic series of known mean and variance: the interval is mean ±
// t_{k-1} * s / sqrt(k), checked by hand, and over many draws it covers the true mean in about the
// confidence fraction.
func TestFillIntervalArithmetic(t *testing.T) {
	batches := []float64{9, 11, 10, 12, 8, 10, 9, 11, 10, 10} // mean 10, sample variance 12/9
	iv := fillInterval(&Interval{Mean: 10, Confidence: 0.95}, batches, studentT(len(batches)-1, 0.975))
	half := 2.262157 * math.Sqrt(12.0/9) / math.Sqrt(10)
	if iv == nil || math.Abs(iv.Low-(10-half)) > 1e-5 || math.Abs(iv.High-(10+half)) > 1e-5 ||
		math.Abs(iv.RelHalfWidth-half/10) > 1e-6 || iv.Batches != 10 {
		t.Fatalf("interval %+v, want 10 ± %.6f", iv, half)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	const runs, conf = 2000, 0.9
	covered := 0
	for range runs {
		b := make([]float64, intervalBatches)
		for j := range b {
			b[j] = 100 + 7*rng.NormFloat64()
		}
		iv := fillInterval(&Interval{Mean: mean(b), Confidence: conf}, b, studentT(len(b)-1, (1+conf)/2))
		if iv.Low <= 100 && 100 <= iv.High {
			covered++
		}
	}
	// Binomial(2000, 0.9): sd 13.4; 1800 ± 60 is ± 4.5 sd (a chance of about 1e-5 of failing).
	if covered < 1740 || covered > 1860 {
		t.Errorf("covered %d of %d at %v", covered, runs, conf)
	}
}

// A steady synthetic level (one request of 100 tokens ending every 10 ms, each lasting 50 ms)
// has a rate of 10000 tok/s with almost no spread; the window starts at the ramp-up's end and the
// bins survive many doublings.
func TestIntervalAccRate(t *testing.T) {
	a := newIntervalAcc(MetricOutputTokS, 5)
	const n = 20000 // 200 s: the bins double 8 times
	for i := range n {
		end := time.Duration(i+5) * 10 * time.Millisecond
		a.add(end-50*time.Millisecond, end, 100, 5*time.Millisecond, 55*time.Millisecond)
	}
	if a.rampEnd != 90*time.Millisecond {
		t.Errorf("ramp-up ends at %v, want the fifth completion's end (90ms)", a.rampEnd)
	}
	if a.width <= firstBinWidth {
		t.Errorf("the bins never doubled: width %v", a.width)
	}
	iv := a.interval(150*time.Second, 0.95)
	if iv == nil {
		t.Fatal("no interval")
	}
	if math.Abs(iv.Mean-10000) > 1 || iv.RelHalfWidth > 1e-3 || iv.Low > 10000 || iv.High < 10000 {
		t.Errorf("interval %+v, want 10000 tok/s", iv)
	}
	if iv.WindowStart != 90*time.Millisecond || iv.WindowEnd != 150*time.Second {
		t.Errorf("window %v-%v", iv.WindowStart, iv.WindowEnd)
	}
	// Requests ending in (0.09 s, 150 s]: one per 10 ms, to within the 25.6 in a bin (256 ms wide).
	if want := 14991; iv.Requests < want-26 || iv.Requests > want+26 {
		t.Errorf("%d requests in the window, want about %d", iv.Requests, want)
	}
	// A window shorter than intervalBatches * batchE2Es mean E2E latencies has no interval.
	if iv := a.interval(a.rampEnd+19*55*time.Millisecond, 0.95); iv != nil {
		t.Errorf("an interval over 19 E2E latencies: %+v", iv)
	}
	if iv := a.interval(a.rampEnd+21*55*time.Millisecond, 0.95); iv == nil {
		t.Errorf("no interval over 21 E2E latencies")
	}
}

// Latencies in completion order: known batch means give the interval, and the cells that ended
// after the window are left out.
func TestIntervalAccLatency(t *testing.T) {
	a := newIntervalAcc(MetricTTFT, 1)
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 5000 // the cells merge twice
	sum, cnt := 0.0, 0
	for i := range n {
		end := time.Duration(i+1) * time.Millisecond
		ttft := time.Duration(20e6 + 2e6*rng.NormFloat64())
		a.add(end-time.Millisecond, end, 10, ttft, time.Millisecond)
		if i > 0 && end <= 4*time.Second { // the first ends the ramp-up and is left out
			sum += ms(ttft)
			cnt++
		}
	}
	if a.per < 4 {
		t.Errorf("cells hold %d requests after %d", a.per, n)
	}
	iv := a.interval(4*time.Second, 0.95)
	if iv == nil {
		t.Fatal("no interval")
	}
	// The cut is at a cell's edge: a few requests at most differ.
	if iv.Requests < cnt-a.per || iv.Requests > cnt || math.Abs(iv.Mean-sum/float64(cnt)) > 0.01 {
		t.Errorf("interval %+v, want the mean %.4f of %d requests", iv, sum/float64(cnt), cnt)
	}
	// Batch means of ~400 draws of sd 2: sd 0.1 each; the half-width about 2.26*0.1/sqrt(10).
	if half := iv.High - iv.Mean; half < 0.02 || half > 0.15 || iv.Low > 20 || iv.High < 20 {
		t.Errorf("interval %+v around 20 ms", iv)
	}

	tp := newIntervalAcc(MetricTPOT, 1)
	for i := range 100 {
		end := time.Duration(i+1) * time.Second
		// (e2e - ttft)/(tokens - 1) = 990 ms / 99 = 10 ms; one-token requests have no TPOT.
		tp.add(end-time.Second, end, 100, 10*time.Millisecond, time.Second)
		tp.add(end, end, 1, time.Millisecond, time.Millisecond)
	}
	iv = tp.interval(100*time.Second, 0.95)
	if iv == nil || math.Abs(iv.Mean-10) > 1e-9 || iv.RelHalfWidth > 1e-9 || iv.Requests != 99 {
		t.Errorf("tpot interval %+v, want 10 ms from 99 requests", iv)
	}
}

func TestPrecisionValidate(t *testing.T) {
	good := Precision{Target: 0.02}
	if err := good.Validate(); err != nil {
		t.Errorf("%+v: %v", good, err)
	}
	for _, c := range []struct {
		p    Precision
		want string
	}{
		{Precision{}, "target 0"},
		{Precision{Target: 1}, "target 1"},
		{Precision{Target: math.NaN()}, "target NaN"},
		{Precision{Target: 0.02, Metric: "tok_s"}, `unknown metric "tok_s"`},
		{Precision{Target: 0.02, Confidence: 0.4}, "confidence 0.4"},
		{Precision{Target: 0.02, Confidence: 0.9999}, "confidence 0.9999"},
		{Precision{Target: 0.02, MinRequests: 50, MaxRequests: 40}, "min requests 50 is above max requests 40"},
		{Precision{Target: 0.02, MaxRequests: 20_000_000}, "max requests 20000000 is not in [0, 10000000]"},
		{Precision{Target: 0.02, MinRequests: -1}, "min requests -1"},
	} {
		err := c.p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.p, err, c.want)
		}
	}
	n := Precision{Target: 0.02}.normalized(16, 500)
	if n.Metric != MetricOutputTokS || n.Confidence != 0.95 || n.MinRequests != 32 || n.MaxRequests != 500 {
		t.Errorf("defaults %+v", n)
	}
	if n := (Precision{Target: 0.02, MaxRequests: 10}).normalized(16, 0); n.MinRequests != 10 {
		t.Errorf("default minimum above the cap: %+v", n)
	}
	// normalize refuses a Precision that nothing bounds, and a minimum above the level's requests.
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{URL: "http://x:1", Concurrency: 1, OutputTokens: 1, Precision: &Precision{Target: 0.02}}, "set max requests"},
		{Config{URL: "http://x:1", Concurrency: 1, OutputTokens: 1, Requests: 10, Precision: &Precision{Target: 0.02, MinRequests: 11}}, "above the level's 10"},
		{Config{URL: "http://x:1", Concurrency: 1, OutputTokens: 1, Requests: 10, Precision: &Precision{Target: 2}}, "target 2"},
	} {
		_, err := c.cfg.normalize()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg.Precision, err, c.want)
		}
	}
}

// FuzzInterval: any stream of completions (odd offsets, zero durations, zero tokens, ends before
// starts) and any window end give no panic, and an interval given is finite, ordered and has its
// batches.
func FuzzInterval(f *testing.F) {
	f.Add(uint8(0), []byte{}, int64(0), 0.95)
	f.Add(uint8(1), []byte{1, 2, 3, 4, 5, 6, 7, 8}, int64(1e9), 0.9)
	f.Add(uint8(2), []byte{0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255}, int64(-5), 0.5)
	f.Fuzz(func(t *testing.T, metric uint8, data []byte, end int64, conf float64) {
		m := []string{MetricOutputTokS, MetricTTFT, MetricTPOT}[int(metric)%3]
		a := newIntervalAcc(m, int(metric)/3)
		if !(conf >= 0.5 && conf <= 0.999) {
			conf = 0.95
		}
		// The same completions through a Precision's checks (decide), each after a completion: a
		// stopped level's final interval is finite, ordered and within the target.
		p := Precision{Metric: m, Target: 0.05, Confidence: conf}.normalized(1, 1000)
		var at, stopAt, stopE2E time.Duration
		stopped, done := false, 0
		for len(data) >= 4 {
			gap := time.Duration(data[0]) * time.Duration(data[1]) * time.Millisecond
			span := time.Duration(data[2]) * 7 * time.Millisecond
			at += gap
			a.add(at-span, at, int64(data[3])-8, span/3, span)
			done++
			if !stopped {
				if s, ok := a.decide(at, done, p); ok {
					stopped, stopAt, stopE2E = true, s, a.meanE2E()
				}
			}
			data = data[4:]
		}
		if stopped {
			iv := a.planned(a.intervalE2E(stopAt, conf, stopE2E))
			if iv == nil {
				t.Fatalf("stopped at %v with no interval", stopAt)
			}
			if math.IsNaN(iv.RelHalfWidth) || iv.RelHalfWidth > p.Target*(1+1e-9) || iv.Low > iv.Mean || iv.High < iv.Mean {
				t.Fatalf("stopped level's interval %+v, target %v", iv, p.Target)
			}
		}
		iv := a.interval(time.Duration(end), conf)
		if iv == nil {
			return
		}
		for _, v := range []float64{iv.Mean, iv.Low, iv.High, iv.RelHalfWidth} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("interval %+v", iv)
			}
		}
		if iv.Low > iv.Mean || iv.High < iv.Mean || iv.Batches != intervalBatches || iv.WindowEnd <= iv.WindowStart {
			t.Fatalf("interval %+v", iv)
		}
	})
}

// BenchmarkIntervalAdd: what a completed request costs the interval's bins under the runner's
// lock (a level of c=256, each request lasting 1/16 of the level: the worst realistic spread).
func BenchmarkIntervalAdd(b *testing.B) {
	a := newIntervalAcc(MetricOutputTokS, 256)
	const level = 64 * time.Second
	i := 0
	for b.Loop() {
		end := time.Duration(i%65536) * level / 65536
		a.add(end-level/16, end, 256, time.Millisecond, level/16)
		i++
	}
}

// A Precision's level is planned from its pilot (Stein's two stages): a noisy pilot sets the
// window the level needs, later intervals that look narrow before it do not stop the level, and
// the final interval's width is the pilot's spread scaled to the window, within the target. A stop
// at the first narrow-looking interval (the rule before) stopped this level at the first check
// after its noise ended.
func TestPrecisionStopsWhereThePilotPlanned(t *testing.T) {
	const e2e = 100 * time.Millisecond
	a := newIntervalAcc(MetricTTFT, 1)
	p := Precision{Metric: MetricTTFT, Target: 0.02, Confidence: 0.95}.normalized(1, 1_000_000)
	rng := rand.New(rand.NewPCG(5, 6))
	// One request every 10 ms, each lasting one E2E: TTFT 100 ms +- 40% for the first 4 s (the
	// pilot), then exactly 100 ms.
	var end time.Duration
	add := func() {
		end += 10 * time.Millisecond
		ttft := 100 * time.Millisecond
		if end <= 4*time.Second {
			ttft = time.Duration(float64(ttft) * (1 + 0.4*rng.NormFloat64()))
		}
		a.add(end-e2e, end, 10, ttft, e2e)
	}
	for end < 4*time.Second+3*e2e {
		add()
	}
	// The pilot needs intervalBatches*pilotBatchE2Es mean E2Es of window: 4 s.
	if _, ok := a.decide(end, 1000, p); ok || a.pilot == nil {
		t.Fatalf("the pilot: stopped %v, pilot %+v", ok, a.pilot)
	}
	pilot := *a.pilot
	// ±40% over ~400 requests: the relative standard error near 2%, twice what the target allows.
	if pilot.relSE < 0.012 || pilot.size < 390 || a.planSize < 2*pilot.size {
		t.Fatalf("pilot %+v, plan %.0f requests", pilot, a.planSize)
	}
	stopped, narrowEarly := false, false
	for !stopped {
		add()
		at, ok := a.decide(end, 1000, p)
		iv := a.interval(at, p.Confidence)
		if ok {
			stopped = true
			if got := a.windowSize(iv); got < a.planSize {
				t.Errorf("stopped at %.0f requests, planned %.0f", got, a.planSize)
			}
			final := a.planned(iv)
			want := pilot.t * pilot.relSE * math.Sqrt(pilot.size/a.windowSize(iv))
			if math.Abs(final.RelHalfWidth-want) > 1e-12 || final.RelHalfWidth > p.Target {
				t.Errorf("final ±%.4f, want the pilot's spread scaled: ±%.4f within %v", final.RelHalfWidth, want, p.Target)
			}
			continue
		}
		if iv != nil && iv.RelHalfWidth <= p.Target {
			narrowEarly = true // where the rule before stopped
		}
		if end > 10*time.Minute {
			t.Fatalf("never stopped; plan %.0f requests", a.planSize)
		}
	}
	if !narrowEarly {
		t.Error("no interval before the plan was within the target: the test shows nothing")
	}
	if *a.pilot != pilot {
		t.Errorf("the pilot changed: %+v, then %+v", pilot, *a.pilot)
	}
}
