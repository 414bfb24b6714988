package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
	"github.com/specsweep/specsweep/workload"
)

// Runner runs sweeps with one worker per host.
type Runner struct {
	cfg Config
	// redact hides the running sweep's secrets in live updates (set by Run).
	redact *redactor
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Runner, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg}, nil
}

// Outcome is how a Run ended.
type Outcome struct {
	SweepID int64
	State   store.SweepState
	store.PointCounts
	// Interrupted is set when the context was cancelled: running points went back to pending and
	// the sweep is "interrupted", ready to resume.
	Interrupted bool
}

// sweepRun is the shared, read-only context of one Run.
type sweepRun struct {
	id      int64
	spec    *sweep.Spec
	sources []promptSource // what each level is measured on (sweep.Workload.Cells)
	search  *searcher      // nil: every stored point runs
	outputs *outputChecker // nil: no output check
	// files are what each point writes on its host before it starts (its method's files), by
	// point id; the store keeps a point's argv and env, the plan its files.
	files map[string][]sweep.File
	// spans are the tps each host that spans nodes runs (spansOf).
	spans map[string][]int
}

// spanTPs is what a host that spans nodes runs (the plan's tps it takes, on one node or whole
// nodes: sweep.Host.Span); nil for any other host, which runs what fits its GPUs.
func (sr *sweepRun) spanTPs(host string) []int { return sr.spans[host] }

// spansOf maps each host of spec that spans nodes to the tps of points it runs.
func spansOf(spec *sweep.Spec, points []sweep.Point) map[string][]int {
	out := map[string][]int{}
	for _, h := range spec.Hosts {
		if h.NodeCount() < 2 {
			continue
		}
		tps := []int{}
		for _, pt := range points {
			if h.Span(pt.TP) > 0 && !slices.Contains(tps, pt.TP) {
				tps = append(tps, pt.TP)
			}
		}
		out[h.Name] = tps
	}
	return out
}

// Run executes every pending point of the sweep (already stored, e.g. by Prepare) until none is left
// or ctx is cancelled, then restores every host's unit. Deterministic point failures do not stop the
// sweep; a store failure does (the sweep is left interrupted, to be resumed).
func (r *Runner) Run(ctx context.Context, sweepID int64, spec *sweep.Spec) (Outcome, error) {
	// Everything the sweep stores from here on passes its redactor (the spec's secrets), and so do
	// the live updates.
	r.cfg.Store = withRedaction(r.cfg.Store, spec)
	r.redact = newRedactor(spec)
	st := r.cfg.Store
	// Interrupted (Ctrl-C, the daemon's stop) before a worker started: the sweep is left to resume,
	// as after an interruption during a point, not failed and not an error.
	interrupted := func() (Outcome, error) {
		r.finishSweep(context.WithoutCancel(ctx), sweepID, store.SweepInterrupted, "interrupted")
		return r.outcome(context.WithoutCancel(ctx), sweepID, Outcome{SweepID: sweepID, Interrupted: true, State: store.SweepInterrupted})
	}
	if ctx.Err() != nil {
		return interrupted()
	}
	sw, err := st.Sweep(ctx, sweepID)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted()
		}
		return Outcome{}, fmt.Errorf("orchestrator: run sweep %d: %w", sweepID, err)
	}
	if sw.State != store.SweepRunning {
		if err := st.SetSweepState(ctx, sweepID, store.SweepRunning, "started"); err != nil {
			if ctx.Err() != nil {
				return interrupted()
			}
			return Outcome{}, fmt.Errorf("orchestrator: run sweep %d: %w", sweepID, err)
		}
	}
	if r.cfg.Holder != "" {
		h := store.Holder{Kind: r.cfg.Holder, PID: r.cfg.PID, Host: r.cfg.HostName}
		if err := st.HoldSweep(ctx, sweepID, h); err != nil {
			if ctx.Err() != nil {
				return interrupted()
			}
			return Outcome{}, fmt.Errorf("orchestrator: run sweep %d: %w", sweepID, err)
		}
		// The heartbeat lasts until Run returns: restoring the hosts after an interruption (up to
		// the stop timeout) is still this process holding the sweep.
		done := make(chan struct{})
		var hb sync.WaitGroup
		hb.Go(func() { r.heartbeat(context.WithoutCancel(ctx), sweepID, done) })
		defer func() { close(done); hb.Wait() }()
	}
	plan := spec.Plan()
	sr := &sweepRun{id: sweepID, spec: spec, files: map[string][]sweep.File{}, spans: spansOf(spec, plan.Points)}
	for _, pt := range plan.Points {
		if len(pt.Files) > 0 {
			sr.files[pt.ID] = pt.Files
		}
	}
	sr.sources, err = sourcesOf(ctx, spec, sw.SpecHash)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted()
		}
		r.finishSweep(context.WithoutCancel(ctx), sweepID, store.SweepFailed, err.Error())
		return Outcome{}, fmt.Errorf("orchestrator: sweep %d: %w", sweepID, err)
	}

	if spec.Searched() {
		s, err := newSearcher(unwrapStore(st), spec)
		if err != nil {
			r.finishSweep(context.WithoutCancel(ctx), sweepID, store.SweepFailed, err.Error())
			return Outcome{}, err
		}
		sr.search = s
	}

	if spec.Workload.OutputCheck.Enabled {
		os, ok := unwrapStore(st).(outputStore)
		if !ok {
			err := errors.New("orchestrator: the store cannot keep the output check's answers")
			r.finishSweep(context.WithoutCancel(ctx), sweepID, store.SweepFailed, err.Error())
			return Outcome{}, err
		}
		sr.outputs = &outputChecker{st: os}
		// A resume may hold answers whose reference came after them.
		if err := r.compareAll(ctx, sr); err != nil {
			if ctx.Err() != nil {
				return interrupted()
			}
			return Outcome{}, err
		}
	}

	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	var slots []server // the slots' handles, restored with the hosts
	run := func(h server, sl *slot) {
		wg.Go(func() {
			if err := r.worker(wctx, sr, h, sl); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				cancel(err) // a broken store stops every worker: nothing could be recorded
			}
		})
	}
	for _, h := range r.cfg.Hosts {
		n := h.Slots()
		if n.N <= 1 && !n.GPUs {
			run(h, nil)
			continue
		}
		// One worker per point in flight: a packing host shares its GPUs out among its slots (one
		// per GPU); a host that places its points itself (a Slurm cluster) has no pool.
		var pool *gpuPool
		if n.GPUs {
			pool = newGPUPool(n.N)
		}
		for k := range n.N {
			sh := h.Slot(k)
			slots = append(slots, sh)
			run(sh, &slot{pool: pool, k: k})
		}
	}
	// `specsweep cancel` (from any process) marks the sweep cancelled in the store: watch for it.
	watchDone := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() { r.watchCancel(wctx, sweepID, watchDone, cancel) })
	wg.Wait()
	close(watchDone)
	watch.Wait()
	cancelled := errors.Is(context.Cause(wctx), ErrCancelled)

	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.CleanupTimeout+spec.Server.StopTimeout)
	defer rcancel()
	if !r.cfg.KeepUnits {
		// Restore the operators' units whatever happened, with a context that survives the interruption.
		// The slots first: a host's own Restore brings the operator's server back on its GPUs, which
		// must wait until every slot's server there has stopped.
		restoreAll(r, rctx, sweepID, slots)
		r.RestoreHosts(rctx, sweepID, r.cfg.Hosts)
	}

	out := Outcome{SweepID: sweepID}
	if cancelled {
		if _, err := st.CancelPoints(rctx, sweepID, "sweep cancelled"); err != nil {
			firstErr = errors.Join(firstErr, err)
		}
	}
	out, err = r.outcome(rctx, sweepID, out)
	if err != nil {
		return out, errors.Join(firstErr, err)
	}
	switch {
	case cancelled:
		out.State = store.SweepCancelled // already so in the store: `cancel` set it
	case firstErr != nil || ctx.Err() != nil:
		out.Interrupted = true
		out.State = store.SweepInterrupted
		detail := "interrupted"
		if firstErr != nil {
			detail = firstErr.Error()
		}
		r.finishSweep(rctx, sweepID, out.State, detail)
	case out.Pending > 0 || out.Running > 0:
		out.State = store.SweepFailed
		r.finishSweep(rctx, sweepID, out.State, fmt.Sprintf("%d points could not run on any host", out.Pending+out.Running))
	case out.Waiting > 0:
		out.State = store.SweepFailed
		r.finishSweep(rctx, sweepID, out.State, fmt.Sprintf("%d points were left undecided by the search", out.Waiting))
	case out.Done == 0 && out.Failed > 0:
		out.State = store.SweepFailed
		r.finishSweep(rctx, sweepID, out.State, "every point failed")
	default:
		out.State = store.SweepDone
		detail := fmt.Sprintf("%d done, %d failed", out.Done, out.Failed)
		if out.Pruned > 0 {
			detail += fmt.Sprintf(", %d pruned by the search", out.Pruned)
		}
		r.finishSweep(rctx, sweepID, out.State, detail)
	}
	return out, firstErr
}

