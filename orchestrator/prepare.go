package orchestrator

import (
	"context"
	"errors"
	"fmt"

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

// ErrFinished: the sweep of this spec already ran to its end.
var ErrFinished = errors.New("sweep already finished")

// SweepExistsError is Prepare's refusal of the latest sweep of the spec's name: Err is ErrSpecChanged
// (Hash is the stored spec's, NewHash this one's) or ErrFinished. It names no way out: the caller
// words it (the CLI's --new).
type SweepExistsError struct {
	Name          string
	ID            int64
	State         store.SweepState
	Hash, NewHash string
	Err           error
}

func (e *SweepExistsError) Error() string {
	if errors.Is(e.Err, ErrSpecChanged) {
		return fmt.Sprintf("sweep %q (id %d, %s) was made from a different spec (hash %.12s, this one %.12s): %v",
			e.Name, e.ID, e.State, e.Hash, e.NewHash, e.Err)
	}
	return fmt.Sprintf("sweep %q (id %d) is %s: %v", e.Name, e.ID, e.State, e.Err)
}

func (e *SweepExistsError) Unwrap() error { return e.Err }

// Prepared says which sweep to run.
type Prepared struct {
	SweepID int64
	// Resumed: an unfinished sweep of the same spec was found; Recovered of its points were left
	// running by a process that died and are pending again (their partial runs superseded).
	Resumed   bool
	Recovered int
}

// Prepare finds the sweep to run for spec: the latest sweep of that name when it is unfinished and
// has the same spec hash (a resume), or a new one. A different hash is refused with ErrSpecChanged
// unless forceNew; a finished sweep gives ErrFinished (with its id) unless forceNew.
func Prepare(ctx context.Context, st PrepareStore, spec *sweep.Spec, forceNew bool) (Prepared, error) {
	plan := spec.Plan()
	if !forceNew {
		prev, err := st.LatestSweepByName(ctx, spec.Name)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return Prepared{}, fmt.Errorf("orchestrator: look up sweep %q: %w", spec.Name, err)
		case prev.SpecHash != plan.SpecHash:
			return Prepared{SweepID: prev.ID}, &SweepExistsError{Name: spec.Name, ID: prev.ID, State: prev.State,
				Hash: prev.SpecHash, NewHash: plan.SpecHash, Err: ErrSpecChanged}
		case prev.State == store.SweepDone || prev.State == store.SweepFailed:
			return Prepared{SweepID: prev.ID}, &SweepExistsError{Name: spec.Name, ID: prev.ID, State: prev.State, Err: ErrFinished}
		default:
			return resume(ctx, st, prev)
		}
	}
	id, err := st.CreateSweep(ctx, NewSweepOf(spec, plan), HostsOf(spec), PointsOf(spec, plan))
	if err != nil {
		return Prepared{}, fmt.Errorf("orchestrator: store sweep %q: %w", spec.Name, err)
	}
	return Prepared{SweepID: id}, nil
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
		hosts = append(hosts, store.NewHost{Name: h.Name, Address: h.Address, Driver: h.Driver, Unit: h.Unit, GPUs: h.GPUs})
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
