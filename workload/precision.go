package workload

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Precision metrics (Precision.Metric, Interval.Metric).
const (
	MetricOutputTokS = "output_tok_s"
	MetricTTFT       = "ttft_ms"
	MetricTPOT       = "tpot_ms"
)

// Precision asks a level to run until its figure is known to within Target (docs/bench.md,
// "Precision-targeted levels").
type Precision struct {
	Metric      string  // MetricOutputTokS (default, "output_tok_s"), MetricTTFT ("ttft_ms": mean TTFT), MetricTPOT ("tpot_ms": mean TPOT)
	Target      float64 // relative half-width of the interval, e.g. 0.02 for ±2%
	Confidence  float64 // 0.95 when 0
	MinRequests int     // at least this many completed measured requests before the level may end (0: max(2*concurrency, 20))
	MaxRequests int     // the cap on requests sent (0: Config.Requests; one of them or Duration must bound the level)
}

// Interval is a figure with its confidence interval.
type Interval struct {
	Metric                 string
	Mean                   float64 // the figure over the window (tok/s or ms)
	Low, High              float64
	Confidence             float64
	RelHalfWidth           float64 // (High-Low)/2/Mean
	Target                 float64 // the Precision's target, 0 without one
	Reached                bool    // with a Precision: RelHalfWidth <= Target when the level ended
	Batches                int
	WindowStart, WindowEnd time.Duration // the steady-state window, offsets from Result.Start
	// Requests counts the completed requests that ended inside the window (for output_tok_s to
	// within the requests ending in a time bin cut by its edges: bins are 1/1024 of the level).
	Requests int
}

// DefaultConfidence is a Precision's confidence when it sets none; Result.Interval of a level
// without a Precision uses it too.
const DefaultConfidence = 0.95

// MaxPrecisionRequests bounds Precision.MinRequests and MaxRequests (a typo of a few zeros must not
// become a level of days).
const MaxPrecisionRequests = 10_000_000

const (
	// intervalBatches is k, the number of batches the window is cut into, whatever its length
	// (rebatched as it grows): few enough that each batch is long against a request, enough that
	// Student's t is near the normal (t_9 at 0.975 is 2.26, 15% wider than 1.96).
	intervalBatches = 10
	// batchE2Es is how many mean E2E latencies a batch must last: a request's tokens then fall
	// mostly inside one batch, so neighbouring batches share little and are nearly independent.
	// With fewer, the level has no interval (too few batches).
	batchE2Es = 2
	// pilotBatchE2Es is how many mean E2E latencies a batch of a Precision's pilot (decide) must
	// last: its spread decides the level's length and the final interval's width, and batches of 2
	// E2Es, still tied by the requests straddling them, underestimate it (coverage measured in
	// virtual time, 200 levels at 0.9: 158 with pilots of 2 E2Es a batch, 168 with 4, 167 with 8,
	// 170 with 16; fixed windows of 1600 requests 172).
	pilotBatchE2Es = 4
	// rateBins is how many time bins hold a level's output tokens; the bin width doubles (pairs
	// merged) when a request ends past the last, so memory is fixed whatever the level's length.
	rateBins = 1024
	// firstBinWidth is the bins' width until the level outgrows rateBins of it.
	firstBinWidth = time.Millisecond
	// latencyCells is how many cells (sums of consecutive completed requests' latencies) a level
	// keeps for a latency metric; when full, pairs merge and a cell holds twice as many requests.
	latencyCells = 1024
	// precisionCheckEvery is how often a level with a Precision checks its interval.
	precisionCheckEvery = 100 * time.Millisecond
)

// Validate checks a Precision's fields.
func (p Precision) Validate() error {
	switch p.Metric {
	case "", MetricOutputTokS, MetricTTFT, MetricTPOT:
	default:
		return fmt.Errorf("precision: unknown metric %q (want %s, %s or %s)", p.Metric, MetricOutputTokS, MetricTTFT, MetricTPOT)
	}
	switch {
	case !(p.Target > 0 && p.Target < 1):
		return fmt.Errorf("precision: target %v is not a relative half-width in (0, 1), e.g. 0.02 for ±2%%", p.Target)
	case p.Confidence != 0 && !(p.Confidence >= 0.5 && p.Confidence <= 0.999):
		return fmt.Errorf("precision: confidence %v is not in [0.5, 0.999] (0: %v)", p.Confidence, DefaultConfidence)
	case p.MinRequests < 0 || p.MinRequests > MaxPrecisionRequests:
		return fmt.Errorf("precision: min requests %d is not in [0, %d]", p.MinRequests, MaxPrecisionRequests)
	case p.MaxRequests < 0 || p.MaxRequests > MaxPrecisionRequests:
		return fmt.Errorf("precision: max requests %d is not in [0, %d]", p.MaxRequests, MaxPrecisionRequests)
	case p.MaxRequests > 0 && p.MinRequests > p.MaxRequests:
		return fmt.Errorf("precision: min requests %d is above max requests %d", p.MinRequests, p.MaxRequests)
	}
	return nil
}