// ErrCancelled is the cause of a run stopped because its sweep was cancelled.
var ErrCancelled = errors.New("sweep cancelled")

// watchCancel polls the sweep's state and cancels the run when someone marked it cancelled.
func (r *Runner) watchCancel(ctx context.Context, id int64, done <-chan struct{}, cancel context.CancelCauseFunc) {
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-r.cfg.Clock.After(r.cfg.WatchInterval):
		}
		sw, err := r.cfg.Store.Sweep(ctx, id)
		if err == nil && sw.State == store.SweepCancelled {
			r.cfg.Log.Info("sweep cancelled: stopping its points", "sweep", id)
			cancel(ErrCancelled)
			return
		}
	}
}

// heartbeat says every Heartbeat that this process still runs sweep id, until done is closed.
func (r *Runner) heartbeat(ctx context.Context, id int64, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-r.cfg.Clock.After(r.cfg.Heartbeat):
		}
		if err := r.cfg.Store.Heartbeat(ctx, id, r.cfg.PID); err != nil {
			r.cfg.Log.Warn("cannot write the sweep's heartbeat", "sweep", id, "err", err)
		}
	}
}

// RestoreHosts restores the units of hosts in parallel, recording each outcome as an event of the
// sweep.
func (r *Runner) RestoreHosts(ctx context.Context, sweepID int64, hosts []Host) {
	restoreAll(r, ctx, sweepID, hosts)
}

// restoreAll restores hosts or slots in parallel (RestoreHosts).
func restoreAll[S server](r *Runner, ctx context.Context, sweepID int64, hosts []S) {
	var restores sync.WaitGroup
	for _, h := range hosts {
		restores.Go(func() {
			if err := h.Restore(ctx); err != nil {
				r.event(ctx, sweepID, "", h.Name(), "restore_failed", err.Error())
				r.cfg.Log.Error("restore failed", "host", h.Name(), "err", err)
			} else {
				r.event(ctx, sweepID, "", h.Name(), "restored", "unit restored")
				r.observe(Update{Host: h.Name(), Phase: PhaseRestored})
			}
		})
	}
	restores.Wait()
}

func (r *Runner) finishSweep(ctx context.Context, id int64, to store.SweepState, detail string) {
	if err := r.cfg.Store.SetSweepState(ctx, id, to, detail); err != nil {
		r.cfg.Log.Error("cannot set sweep state", "sweep", id, "state", to, "err", err)
	}
}

