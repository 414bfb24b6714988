package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// PrepareStore is what Prepare needs of the store (*store.DB satisfies it).
type PrepareStore interface {
	LatestSweepByName(ctx context.Context, name string) (store.Sweep, error)
	CreateSweep(ctx context.Context, s store.NewSweep, hosts []store.NewHost, points []store.NewPoint) (int64, error)
	RecoverInterrupted(ctx context.Context, sweepID int64, reason string) (int, error)
	RequeuePoints(ctx context.Context, sweepID int64, reason string, from ...store.PointState) (int, error)
	SetSweepState(ctx context.Context, id int64, to store.SweepState, detail string) error
}

// ErrSpecChanged: a sweep of that name exists with a different spec; resuming it with this spec
// would mix two experiments.
var ErrSpecChanged = errors.New("spec changed")

// ErrFinished: the sweep of this spec already ran to its end (done or failed).
var ErrFinished = errors.New("sweep already finished")

// ErrRunning: a live process runs the sweep of this spec now (its holder's pid lives here, or its
// heartbeat is recent): two processes must not run one sweep.
var ErrRunning = errors.New("sweep is running")

// ErrQueued: the sweep of this spec already waits in the daemon's queue (SubmitNamed).
var ErrQueued = errors.New("sweep already queued")

// SweepExistsError is Prepare's (and SubmitNamed's) refusal of the latest sweep of the spec's name:
// Err is ErrSpecChanged (Hash is the stored spec's, NewHash this one's), ErrFinished, ErrRunning
// (Holder is the live process) or ErrQueued. It names no way out: the caller words it (the CLI's
// --new). Prior is the refused sweep as stored.
type SweepExistsError struct {
	Name          string
	ID            int64
	State         store.SweepState
	Hash, NewHash string
	Holder        store.Holder
	Prior         store.Sweep
	Err           error
}

func (e *SweepExistsError) Error() string {
	if errors.Is(e.Err, ErrSpecChanged) {
		return fmt.Sprintf("sweep %q (id %d, %s) was made from a different spec (hash %.12s, this one %.12s): %v",
			e.Name, e.ID, e.State, e.Hash, e.NewHash, e.Err)
	}
	return fmt.Sprintf("sweep %q (id %d) is %s: %v", e.Name, e.ID, e.State, e.Err)
}

func existsError(prev store.Sweep, err error) *SweepExistsError {
	return &SweepExistsError{Name: prev.Name, ID: prev.ID, State: prev.State, Hash: prev.SpecHash,
		Holder: prev.Holder, Prior: prev, Err: err}
}

func (e *SweepExistsError) Unwrap() error { return e.Err }

// Prepared says which sweep to run.
type Prepared struct {
	SweepID int64
	// Resumed: an unfinished sweep of the same spec was found; Recovered of its points were left
	// running by a process that died and are pending again (their partial runs superseded).
	Resumed   bool
	Recovered int
	// Prior is the latest sweep of the spec's name as it was found (zero when there was none, or
	// with forceNew): the sweep resumed, or the one a refusal names.
	Prior store.Sweep
}

// Prepare finds the sweep to run for spec: the latest sweep of that name (not a schedule's
// template) when it is unfinished and has the same spec hash (a resume: queued, interrupted,
// cancelled, or running while no live process holds it), or a new one. A different hash is refused
// with ErrSpecChanged unless forceNew or the sweep failed or was cancelled (Abandoned: then a new
// sweep starts, with that one as Prior); a finished sweep (done or failed) of the same spec gives
// ErrFinished (with its id) unless forceNew; a sweep a live process runs gives ErrRunning.
func Prepare(ctx context.Context, st PrepareStore, spec *sweep.Spec, forceNew bool) (Prepared, error) {
	// The prompt sets' content is part of the spec's hash: a changed file is a changed spec.
	if _, err := ReadPromptSets(ctx, spec); err != nil {
		return Prepared{}, fmt.Errorf("orchestrator: %w", err)
	}
	plan := spec.Plan()
	var prior store.Sweep // a failed or cancelled sweep of an earlier version of the spec
	if !forceNew {
		prev, err := st.LatestSweepByName(ctx, spec.Name)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return Prepared{}, fmt.Errorf("orchestrator: look up sweep %q: %w", spec.Name, err)
		case prev.SpecHash != plan.SpecHash && Abandoned(prev.State):
			prior = prev
		case prev.SpecHash != plan.SpecHash:
			e := existsError(prev, ErrSpecChanged)
			e.NewHash = plan.SpecHash
			return Prepared{SweepID: prev.ID, Prior: prev}, e
		case prev.State == store.SweepDone || prev.State == store.SweepFailed:
			return Prepared{SweepID: prev.ID, Prior: prev}, existsError(prev, ErrFinished)
		case HeldElsewhere(prev, LocalLiveness(time.Now())):
			return Prepared{SweepID: prev.ID, Prior: prev}, existsError(prev, ErrRunning)
		default:
			p, err := resume(ctx, st, prev)
			p.Prior = prev
			return p, err
		}
	}
	id, err := st.CreateSweep(ctx, NewSweepOf(spec, plan), HostsOf(spec), PointsOf(spec, plan))
	if err != nil {
		return Prepared{}, fmt.Errorf("orchestrator: store sweep %q: %w", spec.Name, err)
	}
	return Prepared{SweepID: id, Prior: prior}, nil
}