// normalized fills a valid Precision's defaults for a level: the metric, the confidence, the
// minimum (from the level's concurrency) and the cap (from requests).
func (p Precision) normalized(concurrency, requests int) Precision {
	if p.Metric == "" {
		p.Metric = MetricOutputTokS
	}
	if p.Confidence == 0 {
		p.Confidence = DefaultConfidence
	}
	if p.MinRequests == 0 {
		p.MinRequests = max(2*concurrency, 20)
		if p.MaxRequests > 0 {
			p.MinRequests = min(p.MinRequests, p.MaxRequests)
		}
	}
	if p.MaxRequests == 0 {
		p.MaxRequests = requests
	}
	return p
}

// intervalAcc gathers, as requests complete, what a level's interval needs, in memory that does
// not grow with the level: output tokens in time bins (output_tok_s) or latency sums in cells of
// consecutive completions (ttft_ms, tpot_ms). Offsets are from the level's start. Not safe for
// concurrent use: the runner holds its mutex.
type intervalAcc struct {
	metric string
	// rampN is how many completions end the ramp-up; rampDone, rampEnd when that happened.
	rampN    int
	rampDone bool
	rampEnd  time.Duration
	done     int // completed requests
	// e2eSum/e2eN: the mean E2E latency sizes the batches; maxE2E lags the check's window end.
	e2eSum, maxE2E time.Duration
	// Output tokens: bins[k] holds those between k*width and (k+1)*width; ends[k] the requests
	// that ended there.
	width      time.Duration
	bins, ends []float64
	// Latency cells: each holds up to per requests (the last may hold fewer), with its sum and the
	// end of its last request; only requests ending after the ramp-up.
	per   int
	cells []latencyCell
	// pilot is the first interval a Precision's check took (nil before); planSize the window size
	// (windowSize) it asked for. Later checks only wait for that size: see decide.
	pilot    *pilotSpread
	planSize float64
	tq       struct {
		nu   int
		p, t float64
	}
}

// pilotSpread is what the final interval of a planned stop keeps from the pilot: the figure's
// relative standard error over the pilot's window, the window's size (its length for output_tok_s,
// its requests for a latency) and Student's quantile of its batches.
type pilotSpread struct {
	relSE, size, t float64
}

type latencyCell struct {
	sum  float64
	n    int
	last time.Duration
}

func newIntervalAcc(metric string, rampN int) *intervalAcc {
	a := &intervalAcc{metric: metric, rampN: max(rampN, 1), width: firstBinWidth, per: 1}
	if metric == MetricOutputTokS {
		a.bins, a.ends = make([]float64, rateBins), make([]float64, rateBins)
	}
	return a
}

// add records one completed request: its tokens' first and last offsets, its count of tokens,
// its TTFT and E2E.
func (a *intervalAcc) add(first, end time.Duration, tokens int64, ttft, e2e time.Duration) {
	a.done++
	a.e2eSum += e2e
	a.maxE2E = max(a.maxE2E, e2e)
	if !a.rampDone {
		a.rampEnd = max(a.rampEnd, end)
		if a.done >= a.rampN {
			a.rampDone = true
		}
	}
	switch a.metric {
	case MetricOutputTokS:
		a.addTokens(first, end, tokens)
	case MetricTTFT:
		if a.rampDone && end > a.rampEnd {
			a.addLatency(ms(ttft), end)
		}
	case MetricTPOT:
		if a.rampDone && end > a.rampEnd && tokens > 1 {
			a.addLatency(ms((e2e-ttft)/time.Duration(tokens-1)), end)
		}
	}
}

// addTokens spreads tokens evenly from first to end, as Result.Series does.
func (a *intervalAcc) addTokens(first, end time.Duration, tokens int64) {
	if tokens <= 0 {
		return
	}
	first = max(first, 0)
	end = max(end, first)
	for end >= a.width*rateBins && a.width < math.MaxInt64/(4*rateBins) {
		for _, b := range [][]float64{a.bins, a.ends} {
			for k := range rateBins / 2 {
				b[k] = b[2*k] + b[2*k+1]
			}
			clear(b[rateBins/2:])
		}
		a.width *= 2
	}
	a.ends[min(int(end/a.width), rateBins-1)]++
	if end == first {
		a.bins[min(int(first/a.width), rateBins-1)] += float64(tokens)
		return
	}
	rate := float64(tokens) / float64(end-first)
	for k := int(first / a.width); k < rateBins && time.Duration(k)*a.width < end; k++ {
		lo, hi := max(first, time.Duration(k)*a.width), min(end, time.Duration(k+1)*a.width)
		a.bins[k] += rate * float64(hi-lo)
	}
}