// worker takes points for one host until none fits it. It returns an error only when the store
// fails: then nothing more can be recorded and the sweep must stop.
func (r *Runner) worker(ctx context.Context, sr *sweepRun, h server, sl *slot) error {
	backoff := r.cfg.RetryBackoff
	idle := 0 // polls in a row with points left to decide and none running
	for ctx.Err() == nil {
		release := func() {}
		if r.cfg.BeforePoint != nil {
			rel, err := r.cfg.BeforePoint(ctx, h.Name())
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("orchestrator: host %s: %w", h.Name(), err)
			}
			release = rel
		}
		// The search decides before the claim; what it saw tells, if nothing is claimed, whether to
		// wait for its next decision. wake is taken first, so a decision made after this one wakes.
		var (
			wake  <-chan struct{}
			state searchState
		)
		if sr.search != nil {
			wake = sr.search.wait()
			var err error
			if state, err = r.decide(ctx, sr); err != nil {
				release()
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		var (
			p   store.Point
			err error
		)
		// The claim is not cut by cancellation: the store could commit it and still report the
		// cancellation, leaving the point running with nobody to release it (the interrupt test
		// failed so, 2 runs in 200). An interrupt during the claim releases the point below.
		claimCtx := context.WithoutCancel(ctx)
		if sl != nil && sl.pool != nil {
			var anyFree bool
			p, anyFree, err = sl.claim(claimCtx, r.cfg.Store, sr.id, h.Name())
			// No GPU free, or none of the pending points fits the free ones: wait for a point of
			// this host to end (the search's decisions wake the waits below too).
			if (!anyFree || errors.Is(err, store.ErrNotFound)) && sl.pool.busy() {
				release()
				r.observe(sl.tag(Update{Host: h.Name(), Phase: PhaseIdle, Detail: "waiting for free GPUs"}))
				select {
				case <-ctx.Done():
				case <-sl.pool.wait():
				case <-wake:
				case <-r.cfg.Clock.After(r.cfg.WatchInterval):
				}
				continue
			}
			if !anyFree {
				err = fmt.Errorf("no GPU free: %w", store.ErrNotFound)
			}
		} else if tps := sr.spanTPs(h.Name()); tps != nil {
			p, err = r.cfg.Store.ClaimNextPointOf(claimCtx, sr.id, h.Name(), tps)
		} else {
			p, err = r.cfg.Store.ClaimNextPoint(claimCtx, sr.id, h.Name())
		}
		if err == nil && ctx.Err() != nil {
			// Interrupted while claiming: the point goes back to pending for the resume.
			rctx, cancel := context.WithTimeout(claimCtx, r.cfg.CleanupTimeout)
			rerr := r.cfg.Store.ReleasePoint(rctx, sr.id, p.ID, p.Attempts, "interrupted")
			cancel()
			if sl != nil && sl.pool != nil {
				sl.pool.give(sl.gpus)
				sl.gpus = nil
			}
			release()
			return rerr
		}
		if errors.Is(err, store.ErrNotFound) && sr.search != nil {
			// The search may still release points once the running ones are measured: wait for
			// its next decision rather than leave (the poll covers a decision of another process).
			if state.released > 0 {
				release()
				continue
			}
			// Wait while a running point may lead to a decision, or for a while when only pending
			// points (another host's to claim) are left: if no host takes them, nothing changes.
			if state.running > 0 {
				idle = 0
			}
			if state.waiting > 0 && (state.running > 0 || (state.pending > 0 && idle < maxIdlePolls)) {
				idle++
				release()
				r.observe(sl.tag(Update{Host: h.Name(), Phase: PhaseIdle, Detail: "waiting for the search's next decision"}))
				select {
				case <-ctx.Done():
				case <-wake:
				case <-r.cfg.Clock.After(r.cfg.WatchInterval):
				}
				continue
			}
		}
		if errors.Is(err, store.ErrNotFound) {
			release()
			r.observe(sl.tag(Update{Host: h.Name(), Phase: PhaseIdle, Detail: "no more points for this host"}))
			return nil
		}
		if err != nil {
			release()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("orchestrator: host %s: %w", h.Name(), err)
		}
		retry, err := r.runPoint(ctx, sr, h, p, sl)
		if sl != nil && sl.pool != nil {
			sl.pool.give(sl.gpus)
			sl.gpus = nil
			// The point's neighbours over its whole run, for the report's "ran beside N others".
			beside := sl.pool.companions(p.ID)
			r.addEvent(context.WithoutCancel(ctx), store.RanBesideEvent(sr.id, p.ID, h.Name(), beside))
		}
		release()
		if errors.Is(err, errHostUnusable) {
			r.event(ctx, sr.id, "", h.Name(), "host_refused", err.Error())
			r.observe(sl.tag(Update{Host: h.Name(), Phase: PhaseFailed, Detail: err.Error()}))
			return nil
		}
		if err != nil {
			return err
		}
		if !retry {
			backoff = r.cfg.RetryBackoff
			continue
		}
		r.observe(sl.tag(Update{Host: h.Name(), Phase: PhaseRetry, Detail: fmt.Sprintf("host trouble: next try in %s", backoff)}))
		select {
		case <-ctx.Done():
		case <-r.cfg.Clock.After(backoff):
		}
		backoff = min(2*backoff, r.cfg.MaxBackoff)
	}
	return nil
}

// maxIdlePolls bounds how long a worker waits for the search while nothing runs anywhere.
const maxIdlePolls = 20

// decide runs the sweep's search once, logging what it decided.
func (r *Runner) decide(ctx context.Context, sr *sweepRun) (searchState, error) {
	state, rel, pr, err := sr.search.decide(ctx, sr.id)
	if err != nil {
		return state, err
	}
	for _, d := range rel {
		r.cfg.Log.Info("search: point to run", "point", d.PointID, "why", d.Reason)
	}
	for _, d := range pr {
		r.cfg.Log.Info("search: point pruned", "point", d.PointID, "why", d.Reason)
	}
	return state, nil
}

// attempt is one claimed attempt of a point on a host.
type attempt struct {
	sr    *sweepRun
	h     server
	p     store.Point
	label string
	began time.Time
	sl    *slot // a packing host's slot, or nil
	inst  hostctl.Instance
	// launch is what the point runs (its API key authorises the liveness probe).
	launch hostctl.Launch
	// info delivers the outcome of recording effective args and provenance, which runs beside the
	// load; it must be joined (waitInfo) before the attempt ends, so nothing is written after.
	info    chan error
	infoErr error
	joined  bool
}

func (a *attempt) waitInfo() error {
	if a.info == nil || a.joined {
		return a.infoErr
	}
	a.infoErr, a.joined = <-a.info, true
	return a.infoErr
}

func (a *attempt) event(r *Runner, ctx context.Context, kind, detail string) {
	r.event(ctx, a.sr.id, a.p.ID, a.h.Name(), kind, detail)
}

func (a *attempt) update(r *Runner, phase Phase, detail string) {
	u := Update{Host: a.h.Name(), Point: a.p.ID, Label: a.label, Phase: phase, Detail: detail}
	if phase == PhaseDone || phase == PhaseFailed {
		u.Duration = r.cfg.Clock.Now().Sub(a.began)
	}
	r.observe(a.sl.tag(u))
}

// runPoint runs one claimed attempt to its end. retry reports transient host trouble (the point went
// back to pending: wait, then claim again); err is a store failure.
func (r *Runner) runPoint(ctx context.Context, sr *sweepRun, h server, p store.Point, sl *slot) (retry bool, err error) {
	a := &attempt{sr: sr, h: h, p: p, label: pointLabel(p), began: r.cfg.Clock.Now(), sl: sl}
	spec := sr.spec
	a.update(r, PhaseStarting, fmt.Sprintf("attempt %d", p.Attempts))
	r.cfg.Log.Info("point starting", "host", h.Name(), "point", p.ID, "config", a.label, "attempt", p.Attempts)

	launch := hostctl.Launch{Argv: p.Argv, Env: p.Env, Port: spec.Server.Port, Tag: p.ID,
		ReadyTimeout: spec.Server.ReadyTimeout, StopTimeout: spec.Server.StopTimeout, GPUWait: spec.Server.GPUWait,
		JoinTimeout: spec.Server.JoinTimeout, Kill: spec.Server.KillAtStop()}
	for _, f := range sr.files[p.ID] {
		launch.Files = append(launch.Files, hostctl.File{Path: f.Path, Data: []byte(f.Content)})
	}
	if sl != nil {
		launch.Argv, launch.Env, launch.Port = sl.launchOn(p.Argv, p.Env, spec.Server.Port)
	}
	if sl != nil && sl.pool != nil {
		beside := sl.pool.beside(p.ID)
		a.event(r, ctx, "packed", fmt.Sprintf("slot %d: %s; beside %d other point(s) now%s", sl.k, sl.words(launch.Port),
			len(beside), idList(beside)))
	}
	a.launch = launch
	inst, err := h.Start(ctx, launch)
	if err != nil {
		return r.startFailed(ctx, a, err)
	}
	a.inst = inst
	a.event(r, ctx, "start", "invocation "+inst.ID())
	ready, err := inst.WaitReady(ctx)
	if err != nil {
		return r.startFailed(ctx, a, err)
	}
	a.event(r, ctx, "ready", fmt.Sprintf("ready after %.2f s (%d probes)", ready.Elapsed.Seconds(), ready.Probes))
	r.observe(sl.tag(Update{Host: h.Name(), Point: p.ID, Label: a.label, Phase: PhaseReady, Duration: ready.Elapsed,
		Detail: fmt.Sprintf("ready after %.1f s", ready.Elapsed.Seconds())}))
	// Effective args and provenance are recorded while the load runs: collecting provenance takes
	// SSH round trips that would otherwise delay the first measured request.
	a.info = make(chan error, 1)
	go func() { a.info <- r.recordInfo(ctx, a, ready) }()

	w := spec.Workload
	maxC := 1
	for _, c := range w.Concurrency {
		maxC = max(maxC, c)
	}
	url, client := "http://"+inst.Address(), workload.NewHTTPClient(maxC)
	if inst.Address() == "" {
		// Only the SSH tunnel reaches this server: measured latencies include the tunnel.
		url, client = inst.BaseURL(), inst.HTTPClient()
		a.event(r, ctx, "load_via_tunnel", "the server is reachable only through the SSH connection")
	}
	defer client.CloseIdleConnections()
	if sr.outputs != nil {
		fin, fail, err := r.checkOutputs(ctx, a, url, client)
		if ctx.Err() != nil {
			return false, r.interrupt(ctx, a)
		}
		if err != nil {
			return false, err
		}
		if fail != nil && fail.Class == hostctl.ClassHostUnreachable {
			return r.hostTrouble(ctx, a, fail)
		}
		if fail != nil {
			// The server failed (hung, died) while it answered the check: as it would in a level.
			fin = &store.PointFinish{State: store.PointFailed, FailureClass: storeClass(fail.Class, store.FailCrashDuringLoad),
				FailureDetail: failureDetail(fail)}
		}
		if fin != nil {
			// Its outputs are not the model's: the spec asks not to spend its load on it.
			if err := a.waitInfo(); err != nil {
				if ctx.Err() != nil {
					return false, r.interrupt(ctx, a)
				}
				return false, err
			}
			if err := r.cfg.Store.FinishPoint(ctx, sr.id, p.ID, p.Attempts, *fin); err != nil {
				return false, err
			}
			a.event(r, ctx, "failure", fin.FailureDetail)
			a.update(r, PhaseFailed, string(fin.FailureClass)+": "+fin.FailureDetail)
			r.stop(ctx, a)
			return false, nil
		}
	}
	loads := loadsOf(w, sr.sources)
	total := len(loads)
	for n, ld := range loads {
		n, c, rep, cs, seed := n+1, ld.concurrency, ld.repeat, ld.source, ld.seed
		cfg := workload.Config{URL: url, API: w.API, Concurrency: c, Requests: ld.requests, Duration: ld.duration,
			Warmup: ld.warmup, InputTokens: cs.source.InputTokens, OutputTokens: w.OutputTokens, Dataset: w.Dataset,
			Seed: seed, HTTPClient: client, APIKey: hostctl.APIKey(launch), Temperature: w.Temperature,
			Precision: levelPrecision(w.Precision)}
		if ld.phase > 0 {
			cfg.SeriesWidth = sweep.PhaseSeriesWidth
		}
		if cs.prompts != nil {
			ds, err := cs.prompts(seed)
			if err != nil {
				return false, err
			}
			cfg.Prompts = ds
		}
		cfg.ServerLog = inst // accept length from the Decode-batch lines where no verify counter exists
		what := fmt.Sprintf("concurrency %d, repeat %d", c, rep)
		if ld.phase > 0 {
			what = fmt.Sprintf("phase %d of %d: concurrency %d for %s", ld.phase, len(w.Phases), c, ld.duration)
		}
		if len(sr.sources) > 1 {
			what += ", " + cs.source.Label()
		}
		a.update(r, PhaseLoad, fmt.Sprintf("%s (%d/%d)", what, n, total))
		started := r.cfg.Clock.Now()
		res, fail, lerr := r.measure(ctx, a, cfg)
		if ctx.Err() != nil {
			return false, r.interrupt(ctx, a)
		}
		if fail != nil && fail.Class == hostctl.ClassHostUnreachable {
			// The host, not the server, went away: the attempt's runs are superseded and the point
			// is tried again (here or elsewhere).
			return r.hostTrouble(ctx, a, fail)
		}
		run := store.Run{SweepID: sr.id, PointID: p.ID, Attempt: p.Attempts, Concurrency: c, Repeat: rep,
			Dataset: cs.source.Dataset, InputTokens: cs.source.InputTokens,
			Status: store.RunOK, Metrics: metrics(res), StartedAt: started, FinishedAt: r.cfg.Clock.Now()}
		var fin *store.PointFinish
		switch {
		case fail != nil:
			run.Status, run.Error = store.RunFailed, fail.Error()
			fin = &store.PointFinish{State: store.PointFailed, FailureClass: storeClass(fail.Class, store.FailCrashDuringLoad),
				FailureDetail: failureDetail(fail)}
		case lerr != nil:
			run.Status, run.Error = store.RunFailed, lerr.Error()
		case res.Completed == 0 || res.Failed > 0 || res.Aborted != "":
			// A level counts only when every measured request completed (docs/schema.md): figures
			// of the survivors of a failing server are not a measurement of the configuration.
			run.Status, run.Error = store.RunFailed, levelError(res)
		}
		if fin == nil && n == total {
			fin = &store.PointFinish{State: store.PointDone}
		}
		if fin != nil {
			if err := a.waitInfo(); err != nil {
				if ctx.Err() != nil {
					return false, r.interrupt(ctx, a)
				}
				return false, err
			}
		}
		if err := r.cfg.Store.RecordRunAndFinish(ctx, run, fin); err != nil {
			if ctx.Err() != nil {
				return false, r.interrupt(ctx, a)
			}
			return false, err
		}
		r.cfg.Log.Info("run recorded", "host", h.Name(), "point", p.ID, "concurrency", c, "repeat", rep,
			"prompts", cs.source.Label(), "status", run.Status, "output_tok_s", outputTokS(res))
		if ld.phase > 0 && res != nil {
			r.addEvent(ctx, store.PhaseEvent(sr.id, p.ID, h.Name(), store.PhaseSeries{Phase: ld.phase, Of: len(w.Phases),
				Repeat: ld.round, Concurrency: c, Occurrence: rep, StartMS: res.Start.UnixMilli(),
				WidthMS: sweep.PhaseSeriesWidth.Milliseconds(), TokS: res.Series, Switches: stepSwitches(res.Switches), SwitchCount: res.SwitchCount}))
		}
		if fail != nil {
			a.event(r, ctx, "failure", failureDetail(fail))
			a.update(r, PhaseFailed, string(fail.Class)+": "+fail.Detail)
			r.stop(ctx, a)
			return false, nil
		}
	}
	a.update(r, PhaseDone, "")
	r.stop(ctx, a)
	return false, nil
}

// recordInfo stores what the ready server says about itself and where it runs.
func (r *Runner) recordInfo(ctx context.Context, a *attempt, ready hostctl.Ready) error {
	info := store.PointInfo{Load: ready.Elapsed, ExecStart: strings.Join(a.p.Argv, " ")}
	if len(ready.ServerInfo) > 0 {
		if json.Valid(ready.ServerInfo) {
			info.EffectiveArgs = json.RawMessage(ready.ServerInfo)
			info.EffectiveNumSteps, info.EffectiveTopK, info.EffectiveNumDraftTokens = hostctl.EffectiveSpec(ready.ServerInfo)
		} else {
			info.EffectiveArgs, _ = json.Marshal(string(ready.ServerInfo))
		}
	}
	prov, err := a.h.Provenance(ctx)
	if err != nil {
		prov.CollectedErr = err.Error()
	}
	if prov.EngineVer == "" {
		prov.EngineVer = hostctl.EngineVersion(ready.ServerInfo)
	}
	if prov.ExecStart != "" {
		info.ExecStart = prov.ExecStart
	}
	if info.Provenance, err = json.Marshal(prov); err != nil {
		return fmt.Errorf("orchestrator: encode provenance: %w", err)
	}
	return r.cfg.Store.SetPointInfo(ctx, a.sr.id, a.p.ID, a.p.Attempts, info)
}

// watch runs fn while watching the server by the one liveness rule of every phase that talks to it
// (the output check, the levels and their warmup): the unit's state every CheckInterval, and after
// SilenceProbe without a byte on any request (activity, the time of the last one) a
// /health_generate probe. A failure cancels fn's context at once and is returned.
func (r *Runner) watch(ctx context.Context, a *attempt, activity *atomic.Int64, fn func(ctx context.Context)) *hostctl.Failure {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		fail    *hostctl.Failure
		monitor sync.WaitGroup
		done    = make(chan struct{})
	)
	activity.Store(r.cfg.Clock.Now().UnixNano())
	monitor.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-lctx.Done():
				return
			case <-r.cfg.Clock.After(r.cfg.CheckInterval):
			}
			if f := r.check(lctx, a); f != nil {
				fail = f
				cancel()
				return
			}
			// The unit runs, but nothing came back for a while: a hung scheduler looks like this.
			if silent := r.cfg.Clock.Now().Sub(time.Unix(0, activity.Load())); silent >= r.cfg.SilenceProbe {
				if f := r.probeLiveness(lctx, a, fmt.Sprintf("no request got any data for %s", silent.Round(100*time.Millisecond))); f != nil {
					fail = f
					cancel()
					return
				}
				activity.Store(r.cfg.Clock.Now().UnixNano()) // alive: look again after another silence
			}
		}
	})
	fn(lctx)
	close(done)
	monitor.Wait()
	return fail
}

