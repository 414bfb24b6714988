package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/workload"
)

// behaviour scripts what a fake server does for one launch.
type behaviour struct {
	startErr  error            // Start fails (host trouble when not a *hostctl.Failure)
	readyErr  error            // WaitReady fails
	crashAt   int              // Check reports this failure from the crashAt-th load level on (1-based; 0: never)
	crash     *hostctl.Failure // the failure reported
	stop      hostctl.StopResult
	loadDelay time.Duration // each level takes this long (for interruption tests)
	hangURL   string        // the server hangs: every request fails and BaseURL points here
	// silent: the server hangs mid-level without failing a request (the streams just stop): the
	// level blocks producing no activity until cancelled; BaseURL points to hangURL.
	silent bool
	// partial: this many requests of each level fail while the server stays alive; BaseURL points
	// to aliveURL (its /health_generate answers 200).
	partial  int
	aliveURL string
	// lossy: the server's greedy answers are not the model's (a broken speculative path).
	lossy bool
	// warmupDies: the server dies as its first level begins: every warmup request fails, so the
	// level is aborted with no measured request failed, and Check reports crash only from its second
	// call after that level (a unit's state shows a death a moment after the connections break).
	warmupDies bool
	// diesSlowly: with warmupDies, Check reports the crash only from this call on (a Slurm job's
	// state shows a killed rank a few polls later); 0 is 2.
	diesSlowly int
}

// fakeWorld holds every fake host and checks invariants across them: one server per host at a time,
// never a level against a server that is not ready.
type fakeWorld struct {
	t      *testing.T
	mu     sync.Mutex
	behave func(host string, l hostctl.Launch, n int) behaviour
	hosts  map[string]*fakeHost
	starts map[string]int // launches by point argv key
	levels []levelCall
	checks []checkCall // output check passes
	// speed, when set, is a speculative point's output tok/s per concurrent request (by its
	// --speculative-num-steps); otherwise 100 x (1 + 0.3 x steps).
	speed func(steps int) float64
	alive *httptest.Server // aliveServer
}

type levelCall struct {
	host        string
	argv        string
	concurrency int
}

func newWorld(t *testing.T, behave func(host string, l hostctl.Launch, n int) behaviour) *fakeWorld {
	if behave == nil {
		behave = func(string, hostctl.Launch, int) behaviour { return behaviour{} }
	}
	return &fakeWorld{t: t, behave: behave, hosts: map[string]*fakeHost{}, starts: map[string]int{}}
}

func (w *fakeWorld) host(name string) *fakeHost {
	h := &fakeHost{w: w, name: name}
	w.hosts[name] = h
	return h
}

type fakeHost struct {
	w        *fakeWorld
	name     string
	running  *fakeInstance // the live server, if any
	restored int
	launches int
}

func (h *fakeHost) Name() string { return h.name }

// Slots: a fake host runs one point at a time (packMachine packs).
func (h *fakeHost) Slots() hostctl.Slots { return hostctl.Slots{N: 1} }

// Slot is never asked of a host that runs one point at a time: the host itself.
func (h *fakeHost) Slot(int) hostctl.Host { return h }

func (h *fakeHost) Close() error { return nil }

func (h *fakeHost) Start(ctx context.Context, l hostctl.Launch) (hostctl.Instance, error) {
	w := h.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.running != nil && !h.running.stopped {
		w.t.Errorf("host %s: Start while instance %s still runs", h.name, h.running.id)
	}
	key := strings.Join(l.Argv, " ")
	w.starts[key]++
	h.launches++
	b := w.behave(h.name, l, w.starts[key])
	if b.startErr != nil {
		return nil, b.startErr
	}
	inst := &fakeInstance{h: h, l: l, b: b, id: fmt.Sprintf("%s-%d", h.name, h.launches)}
	h.running = inst
	return inst, nil
}

func (h *fakeHost) Restore(ctx context.Context) error {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if h.running != nil && !h.running.stopped {
		h.w.t.Errorf("host %s: Restore while instance %s still runs", h.name, h.running.id)
	}
	h.restored++
	return nil
}

func (h *fakeHost) Provenance(ctx context.Context) (hostctl.Provenance, error) {
	return hostctl.Provenance{Hostname: h.name, Driver: "fake", Kernel: "6.1"}, nil
}

type fakeInstance struct {
	h       *fakeHost
	l       hostctl.Launch
	b       behaviour
	id      string
	ready   bool
	stopped bool
	levels  int
	// deadChecks counts the Checks since a warmupDies server died (-1: alive).
	deadChecks int
}

