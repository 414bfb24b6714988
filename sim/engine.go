package sim

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Request is one generation request travelling from an HTTP handler through
// the scheduler and back. The scheduler owns the unexported progress fields;
// delivery to the handler goes through mu/notify so the scheduler never
// blocks on a slow client.
type Request struct {
	RID     string
	Salt    uint64 // picks the output words: the seed, or the greedy key (output.go)
	Prompt  int    // prompt tokens
	MaxNew  int
	Arrival time.Time
	// Temperature is the request's sampling temperature: above 0 the
	// verifier samples (rejection sampling) and accepts fewer draft tokens.
	Temperature float64
	// Internal requests (health checks) stay out of the statistics.
	Internal bool
	// Content is what the prompt's text is (ContentScore); with Prompt it
	// sets how much of each draft the request accepts (Model.AcceptFor).
	// The zero value is neutral.
	Content Content
	accept  []float64 // per-position acceptance of this request; set by the scheduler

	target int    // tokens to produce before finishing
	stop   string // finish reason when target is reached: "length" or "stop"
	rng    *rand.Rand

	greedy bool       // Salt is the greedy key: the words are a function of model and prompt
	seed   uint64     // the request's seed (rng's, and the lossy RNG's)
	nondet divergence // drawn at arrival (SGLANGSIM_NONDETERMINISM); set before Submit

	// lossy (SGLANGSIM_FAIL=lossy:P), scheduler-owned
	lossRNG   *rand.Rand
	wrongSeen bool

	generated, verify int // scheduler-owned
	lastSched         time.Time

	aborted atomic.Bool
	notify  chan struct{}

	mu       sync.Mutex
	steps    []int // token counts of steps not yet taken by the handler
	total    int   // tokens produced
	verifyCt int
	done     bool
	finish   string
	firstGen time.Time  // when the scheduler produced the first token
	wrong    divergence // first wrong accepted draft token (lossy); set by the scheduler
}

// NewRequest prepares a sampled request; seed makes its accepted lengths,
// output length and words reproducible.
func NewRequest(rid string, prompt, maxNew int, ignoreEOS bool, naturalLen int, seed uint64) *Request {
	return newRequest(rid, prompt, maxNew, ignoreEOS, naturalLen, seed, false, 0)
}

// NewGreedyRequest prepares a greedy request (temperature below
// GreedyTemperature): seed drives its acceptance as NewRequest's does, while
// its words and, without ignore_eos, its length come from key alone, the
// greedy key of its model and prompt.
func NewGreedyRequest(rid string, prompt, maxNew int, ignoreEOS bool, naturalLen int, seed, key uint64) *Request {
	return newRequest(rid, prompt, maxNew, ignoreEOS, naturalLen, seed, true, key)
}

func newRequest(rid string, prompt, maxNew int, ignoreEOS bool, naturalLen int, seed uint64, greedy bool, key uint64) *Request {
	r := &Request{RID: rid, Salt: seed, Prompt: prompt, MaxNew: maxNew, notify: make(chan struct{}, 1),
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed: seed, nondet: noDivergence, wrong: noDivergence}
	if greedy {
		r.greedy, r.Salt = true, key
	}
	r.target, r.stop = maxNew, "length"
	if !ignoreEOS && naturalLen > 0 {
		// Output length of a model that stops by itself: exponential around the profile's mean.
		x := r.rng.ExpFloat64() // drawn in both cases: the acceptance draws that follow are the same
		if greedy {
			x = rand.New(rand.NewPCG(key, 0x656f73)).ExpFloat64() // the EOS position is the model's
		}
		n := 1 + int(x*float64(naturalLen))
		if n < maxNew {
			r.target, r.stop = n, "stop"
		}
	}
	if r.target < 1 {
		r.target = 1
	}
	return r
}

// Take moves the undelivered step counts into buf and reports progress.
func (r *Request) Take(buf []int) (steps []int, total, verify int, done bool, finish string) {
	r.mu.Lock()
	buf = append(buf[:0], r.steps...)
	r.steps = r.steps[:0]
	total, verify, done, finish = r.total, r.verifyCt, r.done, r.finish
	r.mu.Unlock()
	return buf, total, verify, done, finish
}