func (a *intervalAcc) addLatency(v float64, end time.Duration) {
	if n := len(a.cells); n > 0 && a.cells[n-1].n < a.per {
		c := &a.cells[n-1]
		c.sum += v
		c.n++
		c.last = max(c.last, end)
		return
	}
	if len(a.cells) == latencyCells {
		for k := range latencyCells / 2 {
			x, y := a.cells[2*k], a.cells[2*k+1]
			a.cells[k] = latencyCell{sum: x.sum + y.sum, n: x.n + y.n, last: max(x.last, y.last)}
		}
		a.cells = a.cells[:latencyCells/2]
		a.per *= 2
	}
	a.cells = append(a.cells, latencyCell{sum: v, n: 1, last: end})
}

// between is what bins of width w hold between offsets lo and hi, a bin cut by either counted
// for its part (its contents taken as even inside it).
func between(bins []float64, w, lo, hi time.Duration) float64 {
	sum := 0.0
	for k := max(0, int(lo/w)); k < len(bins) && time.Duration(k)*w < hi; k++ {
		b0, b1 := time.Duration(k)*w, time.Duration(k+1)*w
		if in := min(hi, b1) - max(lo, b0); in > 0 {
			sum += bins[k] * float64(in) / float64(w)
		}
	}
	return sum
}

// interval is the figure's interval over the window from the ramp-up's end to end, or nil when
// the window holds too few batches: fewer than intervalBatches of at least batchE2Es mean E2E
// latencies each (and, for a latency, of at least two requests each).
func (a *intervalAcc) interval(end time.Duration, confidence float64) *Interval {
	return a.intervalE2E(end, confidence, a.meanE2E())
}

// meanE2E is the mean E2E latency of the requests completed so far.
func (a *intervalAcc) meanE2E() time.Duration {
	if a.done == 0 {
		return 0
	}
	return a.e2eSum / time.Duration(a.done)
}

// intervalE2E is interval with the batches sized from meanE2E: a stopped level's final interval
// uses the one its decision saw (the drain's requests, faster at a lower concurrency, must not
// change the rule afterwards).
func (a *intervalAcc) intervalE2E(end time.Duration, confidence float64, meanE2E time.Duration) *Interval {
	if !a.rampDone || a.done == 0 || end <= a.rampEnd {
		return nil
	}
	window := end - a.rampEnd
	if window < time.Duration(intervalBatches*batchE2Es)*meanE2E {
		return nil
	}
	iv := &Interval{Metric: a.metric, Confidence: confidence, WindowStart: a.rampEnd, WindowEnd: end}
	var batches []float64
	switch a.metric {
	case MetricOutputTokS:
		batches = make([]float64, intervalBatches)
		for j := range batches {
			// window/k first: no overflow whatever the window.
			lo := a.rampEnd + window/intervalBatches*time.Duration(j)
			hi := a.rampEnd + window/intervalBatches*time.Duration(j+1)
			if j == intervalBatches-1 {
				hi = end
			}
			batches[j] = between(a.bins, a.width, lo, hi) / (hi - lo).Seconds()
		}
		iv.Mean = mean(batches)
		// About: a bin cut by the window's edges counts for its part.
		iv.Requests = int(math.Round(between(a.ends, a.width, a.rampEnd, end)))
	default:
		var sum float64
		batches, sum, iv.Requests = a.latencyBatches(end)
		if batches == nil {
			return nil
		}
		iv.Mean = sum / float64(iv.Requests)
	}
	return fillInterval(iv, batches, a.quantile(len(batches)-1, (1+confidence)/2))
}

// quantile is studentT(nu, p), remembered for the last (nu, p) asked: a level's checks ask the same
// one every 100 ms, and one costs about 0.1 ms (a bisection of the incomplete beta function).
func (a *intervalAcc) quantile(nu int, p float64) float64 {
	if a.tq.nu != nu || a.tq.p != p {
		a.tq.nu, a.tq.p, a.tq.t = nu, p, studentT(nu, p)
	}
	return a.tq.t
}

