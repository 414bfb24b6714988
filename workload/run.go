package workload

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// runner is the state of one level.
type runner struct {
	// tokensPerStep is the measured requests' completion tokens per content chunk after the first
	// (0: unknown), set by fill: the accept length where nothing else gives it.
	tokensPerStep float64
	cfg           Config
	base          string
	path          string // /v1/chat/completions or /v1/completions
	client        *http.Client
	loop          *evLoop // reads the streams when it can (nil: net/http does)
	model         []byte  // JSON string
	parts         bodyParts
	set           *SetDataset // the prompts, when they are a prompt set's

	shards []*shard

	mu          sync.Mutex
	errs        []ErrorSample
	consecutive int
	aborted     string
	completed   int
	failed      int
	warmOK      int
	warmFailed  int
	save        *bufio.Writer
	saveErr     error
	abort       context.CancelCauseFunc
	lastEnd     time.Time
	sent        atomic.Int64
	workerPool  sync.Pool
	measureFrom time.Time
	series      []float64 // output tokens per Config.SeriesWidth from measureFrom (under mu)

	// maxRequests caps the measured requests sent (0: none): Config.Requests, or a Precision's
	// MaxRequests.
	maxRequests int
	// acc gathers the interval's data (under mu); lastSend is when the last measured request was
	// sent (UnixNano: the drain begins there); stop, set by a Precision's check whose window ended
	// at stopAt (an offset from measureFrom, under mu), refuses further requests.
	acc      *intervalAcc
	lastSend atomic.Int64
	stop     atomic.Bool
	stopAt   time.Duration
	stopE2E  time.Duration // the mean E2E latency the decision saw (under mu)
}

// shard holds the figures of some workers; merged once at the end.
type shard struct {
	mu                   sync.Mutex
	ttft, itl, tpot, e2e *dist
	in, out              int64
	usageMissing         int
	// The first turns' input tokens and count, and the later turns completed.
	firstIn, firsts, later int64
	// Speculative tokens per streamed step: the completion tokens after the first (from prefill)
	// and the content chunks after the first, of requests with usage.
	stepTokens, steps int64
}

func newShard() *shard {
	return &shard{ttft: newDist(), itl: newDist(), tpot: newDist(), e2e: newDist()}
}

// errLevelAborted is the cause given to requests still in flight when a level is cut short.
var errLevelAborted = errors.New("level aborted")