// Notify is signalled whenever there is something new to Take.
func (r *Request) Notify() <-chan struct{} { return r.notify }

// Abort asks the scheduler to drop the request at its next iteration.
func (r *Request) Abort() { r.aborted.Store(true) }

// FirstGen is when the scheduler produced the first token (zero if none yet).
func (r *Request) FirstGen() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstGen
}

func (r *Request) push(n int, at time.Time, finish string) {
	r.mu.Lock()
	if n > 0 {
		r.steps = append(r.steps, n)
		if r.total == 0 {
			r.firstGen = at
		}
		r.total += n
	}
	r.verifyCt = r.verify
	if finish != "" {
		r.done, r.finish = true, finish
	}
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// Stats are the scheduler's counters and the gauges of its last log line.
type Stats struct {
	PromptTokens, GenTokens, VerifyCalls, Requests int64
	// accept length since start or the last flush_cache, added at each
	// decode log line as SGLang does
	CumAccepted, CumVerifyReqSteps int64
	// gauges, refreshed at each prefill/decode log
	Running, Queued, Tokens   int
	TokenUsage, GenThroughput float64
	AcceptLen, AcceptRate     float64
	TTFT, ITL, E2E            *histogram
}

// Engine is the batch scheduler: one goroutine advances every running
// request one verify step per iteration.
type Engine struct {
	Model *Model
	Scale float64 // SGLANGSIM_TIME_SCALE
	Log   func(format string, args ...any)

	inMu     sync.Mutex
	incoming []*Request
	wake     chan struct{}

	waiting, running []*Request
	used             int // KV pool tokens reserved by running requests
	// admittedAt is the latest arrival among the requests the last Iterate admitted (zero: none).
	admittedAt time.Time

	// decode log window
	decodeIters                    int
	forwardCt                      int // batches run since start, prefill and decode (the scheduler's forward_ct; never reset)
	winTokens, winAccept, winReqSt int64
	winStart                       time.Time

	mu sync.Mutex
	st Stats

	progress atomic.Int64 // unix ns of the last batch end: the scheduler is alive

	// Speed noise (Profile.Noise): batch times are multiplied by noiseF,
	// redrawn from noiseRNG when a batch starts at or after noiseEnd. The RNG
	// is the engine's own, so the requests' RNGs (acceptance, lengths) draw
	// exactly what they draw without noise.
	noiseRNG *rand.Rand
	noiseEnd time.Time
	noiseF   float64

	// LossyP is SGLANGSIM_FAIL=lossy's probability that an accepted draft
	// token is wrong (0: none); only speculative decode steps draw it.
	LossyP float64

	// Adaptive speculative decoding (Args.Adaptive): the policy (scheduler-owned), the model whose
	// acceptance tables requests draw from (the largest candidate's: a step at k uses the first k
	// positions), the model of each step count, the decode batches run at each, and the steps in use
	// for readers outside the scheduler.
	adapt        *adaptiveController
	adaptStarted bool
	acceptModel  *Model
	variants     map[int]*Model
	stepsUsed    map[int]int
	curSteps     atomic.Int64
	// OnSwitch, when set, is told every change of the steps in use (the truth file's line).
	OnSwitch func(AdaptiveSwitch)
}

// noisePeriod is how long (in simulated time) one draw of the speed noise lasts.
const noisePeriod = time.Second

// NewEngine returns an idle scheduler for model m.
func NewEngine(m *Model, scale float64, logf func(string, ...any)) *Engine {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	e := &Engine{Model: m, Scale: scale, Log: logf, wake: make(chan struct{}, 1)}
	e.st.TTFT = newHistogram(ttftBuckets)
	e.st.ITL = newHistogram(itlBuckets)
	e.st.E2E = newHistogram(e2eBuckets)
	e.seedNoise(uint64(m.Args.RandomSeed))
	e.acceptModel = m
	if ad := m.Args.Adaptive; ad != nil && ad.LoadErr == nil {
		e.adapt = newAdaptiveController(ad.Rules, ad.slots, m.Args.Steps, cudaGraphBS(m.Args, m.Plan.CudaGraphMaxBS))
		e.acceptModel = m.forSteps(ad.Candidates[len(ad.Candidates)-1])
		e.variants = map[int]*Model{m.Args.Steps: m}
		e.stepsUsed = map[int]int{}
		e.curSteps.Store(int64(m.Args.Steps))
	}
	return e
}

// StartAdaptive activates the runtime state the policy starts on (AdaptiveController.init_states):
// on 0.5.10 the candidate nearest the initial steps, logged as a switch when they differ. The
// scheduler calls it before its first decode batch if the start-up has not.
func (e *Engine) StartAdaptive(now time.Time) {
	if e.adapt == nil || e.adaptStarted {
		return
	}
	e.adaptStarted = true
	if from := e.adapt.worker; e.adapt.start() {
		e.switched(from, 0, e.adapt.slots[0], "init", now)
	}
}

// AdaptiveSteps is the number of steps the server runs now; false when it is not adaptive.
func (e *Engine) AdaptiveSteps() (int, bool) {
	if e.adapt == nil {
		return 0, false
	}
	return int(e.curSteps.Load()), true
}

// StepsUsed is how many decode batches ran at each num_steps (nil when not adaptive).
func (e *Engine) StepsUsed() map[int]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stepsUsed == nil {
		return nil
	}
	out := make(map[int]int, len(e.stepsUsed))
	for k, v := range e.stepsUsed {
		out[k] = v
	}
	return out
}