// latencyBatches cuts the cells of requests that ended by end into intervalBatches batches of
// nearly equal counts (within one cell); nil when a batch would hold fewer than two requests.
func (a *intervalAcc) latencyBatches(end time.Duration) (batches []float64, sum float64, n int) {
	cells := a.cells
	for len(cells) > 0 && cells[len(cells)-1].last > end {
		cells = cells[:len(cells)-1]
	}
	for _, c := range cells {
		n += c.n
		sum += c.sum
	}
	if len(cells) < intervalBatches || n < 2*intervalBatches {
		return nil, 0, 0
	}
	batches = make([]float64, intervalBatches)
	for j := range batches {
		var s float64
		var m int
		for _, c := range cells[j*len(cells)/intervalBatches : (j+1)*len(cells)/intervalBatches] {
			s += c.sum
			m += c.n
		}
		if m < 2 {
			return nil, 0, 0
		}
		batches[j] = s / float64(m)
	}
	return batches, sum, n
}

// fillInterval sets the interval's bounds from its batch means: Mean ± t * s / sqrt(k), with t
// Student's quantile of k-1 degrees of freedom at the interval's confidence.
func fillInterval(iv *Interval, batches []float64, t float64) *Interval {
	k := len(batches)
	if k < 2 || !(iv.Mean > 0) || math.IsInf(iv.Mean, 0) {
		return nil
	}
	m := mean(batches)
	var ss float64
	for _, b := range batches {
		ss += (b - m) * (b - m)
	}
	half := t * math.Sqrt(ss/float64(k-1)) / math.Sqrt(float64(k))
	if math.IsNaN(half) || math.IsInf(half, 0) {
		return nil
	}
	iv.Batches = k
	iv.Low, iv.High = iv.Mean-half, iv.Mean+half
	iv.RelHalfWidth = half / iv.Mean
	return iv
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// studentT is the p-quantile of Student's t distribution with nu degrees of freedom, for p in
// (0, 1) and nu >= 1: the CDF (through the regularized incomplete beta function) inverted by
// bisection, exact to about 1e-10, which is plenty for an interval's width.
func studentT(nu int, p float64) float64 {
	if nu < 1 || !(p > 0 && p < 1) {
		return math.NaN()
	}
	if p == 0.5 {
		return 0
	}
	if p < 0.5 {
		return -studentT(nu, 1-p)
	}
	lo, hi := 0.0, 1.0
	for studentCDF(nu, hi) < p {
		hi *= 2
		if hi > 1e12 {
			return math.Inf(1)
		}
	}
	for range 200 {
		mid := (lo + hi) / 2
		if studentCDF(nu, mid) < p {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo <= 1e-12*hi {
			break
		}
	}
	return (lo + hi) / 2
}

// studentCDF is P(T <= t) for t >= 0: 1 - I_x(nu/2, 1/2)/2 with x = nu/(nu+t^2).
func studentCDF(nu int, t float64) float64 {
	v := float64(nu)
	return 1 - 0.5*incBeta(v/2, 0.5, v/(v+t*t))
}

// incBeta is the regularized incomplete beta function I_x(a, b), by its continued fraction
// (Numerical Recipes' betacf, modified Lentz), on the side where it converges fast.
func incBeta(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a + b)
	lb, _ := math.Lgamma(a)
	lc, _ := math.Lgamma(b)
	front := math.Exp(la - lb - lc + a*math.Log(x) + b*math.Log1p(-x))
	if x < (a+1)/(a+b+2) {
		return front * betaCF(a, b, x) / a
	}
	return 1 - front*betaCF(b, a, 1-x)/b
}

func betaCF(a, b, x float64) float64 {
	const tiny = 1e-300
	qab, qap, qam := a+b, a+1, a-1
	nonzero := func(v float64) float64 {
		if math.Abs(v) < tiny {
			return tiny
		}
		return v
	}
	c, d := 1.0, 1/nonzero(1-qab*x/qap)
	h := d
	// step is one modified Lentz update for the coefficient aa; it returns the factor h takes.
	step := func(aa float64) float64 {
		d = 1 / nonzero(1+aa*d)
		c = nonzero(1 + aa/c)
		return d * c
	}
	for m := 1; m <= 300; m++ {
		fm := float64(m)
		m2 := 2 * fm
		h *= step(fm * (b - fm) * x / ((qam + m2) * (a + m2)))
		del := step(-(a + fm) * (qab + fm) * x / ((a + m2) * (qap + m2)))
		h *= del
		if math.Abs(del-1) < 1e-15 {
			break
		}
	}
	return h
}

// errNoBound is normalize's refusal of a Precision with nothing to end the level.
var errNoBound = errors.New("precision: set max requests, requests or a duration: a target alone may never be reached")

// checkPrecision checks, every precisionCheckEvery until done closes, whether the level's figure
// is known to within p.Target, and stops the sending when it is. Its window ends one maximum E2E
// latency before now: the requests still in flight have not given their tokens yet (they are
// counted when they end), so the bins after that are still filling. The level's window ends where
// the deciding check's did (stopAt): the final interval is then the one the decision saw, but for
// the rare request still in flight past that lag, and a rebatching cannot undo the decision.
func (r *runner) checkPrecision(done <-chan struct{}, p Precision) {
	tick := time.NewTicker(precisionCheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			r.mu.Lock()
			if at, ok := r.acc.decide(now.Sub(r.measureFrom), r.completed, p); ok {
				r.stopAt, r.stopE2E = at, r.acc.meanE2E()
				r.stop.Store(true)
			}
			stopped := r.stop.Load()
			r.mu.Unlock()
			if stopped {
				return
			}
		}
	}
}