// Run runs one load level: warmup, then the measured requests, and returns its figures. It
// returns an error only when the level cannot start (bad configuration, dataset or URL, no model)
// or when ctx is cancelled (then with the partial result); a server that fails, dies or hangs is
// reported in the Result (Failed, Errors, Aborted).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	base, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, base: base, client: cfg.HTTPClient}
	r.set, _ = cfg.Prompts.(*SetDataset)
	if r.client == nil {
		r.client = NewHTTPClient(max(cfg.Concurrency, 1))
		defer r.client.CloseIdleConnections()
	}
	r.path = "/v1/chat/completions"
	if cfg.API == APICompletions {
		r.path = "/v1/completions"
	}
	if u, err := url.Parse(r.base + r.path); err == nil {
		if r.loop, err = newEvLoop(r.client, u, cfg.APIKey, max(cfg.Concurrency, 1)+16); err != nil {
			return nil, fmt.Errorf("start the load generator's reader: %w", err)
		}
		if r.loop != nil {
			defer r.loop.Close()
		}
	}
	if cfg.Model == "" {
		if r.cfg.Model, err = r.firstModel(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
	}
	r.model = jsonString(r.cfg.Model)
	r.parts = newBodyParts(cfg.API, r.model, cfg.OutputTokens, cfg.Temperature)
	if cfg.SaveRequests != nil {
		r.save = bufio.NewWriterSize(cfg.SaveRequests, 64<<10)
	}
	nShards := max(1, min(cfg.Concurrency, runtime.GOMAXPROCS(0)))
	if cfg.Concurrency == 0 {
		nShards = runtime.GOMAXPROCS(0)
	}
	for range nShards {
		r.shards = append(r.shards, newShard())
	}
	r.workerPool.New = func() any { return &worker{r: r, sse: NewSSEReader(nil, nil, 0)} }
	res := &Result{API: cfg.API, Model: r.cfg.Model, Dataset: cfg.Prompts.String(), Concurrency: cfg.Concurrency,
		RequestRate: cfg.RequestRate, InputTokens: cfg.InputTokens, OutputTokens: cfg.OutputTokens}
	if r.set != nil {
		res.InputTokens = r.set.padTo
	}

	// Warmup: at the level's concurrency, its own prompts, figures dropped.
	if cfg.Warmup > 0 {
		r.warmup(ctx)
		res.WarmupCompleted, res.WarmupFailed = r.warmOK, r.warmFailed
		if ctx.Err() != nil {
			r.fill(res)
			return res, ctx.Err()
		}
		if r.warmOK == 0 {
			r.fill(res)
			res.Aborted = fmt.Sprintf("all %d warmup requests failed", cfg.Warmup)
			if len(r.errs) > 0 {
				res.Aborted += ": " + r.errs[0].Message
			}
			return res, nil
		}
	}

	r.warmConnections(ctx, min(cfg.Concurrency, 1024))
	info := r.serverInfo(ctx)
	before := r.counters(ctx)
	logMark := -1 // where the window begins in the server's log (-1: not read)
	// A phase reads the log for an adaptive server's step switches (Result.Switches) too.
	if cfg.ServerLog != nil && (!(before.ok && before.hasVerify) || cfg.SeriesWidth > 0) {
		if m, err := cfg.ServerLog.LogMark(ctx); err == nil {
			logMark = m
		}
	}
	lctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	r.abort = abort
	r.maxRequests = cfg.Requests
	metric, confidence := MetricOutputTokS, DefaultConfidence
	if p := cfg.Precision; p != nil {
		r.maxRequests, metric, confidence = p.MaxRequests, p.Metric, p.Confidence
	}
	// The ramp-up ends when as many requests have completed as the level keeps in flight (closed
	// loop: each slot has been refilled once), or with the first (open loop: the arrivals were
	// never synchronised; by one E2E latency in, the requests in flight are at their steady count).
	rampN := 1
	if cfg.RequestRate == 0 {
		rampN = cfg.Concurrency
		if r.maxRequests > 0 {
			rampN = min(rampN, r.maxRequests)
		}
	}
	r.acc = newIntervalAcc(metric, rampN)
	start := time.Now()
	r.measureFrom = start
	checked := make(chan struct{})
	stopCheck := make(chan struct{})
	if p := cfg.Precision; p != nil {
		go func() {
			defer close(checked)
			r.checkPrecision(stopCheck, *p)
		}()
	} else {
		close(checked)
	}
	if cfg.RequestRate > 0 {
		r.openLoop(lctx, start)
	} else {
		r.closedLoop(lctx, start)
	}
	close(stopCheck)
	<-checked
	end := r.lastEnd
	if end.IsZero() || end.Before(start) {
		end = time.Now()
	}
	res.Start, res.Duration = start, end.Sub(start)
	r.fill(res)
	res.Interval = r.finalInterval(cfg.Precision, confidence)
	if w := cfg.SeriesWidth; w > 0 {
		r.mu.Lock()
		res.Series = make([]float64, len(r.series))
		for k, tok := range r.series {
			res.Series[k] = tok / w.Seconds()
		}
		r.mu.Unlock()
	}
	if r.save != nil {
		if err := r.save.Flush(); err != nil && r.saveErr == nil {
			r.saveErr = err
		}
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if res.Aborted == "" && res.Completed > 0 {
		after := r.counters(ctx)
		info2 := serverInfo{}
		var decode *float64
		var lines []string
		if logMark >= 0 {
			if l, err := cfg.ServerLog.LogsSince(ctx, logMark); err == nil {
				lines = l
			}
		}
		if !(before.ok && before.hasVerify) {
			decode = DecodeAcceptLength(lines)
			info2 = r.serverInfo(ctx)
		}
		if cfg.SeriesWidth > 0 {
			res.Switches, res.SwitchCount = AdaptiveSwitches(lines)
		}
		res.AcceptLength, res.AcceptLengthSource = acceptLength(info, before, after, decode, info2,
			int64(res.Completed), r.tokensPerStep)
	}
	if r.saveErr != nil {
		return res, fmt.Errorf("save requests: %w", r.saveErr)
	}
	return res, nil
}

// fill copies the runner's counts and merged figures into res.
func (r *runner) fill(res *Result) {
	r.mu.Lock()
	res.Completed, res.Failed, res.Aborted = r.completed, r.failed, r.aborted
	res.Sent = int(r.sent.Load())
	res.Errors = append([]ErrorSample(nil), r.errs...)
	r.mu.Unlock()
	all := newShard()
	for _, s := range r.shards {
		s.mu.Lock()
		all.ttft.merge(s.ttft)
		all.itl.merge(s.itl)
		all.tpot.merge(s.tpot)
		all.e2e.merge(s.e2e)
		all.in += s.in
		all.out += s.out
		all.usageMissing += s.usageMissing
		all.stepTokens += s.stepTokens
		all.steps += s.steps
		all.firstIn += s.firstIn
		all.firsts += s.firsts
		all.later += s.later
		s.mu.Unlock()
	}
	res.TTFT, res.ITL, res.TPOT, res.E2E = all.ttft.summary(), all.itl.summary(), all.tpot.summary(), all.e2e.summary()
	res.TotalInputTokens, res.TotalOutputTokens, res.UsageMissing = all.in, all.out, all.usageMissing
	res.LaterTurns = int(all.later)
	if n := float64(all.firsts + all.later); n > 0 {
		res.MeanInputTokens, res.MeanOutputTokens = float64(all.in)/n, float64(all.out)/n
	}
	if all.firsts > 0 {
		res.MeanFirstInputTokens = float64(all.firstIn) / float64(all.firsts)
	}
	if all.steps > 0 {
		r.tokensPerStep = float64(all.stepTokens) / float64(all.steps)
	}
	if sec := res.Duration.Seconds(); sec > 0 {
		res.RequestThroughput = float64(res.Completed) / sec
		res.InputThroughput = float64(res.TotalInputTokens) / sec
		res.OutputThroughput = float64(res.TotalOutputTokens) / sec
	}
}

func (r *runner) warmup(ctx context.Context) {
	n := r.cfg.Warmup
	par := min(n, max(r.cfg.Concurrency, 1))
	var next, convs atomic.Int64
	var wg sync.WaitGroup
	key := streamKey(&r.cfg, true)
	claim := func() (int, bool) {
		i := int(next.Add(1) - 1)
		return i, i < n && ctx.Err() == nil
	}
	for range par {
		wg.Go(func() {
			r.converse(ctx, key, claim, &convs, func(_ int, o *outcome) {
				r.mu.Lock()
				if o.ok {
					r.warmOK++
				} else {
					r.warmFailed++
					r.noteError(-1, "warmup: "+o.errMsg)
				}
				r.mu.Unlock()
			})
		})
	}
	wg.Wait()
}

// converse is one worker of a closed loop: it sends request after request while claim gives it
// an index, a conversation's turns in order (each once the answer before it has ended), and hands
// each outcome to done. convs counts the conversations begun.
func (r *runner) converse(ctx context.Context, key uint64, claim func() (int, bool), convs *atomic.Int64,
	done func(i int, o *outcome)) {
	w := r.workerPool.Get().(*worker)
	defer r.workerPool.Put(w)
	c := &w.conv
	c.turns = 0
	for {
		i, ok := claim()
		if !ok {
			return
		}
		if c.turns == 0 {
			r.begin(c, key, i, convs)
		}
		o := w.do(ctx, c)
		done(i, o)
		c.advance(o, w.answer)
	}
}

// more reports whether measured request i may be sent.
func (r *runner) more(ctx context.Context, i int, deadline time.Time) bool {
	if ctx.Err() != nil {
		return false
	}
	if r.maxRequests > 0 && i >= r.maxRequests {
		return false
	}
	if r.stop.Load() {
		return false
	}
	if r.cfg.Duration > 0 && !time.Now().Before(deadline) {
		return false
	}
	return true
}

func (r *runner) closedLoop(ctx context.Context, start time.Time) {
	deadline := start.Add(r.cfg.Duration)
	key := streamKey(&r.cfg, false)
	var next, convs atomic.Int64
	var wg sync.WaitGroup
	slots := r.cfg.Concurrency
	if r.maxRequests > 0 {
		slots = min(slots, r.maxRequests) // no idle workers for a level of few requests
	}
	claim := func() (int, bool) {
		i := int(next.Add(1) - 1)
		if !r.more(ctx, i, deadline) {
			return 0, false
		}
		r.sent.Add(1)
		r.lastSend.Store(time.Now().UnixNano())
		return i, true
	}
	for wi := range slots {
		sh := r.shards[wi%len(r.shards)]
		wg.Go(func() {
			r.converse(ctx, key, claim, &convs, func(i int, o *outcome) { r.record(sh, i, o) })
		})
	}
	wg.Wait()
}

func (r *runner) openLoop(ctx context.Context, start time.Time) {
	deadline := start.Add(r.cfg.Duration)
	key := streamKey(&r.cfg, false)
	limit := r.cfg.Concurrency
	if limit == 0 {
		limit = OpenLoopMaxInFlight
	}
	sem := make(chan struct{}, limit)
	rng := rand.New(rand.NewPCG(r.cfg.Seed, key))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var wg sync.WaitGroup
	// An arrival sends the oldest conversation's next turn whose answer has ended, else begins a
	// conversation: the rate is of requests, whatever the turns.
	var ready followUps
	var convs atomic.Int64
	at := start
	for i := 0; r.more(ctx, i, deadline); i++ {
		if i > 0 {
			at = at.Add(time.Duration(rng.ExpFloat64() / r.cfg.RequestRate * float64(time.Second)))
			if wait := time.Until(at); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-ctx.Done():
					wg.Wait()
					return
				}
			}
			if !r.more(ctx, i, deadline) {
				break
			}
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		sh := r.shards[i%len(r.shards)]
		c := ready.pop()
		if c == nil {
			c = &conversation{}
			r.begin(c, key, i, &convs)
		}
		r.sent.Add(1)
		r.lastSend.Store(time.Now().UnixNano())
		wg.Go(func() {
			defer func() { <-sem }()
			w := r.workerPool.Get().(*worker)
			defer r.workerPool.Put(w)
			o := w.do(ctx, c)
			r.record(sh, i, o)
			if c.advance(o, w.answer) {
				ready.push(c)
			}
		})
	}
	wg.Wait()
}