// variant is the model of a decode step at k steps.
func (e *Engine) variant(k int) *Model {
	m, ok := e.variants[k]
	if !ok {
		m = e.Model.forSteps(k)
		e.variants[k] = m
	}
	return m
}

// switched logs and records a change of the steps in use the policy made (apply_runtime_state's line).
func (e *Engine) switched(from, bs int, s *adaptSlot, reason string, at time.Time) {
	k := e.adapt.worker
	e.Log("Switch adaptive runtime state: steps %d -> %d, draft_tokens %d -> %d", from, k, from+1, k+1)
	e.curSteps.Store(int64(k))
	if e.OnSwitch != nil {
		sw := AdaptiveSwitch{UnixMs: UnixMs(at), From: from, To: k, BatchSize: bs, Reason: reason, EMAAcceptLen: s.ema}
		if e.adapt.rules == "main" {
			slot := s.bs
			sw.Slot = &slot
		}
		e.OnSwitch(sw)
	}
}

// afterVerify feeds a decode batch's accepted drafts per request to the policy and logs what it does.
func (e *Engine) afterVerify(drafts []int, bs int, at time.Time) {
	from := e.adapt.worker
	s, old, updated := e.adapt.onVerify(drafts, bs)
	if !updated {
		return
	}
	e.Log("Adaptive spec params updated: steps %d -> %d (ema_accept_len=%.2f)", old, s.current, s.ema)
	if e.adapt.worker != from {
		e.switched(from, bs, s, "ema", at)
	}
}

// seedNoise seeds the speed noise from seed and the configuration (profile,
// tp, speculative algorithm and shape), so that servers of different
// configurations do not share one noise sequence while a run stays
// reproducible.
func (e *Engine) seedNoise(seed uint64) {
	m := e.Model
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d/%s/%d/%d/%d", m.Profile.Name, m.Args.TP, m.Args.SpecAlgo, m.Args.Steps, m.Args.TopK, m.Args.DraftTokens)
	e.noiseRNG = rand.New(rand.NewPCG(h.Sum64(), seed))
	e.noiseEnd, e.noiseF = time.Time{}, 1
}