func (i *fakeInstance) ID() string { return i.id }

// A fake server offers no log to read the accept length from, and its host is never lost.
func (i *fakeInstance) LogMark(context.Context) (int, error) { return 0, errors.New("fake: no log") }
func (i *fakeInstance) LogsSince(context.Context, int) ([]string, error) {
	return nil, errors.New("fake: no log")
}
func (i *fakeInstance) HostLost(context.Context) error { return nil }

func (i *fakeInstance) WaitReady(ctx context.Context) (hostctl.Ready, error) {
	i.h.w.mu.Lock()
	defer i.h.w.mu.Unlock()
	if i.b.readyErr != nil {
		return hostctl.Ready{}, i.b.readyErr
	}
	i.ready = true
	return hostctl.Ready{At: time.Now(), Elapsed: 1500 * time.Millisecond, Probes: 7,
		ServerInfo: []byte(`{"version":"0.5.9-fake","speculative_num_draft_tokens":4}`)}, nil
}

func (i *fakeInstance) Check(ctx context.Context) (*hostctl.Failure, error) {
	i.h.w.mu.Lock()
	defer i.h.w.mu.Unlock()
	if i.b.crashAt > 0 && i.levels >= i.b.crashAt {
		return i.b.crash, nil
	}
	if i.b.warmupDies && i.levels > 0 {
		if i.deadChecks++; i.deadChecks >= max(2, i.b.diesSlowly) {
			return i.b.crash, nil
		}
	}
	return nil, nil
}

func (i *fakeInstance) State(ctx context.Context) (hostctl.State, error) { return hostctl.State{}, nil }
func (i *fakeInstance) Logs(ctx context.Context) ([]string, error)       { return nil, nil }

func (i *fakeInstance) Stop(ctx context.Context, progress func(hostctl.State)) (hostctl.StopResult, error) {
	i.h.w.mu.Lock()
	defer i.h.w.mu.Unlock()
	if i.stopped {
		i.h.w.t.Errorf("instance %s stopped twice", i.id)
	}
	i.stopped = true
	res := i.b.stop
	if res.Duration == 0 {
		res.Duration, res.Clean, res.SIGKILL = 800*time.Millisecond, true, true
	}
	return res, nil
}

func (i *fakeInstance) HTTPClient() *http.Client { return http.DefaultClient }
func (i *fakeInstance) BaseURL() string {
	switch {
	case i.b.hangURL != "":
		return i.b.hangURL
	case i.b.aliveURL != "":
		return i.b.aliveURL
	case i.b.crashAt > 0 || i.b.warmupDies:
		return "http://127.0.0.1:1" // loopback, refused: a probe of a server scripted to die fails
	}
	// A server scripted to live answers the liveness probe, as a live one does: with a refused
	// address, a level whose data came late on a loaded machine (no data for SilenceProbe, 200 ms)
	// failed its point as "server gone" (go test -p 3 beside the end-to-end tests, 2026-12-07).
	return i.h.w.aliveServer()
}

// aliveServer is the URL of a server whose every path answers 200, made on first use.
func (w *fakeWorld) aliveServer() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.alive == nil {
		w.alive = httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		w.t.Cleanup(w.alive.Close)
	}
	return w.alive.URL
}
func (i *fakeInstance) Address() string { return i.id + ".fake:30000" }

// ready finds the ready server at url (w.mu held); nil, and the test fails, when there is none.
func (w *fakeWorld) ready(url, what string) *fakeInstance {
	for _, h := range w.hosts {
		if h.running != nil && "http://"+h.running.Address() == url && h.running.ready && !h.running.stopped {
			return h.running
		}
	}
	w.t.Errorf("%s against %s, which is not a ready server", what, url)
	return nil
}

// answer is the fake output check: a ready server answers each prompt with a text that depends only
// on the prompt (greedy decoding is lossless), unless it is lossy.
func (w *fakeWorld) answer(ctx context.Context, cfg workload.CheckConfig) ([]string, error) {
	w.mu.Lock()
	inst := w.ready(cfg.URL, "output check")
	if inst == nil {
		w.mu.Unlock()
		return nil, errors.New("no server")
	}
	lossy := inst.b.lossy
	w.checks = append(w.checks, checkCall{argv: strings.Join(inst.l.Argv, " "), cfg: cfg})
	w.mu.Unlock()
	out := make([]string, len(cfg.Prompts))
	for i, p := range cfg.Prompts {
		out[i] = "the answer to " + p + " is long enough to count words in"
		if lossy {
			out[i] = "the answer to something else entirely"
		}
	}
	return out, ctx.Err()
}