// measure runs one level while watching the server: a failure of the unit cancels the load at once
// and is returned as the level's failure.
func (r *Runner) measure(ctx context.Context, a *attempt, cfg workload.Config) (*workload.Result, *hostctl.Failure, error) {
	var (
		res *workload.Result
		err error
	)
	cfg.Activity = new(atomic.Int64)
	fail := r.watch(ctx, a, cfg.Activity, func(lctx context.Context) { res, err = r.cfg.Load(lctx, cfg) })
	if fail != nil {
		return res, fail, nil
	}
	if ctx.Err() != nil {
		return res, nil, ctx.Err()
	}
	if err != nil || res == nil || res.Failed > 0 || res.Aborted != "" {
		// Requests failed, or the level was aborted (every warmup request failed: a server that
		// died as the level began fails no measured request): the server may have died just now,
		// before the monitor looked. Give the unit a moment to show it, so the cause is named
		// rather than a count of failed requests.
		if f := r.awaitCause(ctx, a, 4); f != nil {
			return res, f, nil
		}
		if ctx.Err() != nil {
			return res, nil, ctx.Err()
		}
	}
	if err != nil {
		return res, nil, err
	}
	if res == nil {
		return nil, nil, errors.New("load generator returned no result")
	}
	if res.Failed > 0 || res.Aborted != "" {
		// Requests failed yet the unit runs: a hung server looks like this. Ask it directly.
		why := fmt.Sprintf("%d of %d requests of the level failed", res.Failed, res.Sent)
		if res.Failed == 0 {
			why = "the level was aborted (" + res.Aborted + ")"
		}
		if f := r.probeLiveness(ctx, a, why); f != nil {
			return res, f, nil
		}
	}
	return res, nil, nil
}