// speed is the speed-noise factor of a batch starting at now: 1 without
// noise; else 1 + Noise*N(0,1), clamped to [0.5, 1.5], drawn anew in each
// noise period (scaled by the time scale) in which a batch starts. Periods
// are counted from the first batch; one without a batch draws nothing.
func (e *Engine) speed(now time.Time) float64 {
	noise := e.Model.Profile.Noise
	if noise == 0 {
		return 1
	}
	if e.noiseEnd.IsZero() || !now.Before(e.noiseEnd) {
		period := e.scaled(noisePeriod)
		switch {
		case e.noiseEnd.IsZero() || period <= 0:
			e.noiseEnd = now.Add(period)
		default:
			e.noiseEnd = e.noiseEnd.Add((now.Sub(e.noiseEnd)/period + 1) * period)
		}
		e.noiseF = min(1.5, max(0.5, 1+noise*e.noiseRNG.NormFloat64()))
	}
	return e.noiseF
}

// Submit hands a request to the scheduler; it never blocks.
func (e *Engine) Submit(r *Request) {
	e.inMu.Lock()
	e.incoming = append(e.incoming, r)
	e.inMu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Wake makes the scheduler look at its queues now (after an abort).
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Snapshot returns a copy of the statistics.
func (e *Engine) Snapshot() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.st
	s.TTFT, s.ITL, s.E2E = e.st.TTFT.clone(), e.st.ITL.clone(), e.st.E2E.clone()
	return s
}

// AvgAcceptLen is the accept length since start or the last flush, as of
// the last decode log line; false before any.
func (e *Engine) AvgAcceptLen() (float64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.st.CumVerifyReqSteps == 0 {
		return 0, false
	}
	return float64(e.st.CumAccepted) / float64(e.st.CumVerifyReqSteps), true
}

// LastProgress is when the scheduler last finished a batch.
func (e *Engine) LastProgress() time.Time { return time.Unix(0, e.progress.Load()) }

// FlushCache is the scheduler side of /flush_cache: refused unless idle;
// resetCounters also clears the decode log window, its batch count and the
// lifetime accept length (releases with internal_states do).
func (e *Engine) FlushCache(resetCounters bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.st.Running > 0 || e.st.Queued > 0 {
		return false
	}
	if resetCounters {
		e.st.CumAccepted, e.st.CumVerifyReqSteps = 0, 0
		e.winTokens, e.winAccept, e.winReqSt, e.decodeIters = 0, 0, 0, 0
	}
	return true
}

func (e *Engine) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * e.Scale)
}

// intake moves submitted requests into the waiting queue.
func (e *Engine) intake() {
	e.inMu.Lock()
	e.waiting = append(e.waiting, e.incoming...)
	clear(e.incoming)
	e.incoming = e.incoming[:0]
	e.inMu.Unlock()
}

// Idle reports whether nothing is queued or running.
func (e *Engine) Idle() bool { return len(e.waiting) == 0 && len(e.running) == 0 }

// dropAborted removes aborted requests from both queues.
func (e *Engine) dropAborted(now time.Time) {
	keep := e.waiting[:0]
	for _, r := range e.waiting {
		if r.aborted.Load() {
			r.push(0, now, "abort")
			continue
		}
		keep = append(keep, r)
	}
	clear(e.waiting[len(keep):])
	e.waiting = keep
	run := e.running[:0]
	for _, r := range e.running {
		if r.aborted.Load() {
			e.used -= e.Model.Footprint(r.Prompt, r.MaxNew)
			r.push(0, now, "abort")
			continue
		}
		run = append(run, r)
	}
	clear(e.running[len(run):])
	e.running = run
}