// decide is one precision check at offset now, after completed measured requests; it says whether
// the level may stop, with its window ending one maximum E2E before now (at). checkPrecision and
// the virtual-time coverage test share it.
//
// It is Stein's two-stage procedure over batch means, not a stop at the first narrow interval: the
// first interval the window holds once p's minimum is done is the pilot. Within the target, the level
// stops there. Otherwise the pilot's spread says how long a window brings the half-width to the
// target (the standard error falls as one over the window's square root) and the level runs to that
// window, whatever later intervals look like; the final interval takes its width from the pilot
// (finalInterval). Stopping at the first narrow-looking interval of a level checked every 100 ms
// stops the levels whose batches happen to agree: their spread is then underestimated and the
// intervals cover far less often than asked (docs/bench.md, "Coverage"). The pilot's spread is
// independent of the later data, so the final interval keeps its confidence.
func (a *intervalAcc) decide(now time.Duration, completed int, p Precision) (at time.Duration, ok bool) {
	if completed < p.MinRequests {
		return 0, false
	}
	at = now - a.maxE2E
	iv := a.interval(at, p.Confidence)
	if a.pilot != nil {
		return at, iv != nil && a.windowSize(iv) >= a.planSize
	}
	if iv == nil || at-a.rampEnd < time.Duration(intervalBatches*pilotBatchE2Es)*a.meanE2E() {
		return 0, false
	}
	t := a.quantile(iv.Batches-1, (1+iv.Confidence)/2)
	a.pilot = &pilotSpread{relSE: iv.RelHalfWidth / t, size: a.windowSize(iv), t: t}
	if iv.RelHalfWidth <= p.Target {
		a.planSize = a.pilot.size
		return at, true
	}
	r := iv.RelHalfWidth / p.Target
	a.planSize = a.pilot.size * r * r
	return 0, false
}

// windowSize is what a window's standard error falls with: its length for output_tok_s (tokens
// over time), its requests for a latency (a mean over requests).
func (a *intervalAcc) windowSize(iv *Interval) float64 {
	if a.metric == MetricOutputTokS {
		return float64(iv.WindowEnd - iv.WindowStart)
	}
	return float64(iv.Requests)
}

// planned is the final interval of a level its Precision stopped: the window's mean, the pilot's
// relative standard error scaled to the window's size, the pilot's quantile.
func (a *intervalAcc) planned(iv *Interval) *Interval {
	if iv == nil || a.pilot == nil {
		return iv
	}
	size := a.windowSize(iv)
	if !(size > 0) {
		return iv
	}
	half := a.pilot.t * a.pilot.relSE * math.Sqrt(a.pilot.size/size) * iv.Mean
	iv.Low, iv.High = iv.Mean-half, iv.Mean+half
	iv.RelHalfWidth = half / iv.Mean
	return iv
}

// finalInterval is the level's interval over its steady-state window: from the ramp-up's end to
// the stop decision's window end (p set and reached) or else to the last measured request sent, the
// drain after it left out; the tokens of requests in flight at the window's end count for their
// part inside it.
func (r *runner) finalInterval(p *Precision, confidence float64) *Interval {
	r.mu.Lock()
	defer r.mu.Unlock()
	end, e2e := r.stopAt, r.stopE2E
	if !r.stop.Load() {
		last := r.lastSend.Load()
		if last == 0 {
			return nil
		}
		end, e2e = time.Unix(0, last).Sub(r.measureFrom), r.acc.meanE2E()
	}
	iv := r.acc.intervalE2E(end, confidence, e2e)
	if r.stop.Load() {
		iv = r.acc.planned(iv)
	}
	if iv != nil && p != nil {
		iv.Target = p.Target
		iv.Reached = iv.RelHalfWidth <= p.Target
	}
	return iv
}