// probeLiveness asks the server for /health_generate, which runs a real generation in every
// release (/health of newer ones answers 200 from a fast path even with the scheduler hung): no
// answer within LivenessTimeout, or not 200, while the process still runs is a hang, a crash during
// load with that detail. why says what prompted the probe.
func (r *Runner) probeLiveness(ctx context.Context, a *attempt, why string) *hostctl.Failure {
	pctx, cancel := context.WithTimeout(ctx, r.cfg.LivenessTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, a.inst.BaseURL()+"/health_generate", nil)
	if err != nil {
		return nil
	}
	if k := hostctl.APIKey(a.launch); k != "" {
		req.Header.Set("Authorization", "Bearer "+k)
	}
	resp, err := a.inst.HTTPClient().Do(req)
	if ctx.Err() != nil {
		return nil
	}
	detail := ""
	switch {
	case err != nil:
		// A Slurm job's node that is gone looks like a hung server from here: ask the driver.
		if lerr := a.inst.HostLost(ctx); lerr != nil {
			return &hostctl.Failure{Class: hostctl.ClassHostUnreachable, Detail: why + ": " + lerr.Error(), Err: lerr}
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			// Nothing listens on the server's port: it is gone or going, not hung. Its unit or job
			// says why, up to LivenessTimeout later (a killed rank of a two-node Slurm job showed in
			// the job's state after the runner's four checks, CI 2026-12-07).
			if f := r.awaitCause(ctx, a, int(r.cfg.LivenessTimeout/r.cfg.CheckInterval)+1); f != nil {
				return f
			}
			detail = fmt.Sprintf("server gone: %s and nothing listens on its port (%v), though its unit has not said why within %s", why, err, r.cfg.LivenessTimeout)
			break
		}
		detail = fmt.Sprintf("server hung: %s and /health_generate did not answer within %s (%v)", why, r.cfg.LivenessTimeout, err)
	case resp.StatusCode == http.StatusServiceUnavailable:
		// SGLang answers 503 when its health generation got no answer from the scheduler in time.
		detail = fmt.Sprintf("server hung: %s and /health_generate answered HTTP 503 (its generation got no answer)", why)
	case resp.StatusCode != http.StatusOK:
		detail = fmt.Sprintf("server unhealthy: %s and /health_generate answered HTTP %d", why, resp.StatusCode)
	}
	if resp != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
	}
	if detail == "" {
		return nil
	}
	return &hostctl.Failure{Class: hostctl.ClassCrashDuringLoad, Detail: detail}
}