// Abandoned reports whether a sweep in state s leaves its name free for a new version of its spec:
// a failed or cancelled sweep is nothing to protect from being mixed with another spec (a new sweep
// of the name starts, and the old one stays under its id), while a queued, running, interrupted or
// done one is refused (ErrSpecChanged) unless the caller asks for a new sweep.
func Abandoned(s store.SweepState) bool {
	return s == store.SweepFailed || s == store.SweepCancelled
}

// HeldElsewhere reports whether sweep sw is running in a live process other than this one: stored as
// running, with a holder that is not orphaned (Liveness.Orphaned) and is not this process. A
// running sweep with no recorded holder (from a version before holders) is not: nothing tells.
func HeldElsewhere(sw store.Sweep, l Liveness) bool {
	if sw.State != store.SweepRunning || sw.Holder.Kind == "" {
		return false
	}
	if orphan, _ := l.Orphaned(sw); orphan {
		return false
	}
	return !(sw.Holder.PID == os.Getpid() && sw.Holder.Host == l.Host)
}

func resume(ctx context.Context, st PrepareStore, prev store.Sweep) (Prepared, error) {
	n, err := st.RecoverInterrupted(ctx, prev.ID, "")
	if err != nil {
		return Prepared{}, fmt.Errorf("orchestrator: resume sweep %d: %w", prev.ID, err)
	}
	if prev.State == store.SweepCancelled {
		if _, err := st.RequeuePoints(ctx, prev.ID, "resumed", store.PointCancelled); err != nil {
			return Prepared{}, fmt.Errorf("orchestrator: resume sweep %d: %w", prev.ID, err)
		}
	}
	if prev.State != store.SweepRunning {
		if err := st.SetSweepState(ctx, prev.ID, store.SweepRunning, "resumed"); err != nil {
			return Prepared{}, fmt.Errorf("orchestrator: resume sweep %d: %w", prev.ID, err)
		}
	}
	return Prepared{SweepID: prev.ID, Resumed: true, Recovered: n}, nil
}

// NewSweepOf is the store record of a spec's sweep.
func NewSweepOf(spec *sweep.Spec, plan *sweep.Plan) store.NewSweep {
	ns := store.NewSweep{Name: spec.Name, SpecHash: plan.SpecHash, SpecText: string(spec.Source)}
	if spec.Schedule != nil {
		ns.Schedule = spec.Schedule.Cron
	}
	return ns
}

// HostsOf lists a spec's hosts for the store.
func HostsOf(spec *sweep.Spec) []store.NewHost {
	hosts := make([]store.NewHost, 0, len(spec.Hosts))
	for _, h := range spec.Hosts {
		addr := h.Address
		if len(h.Nodes) > 0 {
			// A group is its nodes, in rank order (the report's hosts table names them).
			var as []string
			for _, n := range h.Nodes {
				as = append(as, n.Address)
			}
			addr = strings.Join(as, ",")
		}
		hosts = append(hosts, store.NewHost{Name: h.Name, Address: addr, Driver: h.Driver, Unit: h.Unit, GPUs: h.GPUs})
	}
	return hosts
}

// PointsOf lists a plan's points for the store, in plan order.
func PointsOf(spec *sweep.Spec, plan *sweep.Plan) []store.NewPoint {
	runs := len(spec.Workload.Concurrency) * spec.Workload.Repeats
	pts := make([]store.NewPoint, 0, len(plan.Points))
	for _, p := range plan.Points {
		pts = append(pts, store.NewPoint{ID: p.ID, Method: p.Method, Baseline: p.Baseline, NumSteps: p.NumSteps,
			TopK: p.TopK, NumDraftTokens: p.NumDraftTokens, TP: p.TP, Argv: p.Argv, Env: p.Env, Runs: runs,
			Searched: spec.Searched()})
	}
	return pts
}