// Iterate plans the next batch: admission (FIFO, bounded by
// max_running_requests and the KV pool) then one prefill batch for newly
// admitted requests or one decode step for all running ones. It returns the
// batch's duration (already time-scaled) and the commit to run when the
// batch ends; commit is nil when there is nothing to do.
func (e *Engine) Iterate(now time.Time) (time.Duration, func(end time.Time)) {
	e.intake()
	e.dropAborted(now)
	pl := &e.Model.Plan
	var admitted []*Request
	newTokens := 0
	for len(e.waiting) > 0 && len(e.running) < pl.MaxRunning {
		r := e.waiting[0]
		fp := e.Model.Footprint(r.Prompt, r.MaxNew)
		if e.used+fp > pl.MaxTotalTokens && len(e.running) > 0 {
			break
		}
		if len(admitted) > 0 && newTokens+r.Prompt > pl.MaxPrefillTokens {
			break // one prefill batch holds at most max_prefill_tokens
		}
		newTokens += r.Prompt
		e.waiting = e.waiting[1:]
		e.used += fp
		e.running = append(e.running, r)
		admitted = append(admitted, r)
	}
	e.admittedAt = time.Time{}
	for _, r := range admitted {
		if r.Arrival.After(e.admittedAt) {
			e.admittedAt = r.Arrival
		}
	}
	if len(admitted) > 0 {
		return e.batchTime(now, e.Model.PrefillTime(newTokens)), func(end time.Time) { e.commitPrefill(admitted, newTokens, end) }
	}
	if len(e.running) == 0 {
		return 0, nil
	}
	ctx := 0
	for _, r := range e.running {
		ctx += r.Prompt + r.generated
	}
	m := e.Model
	if e.adapt != nil {
		e.StartAdaptive(now)
		from := e.adapt.worker
		if s, sw := e.adapt.activateForBatch(len(e.running)); sw {
			e.switched(from, len(e.running), s, "batch_size", now)
		}
		m = e.variant(e.adapt.worker)
	}
	return e.batchTime(now, m.StepTime(len(e.running), ctx)), func(end time.Time) { e.commitDecode(m, ctx, end) }
}

// batchTime is the real duration of a batch of model duration d starting at
// now: time-scaled, and multiplied by the speed noise.
func (e *Engine) batchTime(now time.Time, d time.Duration) time.Duration {
	if f := e.speed(now); f != 1 {
		d = time.Duration(float64(d) * f)
	}
	return e.scaled(d)
}

func (e *Engine) commitPrefill(admitted []*Request, newTokens int, end time.Time) {
	e.mu.Lock()
	for _, r := range admitted {
		r.generated = 1
		r.lastSched = end
		if r.Internal {
			continue
		}
		e.st.PromptTokens += int64(r.Prompt)
		e.st.GenTokens++
		e.st.TTFT.observe(end.Sub(r.Arrival).Seconds(), 1)
	}
	for _, r := range admitted {
		fin := ""
		if r.generated >= r.target {
			fin = r.stop
			e.finishReq(r, end)
		}
		r.push(1, end, fin)
	}
	e.refreshGauges()
	usage := e.tokenUsage()
	e.forwardCt++
	fwd := e.forwardCt
	e.mu.Unlock()
	if e.Args().Era.Rules == "v041" {
		e.Log("Prefill batch. #new-seq: %d, #new-token: %d, #cached-token: 0, cache hit rate: 0.00%%, token usage: %.2f, #running-req: %d, #queue-req: %d",
			len(admitted), newTokens, usage, len(e.running)-len(admitted), len(e.waiting))
	} else {
		era := e.Args().Era
		head, tail := "Prefill batch.", ""
		if era.DecodeBracket {
			head = fmt.Sprintf("Prefill batch [%d],", fwd)
		}
		if era.Timestamp {
			tail = "timestamp: " + pyISONow()
		}
		e.Log("%s #new-seq: %d, #new-token: %d, #cached-token: 0, token usage: %.2f, #running-req: %d, #queue-req: %d, %s",
			head, len(admitted), newTokens, usage, len(e.running)-len(admitted), len(e.waiting), tail)
	}
	e.removeFinished()
}