// awaitCause checks the instance up to n times, CheckInterval apart, for the failure of a server
// that may have just died: nil if none showed (or ctx ended).
func (r *Runner) awaitCause(ctx context.Context, a *attempt, n int) *hostctl.Failure {
	for i := range n {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-r.cfg.Clock.After(r.cfg.CheckInterval):
			}
		}
		if f := r.check(ctx, a); f != nil {
			return f
		}
	}
	return nil
}

// check asks the instance whether it failed after being ready. A failure reported while load runs
// is a crash during load, whatever the unit's own words (oom stays oom).
func (r *Runner) check(ctx context.Context, a *attempt) *hostctl.Failure {
	f, err := a.inst.Check(ctx)
	if f != nil {
		if f.Class == "" {
			f.Class = hostctl.ClassCrashDuringLoad
		}
		return f
	}
	if err != nil {
		if f, ok := hostctl.AsFailure(err); ok {
			return f
		}
		if ctx.Err() == nil {
			r.cfg.Log.Warn("health check failed", "host", a.h.Name(), "err", r.redact.text(err.Error()))
		}
	}
	return nil
}

// errHostUnusable: the host refuses us for good in this run (host key unknown or changed, login
// refused); its worker stops and its points are left to the other hosts.
var errHostUnusable = errors.New("host unusable")