// addSeries spreads a completed request's tokens over the intervals from its first token to its end.
func (r *runner) addSeries(o *outcome) {
	w := r.cfg.SeriesWidth
	if w <= 0 || o.completion <= 0 {
		return
	}
	from, to := o.start.Add(o.ttft).Sub(r.measureFrom), o.end.Sub(r.measureFrom)
	from = max(from, 0)
	to = max(to, from)
	r.mu.Lock()
	defer r.mu.Unlock()
	if to == from {
		if k := int(from / w); k < MaxSeries {
			r.series = growSeries(r.series, k)
			r.series[k] += float64(o.completion)
		}
		return
	}
	rate := float64(o.completion) / float64(to-from)
	for k := int(from / w); k < MaxSeries && time.Duration(k)*w < to; k++ {
		lo, hi := max(from, time.Duration(k)*w), min(to, time.Duration(k+1)*w)
		r.series = growSeries(r.series, k)
		r.series[k] += rate * float64(hi-lo)
	}
}

func growSeries(s []float64, k int) []float64 {
	for len(s) <= k {
		s = append(s, 0)
	}
	return s
}

// record adds one measured request's outcome.
func (r *runner) record(sh *shard, i int, o *outcome) {
	if o.ok {
		r.addSeries(o)
		sh.mu.Lock()
		sh.ttft.record(o.ttft)
		sh.e2e.record(o.e2e)
		for _, d := range o.itls {
			sh.itl.record(d)
		}
		if o.completion > 1 {
			sh.tpot.record((o.e2e - o.ttft) / time.Duration(o.completion-1))
		}
		sh.in += o.prompt
		sh.out += o.completion
		if o.turn == 0 {
			sh.firstIn += o.prompt
			sh.firsts++
		} else {
			sh.later++
		}
		if !o.usage {
			sh.usageMissing++
		} else if o.chunks > 1 && o.completion > 1 {
			sh.stepTokens += o.completion - 1
			sh.steps += int64(o.chunks - 1)
		}
		sh.mu.Unlock()
	}
	r.mu.Lock()
	if end := o.start.Add(o.e2e); o.ok && end.After(r.lastEnd) {
		r.lastEnd = end
	} else if !o.ok && o.end.After(r.lastEnd) {
		r.lastEnd = o.end
	}
	if o.ok {
		r.completed++
		r.consecutive = 0
		r.acc.add(o.start.Add(o.ttft).Sub(r.measureFrom), o.start.Add(o.e2e).Sub(r.measureFrom), o.completion, o.ttft, o.e2e)
	} else {
		r.failed++
		r.noteError(i, o.errMsg)
		if !o.levelAborted {
			r.consecutive++
		}
		if lim := r.cfg.MaxConsecutiveFailures; lim > 0 && r.consecutive >= lim && r.aborted == "" {
			r.aborted = fmt.Sprintf("stopped after %d failed requests in a row; last error: %s", r.consecutive, o.errMsg)
			r.abort(errLevelAborted)
		}
	}
	if r.save != nil && r.saveErr == nil {
		rec := RequestRecord{Concurrency: r.cfg.Concurrency, Index: i, ID: o.id, StartUnixMs: float64(o.start.UnixNano()) / 1e6, OK: o.ok,
			E2EMs: ms(o.e2e), PromptTokens: o.prompt, CompletionTokens: o.completion, Chunks: o.chunks, Error: o.errMsg}
		if o.turns > 1 {
			rec.Turn = o.turn + 1
		}
		if o.ok {
			rec.TTFTMs = ms(o.ttft)
		} else {
			rec.E2EMs = ms(o.end.Sub(o.start))
		}
		b, _ := json.Marshal(rec)
		b = append(b, '\n')
		if _, err := r.save.Write(b); err != nil {
			r.saveErr = err
		}
	}
	c, f := r.completed, r.failed
	r.mu.Unlock()
	if r.cfg.Progress != nil {
		r.cfg.Progress(c, f)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// noteError keeps the first distinct causes; the caller holds r.mu.
func (r *runner) noteError(i int, msg string) {
	for k := range r.errs {
		if r.errs[k].Message == msg {
			r.errs[k].Count++
			return
		}
	}
	if len(r.errs) < maxErrorSamples-1 {
		r.errs = append(r.errs, ErrorSample{Message: msg, Count: 1, FirstRequest: i})
		return
	}
	if len(r.errs) < maxErrorSamples {
		r.errs = append(r.errs, ErrorSample{Message: otherErrors, FirstRequest: i})
	}
	r.errs[len(r.errs)-1].Count++
}

// otherErrors labels the causes beyond the first distinct ones.
const otherErrors = "(other errors)"