// commitDecode ends a decode step of model m (the server's, or an adaptive server's at the steps in use).
func (e *Engine) commitDecode(m *Model, ctx int, end time.Time) {
	spec := m.kind != ""
	bs := len(e.running)
	var produced, accepted int64
	var drafts []int // accepted draft tokens per request, for the adaptive policy
	if e.adapt != nil {
		drafts = make([]int, 0, bs)
	}
	e.mu.Lock()
	for _, r := range e.running {
		l := 1
		if spec {
			if r.accept == nil {
				r.accept = e.acceptModel.AcceptFor(r.Content.Class, r.Prompt, r.Temperature)
			}
			acc := r.accept
			if e.adapt != nil {
				acc = acc[:min(m.Args.Steps, len(acc))] // a step at k draws the first k positions
			}
			l = sampleChain(r.rng, acc)
		}
		n := min(l, r.target-r.generated)
		if drafts != nil {
			drafts = append(drafts, n-1)
		}
		if spec && e.LossyP > 0 && !r.Internal {
			// The step's first l-1 tokens are accepted drafts, the last the target's bonus token.
			r.lossy(e.LossyP, r.generated, min(n, l-1))
		}
		// SGLang counts the tokens it kept: a request finishing mid-step drops the accepted tokens
		// after its last one before the step's accept length is taken (the EAGLE verify loop sets
		// accept_index[i, j+1:] = -1 at req.finished(), then recounts accept_length).
		accepted += int64(n)
		produced += int64(n)
		r.generated += n
		r.verify++
		if n > 0 && !r.Internal {
			e.st.ITL.observe(end.Sub(r.lastSched).Seconds()/float64(n), n)
			r.lastSched = end
		}
		fin := ""
		if r.generated >= r.target {
			fin = r.stop
			e.finishReq(r, end)
		}
		r.push(n, end, fin)
	}
	e.st.GenTokens += produced
	if spec {
		e.st.VerifyCalls += int64(bs)
	}
	if e.stepsUsed != nil {
		e.stepsUsed[m.Args.Steps]++
	}
	e.winTokens += produced
	e.winAccept += accepted
	e.winReqSt += int64(bs)
	e.decodeIters++
	e.forwardCt++
	logNow := e.decodeIters%e.Args().DecodeLogInterval == 0
	var line string
	if logNow {
		el := end.Sub(e.winStart).Seconds()
		if e.winStart.IsZero() || el <= 0 {
			el = 1
		}
		e.st.GenThroughput = float64(e.winTokens) / el
		e.refreshGauges()
		e.st.Tokens = ctx + int(produced)
		if spec {
			al := float64(e.winAccept) / float64(e.winReqSt)
			e.st.AcceptLen, e.st.AcceptRate = al, acceptRate(m.Args, al)
			e.st.CumAccepted += e.winAccept
			e.st.CumVerifyReqSteps += e.winReqSt
		}
		line = e.decodeLine(bs, ctx+int(produced), spec)
		e.winTokens, e.winAccept, e.winReqSt, e.winStart = 0, 0, 0, end
	}
	if e.winStart.IsZero() {
		e.winStart = end
	}
	e.mu.Unlock()
	if logNow {
		e.Log("%s", line)
	}
	if e.adapt != nil {
		e.afterVerify(drafts, bs, end)
	}
	e.removeFinished()
}

// acceptRate is the era's accept rate of an interval with accept length al:
// accepted over verified tokens, or (2026) accepted drafts over proposed ones.
func acceptRate(a *Args, al float64) float64 {
	if a.Era.RateDraftMinus1 {
		if a.DraftTokens <= 1 {
			return 0
		}
		return (al - 1) / float64(a.DraftTokens-1)
	}
	return al / float64(a.DraftTokens)
}

// decodeLine formats the era's "Decode batch" log line; caller holds e.mu.
func (e *Engine) decodeLine(bs, tokens int, spec bool) string {
	era := e.Args().Era
	var b strings.Builder
	b.WriteString("Decode batch")
	if era.DecodeBracket {
		fmt.Fprintf(&b, " [%d]", e.forwardCt)
	}
	if era.DecodeComma {
		b.WriteString(",")
	} else {
		b.WriteString(".")
	}
	fmt.Fprintf(&b, " #running-req: %d, #token: %d, token usage: %.2f, ", bs, tokens, e.tokenUsage())
	if spec && era.AcceptLen {
		fmt.Fprintf(&b, "accept len: %.2f, ", e.st.AcceptLen)
		if era.AcceptRate {
			fmt.Fprintf(&b, "accept rate: %.2f, ", e.st.AcceptRate)
		}
	}
	if era.CudaGraph {
		fmt.Fprintf(&b, "%s: %s, ", graphLabel(era, e.Args().Device), pyBool(!e.Args().DisableCudaGraph && bs <= e.Model.Plan.CudaGraphMaxBS))
	}
	fmt.Fprintf(&b, "gen throughput (token/s): %.2f, ", e.st.GenThroughput)
	if era.LargestLen {
		b.WriteString("largest-len: 0, ")
	}
	fmt.Fprintf(&b, "#queue-req: %d", len(e.waiting))
	if era.Timestamp {
		b.WriteString(", timestamp: " + pyISONow())
	}
	if era.TrailingComma {
		b.WriteString(", ")
	}
	return b.String()
}