// startFailed handles a failure to start or to become ready.
func (r *Runner) startFailed(ctx context.Context, a *attempt, err error) (retry bool, serr error) {
	if ctx.Err() != nil {
		return false, r.interrupt(ctx, a)
	}
	f, ok := hostctl.AsFailure(err)
	if !ok || f.Class == hostctl.ClassHostUnreachable {
		return r.hostTrouble(ctx, a, err)
	}
	a.event(r, ctx, "failure", failureDetail(f))
	a.update(r, PhaseFailed, string(f.Class)+": "+f.Detail)
	r.cfg.Log.Warn("point failed", "host", a.h.Name(), "point", a.p.ID, "class", f.Class, "detail", r.redact.text(f.Detail))
	if err := r.cfg.Store.FinishPoint(ctx, a.sr.id, a.p.ID, a.p.Attempts, store.PointFinish{State: store.PointFailed,
		FailureClass: storeClass(f.Class, store.FailCrashDuringStart), FailureDetail: failureDetail(f)}); err != nil {
		return false, err
	}
	// A failed unit may sit in a restart loop or keep a dying process: stop it before the next point.
	r.stop(ctx, a)
	return false, nil
}

// hostTrouble handles an attempt that failed because of the host, not the configuration: the point
// goes back to pending to be tried again later, here or on another host, a bounded number of times.
// A host that refuses us outright (host key, login) is given up for this run.
func (r *Runner) hostTrouble(ctx context.Context, a *attempt, err error) (retry bool, serr error) {
	_ = a.waitInfo() // provenance of a lost host may fail too: the point is re-run anyway
	detail := err.Error()
	a.event(r, ctx, "host_down", detail)
	r.cfg.Log.Warn("host trouble", "host", a.h.Name(), "point", a.p.ID, "attempt", a.p.Attempts, "err", r.redact.text(err.Error()))
	r.stopQuietly(ctx, a)
	if refused(err) {
		a.update(r, PhaseFailed, "host refused: "+detail)
		if rerr := r.cfg.Store.ReleasePoint(ctx, a.sr.id, a.p.ID, a.p.Attempts, "host refused: "+detail); rerr != nil {
			return false, rerr
		}
		return false, fmt.Errorf("%s: %w: %w", a.h.Name(), errHostUnusable, err)
	}
	if a.p.Attempts >= r.cfg.MaxAttempts {
		a.update(r, PhaseFailed, "host unreachable: "+detail)
		return false, r.cfg.Store.FinishPoint(ctx, a.sr.id, a.p.ID, a.p.Attempts, store.PointFinish{
			State: store.PointFailed, FailureClass: store.FailHostUnreachable,
			FailureDetail: fmt.Sprintf("%d attempts: %s", a.p.Attempts, detail)})
	}
	return true, r.cfg.Store.ReleasePoint(ctx, a.sr.id, a.p.ID, a.p.Attempts, "host trouble: "+detail)
}

// refused reports errors that retrying cannot cure: an unknown or changed host key, a refused login.
func refused(err error) bool {
	var hk *hostctl.HostKeyError
	var auth *hostctl.AuthError
	return errors.As(err, &hk) || errors.As(err, &auth)
}

// interrupt ends an attempt cut short by cancellation: the load is already stopped (its context is
// done), so stop the server and put the point back to pending for a later resume.
func (r *Runner) interrupt(ctx context.Context, a *attempt) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.CleanupTimeout+a.sr.spec.Server.StopTimeout)
	defer cancel()
	_ = a.waitInfo() // cancelled with ctx; only its end matters here
	if a.inst != nil {
		r.stop(cctx, a)
	}
	reason := "interrupted"
	if cause := context.Cause(ctx); cause != nil {
		reason += ": " + cause.Error()
	}
	return r.cfg.Store.ReleasePoint(cctx, a.sr.id, a.p.ID, a.p.Attempts, reason)
}

// stop stops the attempt's server and records how the stop went; a stop that ended in systemd's
// SIGKILL is an event of its own (the measurement is already safe).
func (r *Runner) stop(ctx context.Context, a *attempt) {
	if a.inst == nil {
		return
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), r.cfg.CleanupTimeout+a.sr.spec.Server.StopTimeout)
		defer cancel()
	}
	a.update(r, PhaseStopping, "")
	res, err := a.inst.Stop(ctx, nil)
	if err != nil {
		a.event(r, ctx, "stop_failed", err.Error())
		r.cfg.Log.Warn("stop failed", "host", a.h.Name(), "point", a.p.ID, "err", r.redact.text(err.Error()))
		return
	}
	if res.Already {
		return
	}
	how := "clean"
	if !res.Clean {
		how = "not clean: " + res.Final.Exit()
	}
	a.event(r, ctx, "stop", fmt.Sprintf("stopped in %.2f s (%s)", res.Duration.Seconds(), how))
	if res.Class == hostctl.ClassStopTimeoutSIGKILL {
		a.event(r, ctx, "stop_timeout_sigkill", strings.Join(append([]string{
			fmt.Sprintf("the stop timeout passed (stop_timeout %s; on a Slurm cluster its KillWait): the server was SIGKILLed", a.sr.spec.Server.StopTimeout)}, res.Evidence...), "\n"))
		r.cfg.Log.Warn("stop ended in SIGKILL", "host", a.h.Name(), "point", a.p.ID, "after", res.Duration)
	}
}

// stopQuietly stops a half-started server after host trouble, without recording anything more.
func (r *Runner) stopQuietly(ctx context.Context, a *attempt) {
	if a.inst == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.CleanupTimeout)
	defer cancel()
	_, _ = a.inst.Stop(sctx, nil)
}