type checkCall struct {
	argv string
	cfg  workload.CheckConfig
}

// load is the fake load generator: it finds the instance by its address and returns figures that
// grow with concurrency and speculative steps, or fails like a client facing a dead server.
func (w *fakeWorld) load(ctx context.Context, cfg workload.Config) (*workload.Result, error) {
	w.mu.Lock()
	inst := w.ready(cfg.URL, "load")
	if inst == nil {
		w.mu.Unlock()
		return nil, errors.New("no server")
	}
	inst.levels++
	w.levels = append(w.levels, levelCall{host: inst.h.name, argv: strings.Join(inst.l.Argv, " "), concurrency: cfg.Concurrency})
	crashed := inst.b.crashAt > 0 && inst.levels >= inst.b.crashAt
	delay := inst.b.loadDelay
	if delay == 0 {
		delay = 2 * time.Millisecond // long enough for every worker to get its share
	}
	silent := inst.b.silent
	if inst.b.warmupDies {
		inst.deadChecks = 0
		w.mu.Unlock()
		return &workload.Result{Concurrency: cfg.Concurrency, WarmupFailed: cfg.Warmup,
			Aborted: fmt.Sprintf("all %d warmup requests failed: connection refused", cfg.Warmup)}, nil
	}
	w.mu.Unlock()
	if silent {
		<-ctx.Done() // no byte comes back, no request ends: only a liveness probe can tell
		return &workload.Result{Concurrency: cfg.Concurrency, Sent: cfg.Concurrency, Failed: cfg.Concurrency}, nil
	}
	if delay > 0 {
		// A live server streams: activity while the level runs.
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		end := time.After(delay)
	wait:
		for {
			if cfg.Activity != nil {
				cfg.Activity.Store(time.Now().UnixNano())
			}
			select {
			case <-ctx.Done():
				return &workload.Result{Concurrency: cfg.Concurrency, Sent: 1, Failed: 1}, nil
			case <-end:
				break wait
			case <-tick.C:
			}
		}
	}
	if k := inst.b.partial; k > 0 {
		d := workload.Dist{Count: int64(cfg.Requests - k), Mean: 20, Median: 19, P99: 40}
		return &workload.Result{Concurrency: cfg.Concurrency, Sent: cfg.Requests, Completed: cfg.Requests - k, Failed: k,
			Duration: time.Second, OutputThroughput: 50, TTFT: d, ITL: d, TPOT: d, E2E: d,
			Errors: []workload.ErrorSample{{Message: "HTTP 500: internal error", Count: k}}}, nil
	}
	if inst.b.hangURL != "" {
		return &workload.Result{Concurrency: cfg.Concurrency, Sent: cfg.Requests, Failed: cfg.Requests,
			Errors: []workload.ErrorSample{{Message: "stalled", Count: cfg.Requests}}}, nil
	}
	if crashed {
		// The server died: requests fail; the runner must learn why from Check.
		return &workload.Result{Concurrency: cfg.Concurrency, Sent: cfg.Requests, Completed: 1, Failed: cfg.Requests - 1,
			Errors: []workload.ErrorSample{{Message: "connection refused", Count: cfg.Requests - 1}}}, nil
	}
	speed := 100.0
	var accept *float64
	for i, a := range inst.l.Argv {
		if a == "--speculative-num-steps" {
			var s int
			fmt.Sscan(inst.l.Argv[i+1], &s)
			speed *= 1 + 0.3*float64(s)
			if w.speed != nil {
				speed = w.speed(s)
			}
			al := 1 + 0.8*float64(s)
			accept = &al
		}
	}
	d := workload.Dist{Count: int64(cfg.Requests), Mean: 20, Median: 19, P99: 40}
	return &workload.Result{Concurrency: cfg.Concurrency, Sent: cfg.Requests, Completed: cfg.Requests,
		Duration: time.Second, TotalOutputTokens: int64(cfg.Requests * cfg.OutputTokens),
		OutputThroughput: speed * float64(cfg.Concurrency), RequestThroughput: float64(cfg.Requests),
		TTFT: d, ITL: d, TPOT: d, E2E: d, AcceptLength: accept}, nil
}