// graphLabel is the Decode line's name for the graph field on device
// (--device; unset resolves to cuda on a GPU host).
func graphLabel(era *Era, device string) string {
	switch {
	case era.GraphLabel == "cpu" && device != "" && device != "cuda":
		return "cpu graph"
	case era.GraphLabel == "device" && (device == "cpu" || device == "npu"):
		return device + " graph"
	}
	return "cuda graph"
}

// pyISONow is datetime.datetime.now().isoformat(): local time, microseconds.
func pyISONow() string { return time.Now().Format("2006-01-02T15:04:05.000000") }

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// Args returns the effective arguments.
func (e *Engine) Args() *Args { return e.Model.Args }

// finishReq records a finished request; the scheduler goroutine calls it
// holding e.mu.
func (e *Engine) finishReq(r *Request, end time.Time) {
	e.used -= e.Model.Footprint(r.Prompt, r.MaxNew)
	if r.Internal {
		return
	}
	e.st.Requests++
	e.st.E2E.observe(end.Sub(r.Arrival).Seconds(), 1)
}

func (e *Engine) removeFinished() {
	run := e.running[:0]
	for _, r := range e.running {
		if r.generated < r.target {
			run = append(run, r)
		}
	}
	clear(e.running[len(run):])
	e.running = run
}

// refreshGauges updates running/queued gauges; caller holds e.mu.
func (e *Engine) refreshGauges() {
	e.st.Running, e.st.Queued = len(e.running), len(e.waiting)
	e.st.TokenUsage = e.tokenUsage()
}

func (e *Engine) tokenUsage() float64 {
	if e.Model.Plan.MaxTotalTokens == 0 {
		return 0
	}
	return float64(e.used) / float64(e.Model.Plan.MaxTotalTokens)
}

// batchStart is when a batch planned at now starts, the previous one having ended at prev (zero:
// idle before). A little late, it starts at prev so the delay does not accumulate, but never before
// the arrival of a request it admitted (arrived): that request would get its first token before it
// came (a truth line with first token before arrival, seen under CPU load).
func batchStart(now, prev, arrived time.Time) time.Time {
	if prev.IsZero() || !prev.Before(now) || now.Sub(prev) >= 20*time.Millisecond {
		return now
	}
	if arrived.After(prev) {
		if arrived.After(now) {
			return now
		}
		return arrived
	}
	return prev
}

// Run is the live scheduler loop. It paces batches by deadlines so timer
// overshoot does not accumulate, and returns when stop is closed. check runs
// before every iteration (failure injection); it may block or never return.
func (e *Engine) Run(stop <-chan struct{}, check func()) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var deadline time.Time
	for {
		if check != nil {
			check()
		}
		now := time.Now()
		d, commit := e.Iterate(now)
		if commit == nil {
			e.mu.Lock()
			e.refreshGauges()
			e.mu.Unlock()
			deadline = time.Time{} // idle: the next batch starts when work arrives
			select {
			case <-e.wake:
				continue
			case <-stop:
				return
			}
		}
		deadline = batchStart(now, deadline, e.admittedAt).Add(d)
		if wait := time.Until(deadline); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-stop:
				return
			}
		}
		commit(deadline)
		e.progress.Store(deadline.UnixNano())
	}
}