func (r *Runner) event(ctx context.Context, sweepID int64, pointID, host, kind, detail string) {
	if err := r.cfg.Store.AddEvent(ctx, store.Event{SweepID: sweepID, PointID: pointID, Host: host, Kind: kind,
		Detail: detail}); err != nil {
		r.cfg.Log.Warn("cannot record event", "kind", kind, "err", err)
	}
}

// addEvent records an event with its structured fields (store.Event.Data).
func (r *Runner) addEvent(ctx context.Context, e store.Event) {
	if err := r.cfg.Store.AddEvent(ctx, e); err != nil {
		r.cfg.Log.Warn("cannot record event", "kind", e.Kind, "err", err)
	}
}

func (r *Runner) observe(u Update) {
	if r.cfg.Observe == nil {
		return
	}
	if u.At.IsZero() {
		u.At = r.cfg.Clock.Now()
	}
	u.Detail = r.redact.text(u.Detail)
	r.cfg.Observe(u)
}

// failureDetail is the one-line cause followed by the evidence lines, as stored for the point.
func failureDetail(f *hostctl.Failure) string {
	d := f.Detail
	if _, ok := failureClasses[f.Class]; !ok && f.Class != "" {
		d = string(f.Class) + ": " + d // a class the store does not know: its name is kept here
	}
	return strings.Join(append([]string{d}, f.Evidence...), "\n")
}

func levelError(res *workload.Result) string {
	if res.Aborted != "" {
		return res.Aborted
	}
	if len(res.Errors) > 0 {
		return res.Errors[0].Message
	}
	return "no request completed"
}

func outputTokS(res *workload.Result) float64 {
	if res == nil {
		return 0
	}
	return res.OutputThroughput
}

// metrics converts a level's figures to the store's; nil when the level measured nothing.
func metrics(res *workload.Result) *store.Metrics {
	if res == nil || res.Sent == 0 {
		return nil
	}
	return &store.Metrics{
		Requests: res.Sent, Completed: res.Completed, Failed: res.Failed,
		DurationS:        res.Duration.Seconds(),
		TotalInputTokens: res.TotalInputTokens, TotalOutputTokens: res.TotalOutputTokens,
		RequestS: res.RequestThroughput, InputTokS: res.InputThroughput, OutputTokS: res.OutputThroughput,
		TTFTMeanMs: mean(res.TTFT), TTFTMedianMs: median(res.TTFT), TTFTP99Ms: p99(res.TTFT),
		ITLMeanMs: mean(res.ITL), ITLMedianMs: median(res.ITL), ITLP99Ms: p99(res.ITL),
		TPOTMeanMs: mean(res.TPOT), TPOTMedianMs: median(res.TPOT), TPOTP99Ms: p99(res.TPOT),
		E2EMeanMs: mean(res.E2E), E2EMedianMs: median(res.E2E), E2EP99Ms: p99(res.E2E),
		AcceptLength: res.AcceptLength, AcceptLengthSource: res.AcceptLengthSource,
		Interval: interval(res.Interval),
	}
}

// levelPrecision is the spec's workload.precision for the load generator (nil: a fixed count). The
// cap is the level's requests (workload.requests, which precision.max_requests sets).
func levelPrecision(p *sweep.Precision) *workload.Precision {
	if p == nil {
		return nil
	}
	return &workload.Precision{Metric: p.Metric, Target: p.Target, Confidence: p.Confidence, MinRequests: p.MinRequests}
}

// interval converts a level's confidence interval to the store's; nil without one, or when its
// figures are not finite (NaN would be stored as NULL beside a metric that says there is one).
func interval(iv *workload.Interval) *store.Interval {
	if iv == nil || iv.Batches < 2 || !(iv.Confidence > 0 && iv.Confidence < 1) {
		return nil
	}
	for _, x := range []float64{iv.Mean, iv.Low, iv.High} {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
	}
	return &store.Interval{Metric: iv.Metric, Mean: iv.Mean, Low: iv.Low, High: iv.High, Confidence: iv.Confidence,
		Batches: iv.Batches, Target: iv.Target, Reached: iv.Reached}
}

// A distribution without samples has no figures: NaN is stored as NULL by SQLite.
func sampled(d workload.Dist, v float64) float64 {
	if d.Count == 0 {
		return math.NaN()
	}
	return v
}

func mean(d workload.Dist) float64   { return sampled(d, d.Mean) }
func median(d workload.Dist) float64 { return sampled(d, d.Median) }
func p99(d workload.Dist) float64    { return sampled(d, d.P99) }

// pointLabel is a stored point's label, spelled as the plan's (sweep.Point.Label).
func pointLabel(p store.Point) string {
	return sweep.Point{Method: p.Method, Baseline: p.Baseline, Algorithm: sweep.ArgvAlgorithm(p.Argv),
		NumSteps: p.NumSteps, TopK: p.TopK, NumDraftTokens: p.NumDraftTokens, TP: p.TP}.Label()
}

// stepSwitches are a phase's step switches as the store keeps them.
func stepSwitches(sw []workload.StepSwitch) []store.StepSwitch {
	var out []store.StepSwitch
	for _, x := range sw {
		out = append(out, store.StepSwitch{Runtime: x.Runtime, From: x.From, To: x.To, EMA: x.EMA, Clock: x.Clock})
	}
	return out
}

// outcome is out with the sweep's points counted by state.
func (r *Runner) outcome(ctx context.Context, sweepID int64, out Outcome) (Outcome, error) {
	points, err := r.cfg.Store.Points(ctx, sweepID)
	if err != nil {
		return out, fmt.Errorf("orchestrator: sweep %d: %w", sweepID, err)
	}
	for _, p := range points {
		switch p.State {
		case store.PointPending:
			out.Pending++
		case store.PointRunning:
			out.Running++
		case store.PointDone:
			out.Done++
		case store.PointFailed:
			out.Failed++
		case store.PointCancelled:
			out.Cancelled++
		case store.PointWaiting:
			out.Waiting++
		case store.PointPruned:
			out.Pruned++
		}
	}
	return out, nil
}
