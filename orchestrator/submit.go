package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// SubmitStore is what Submit needs of the store.
type SubmitStore interface {
	CreateSweep(ctx context.Context, s store.NewSweep, hosts []store.NewHost, points []store.NewPoint) (int64, error)
	Sweep(ctx context.Context, id int64) (store.Sweep, error)
}

// SubmitOptions say when a submitted sweep runs.
type SubmitOptions struct {
	// Cron makes it recur (overrides the spec's schedule.cron); each firing makes a new sweep
	// NAME@TIMESTAMP, skipped while the previous one runs.
	Cron string
	// At delays a one-off sweep; zero means as soon as hosts are free.
	At time.Time
	// MinEvery is the shortest @every interval accepted for Cron (0: sweep.MinEvery). The API
	// leaves it 0; the CLI's `submit --min-every` and the scheduler's tests set it.
	MinEvery time.Duration
}

// ScheduleConflictError: a start time (SubmitOptions.At) was given with a cron schedule, from the
// options or (FromSpec) from the spec's schedule.cron. The caller words it with its own names.
type ScheduleConflictError struct{ FromSpec bool }

func (e *ScheduleConflictError) Error() string {
	if e.FromSpec {
		return "a start time conflicts with the spec's schedule.cron: a scheduled spec fires by itself"
	}
	return "a cron schedule and a start time exclude each other"
}

// CronError: the cron expression does not parse.
type CronError struct {
	Expr string
	Err  error
}

func (e *CronError) Error() string { return fmt.Sprintf("bad cron expression %q: %v", e.Expr, e.Err) }
func (e *CronError) Unwrap() error { return e.Err }

// PromptSetError is a submitted spec's prompt set that cannot be read (a refusal of the request).
type PromptSetError struct{ Err error }

func (e *PromptSetError) Error() string { return e.Err.Error() }
func (e *PromptSetError) Unwrap() error { return e.Err }

// Submit queues a spec for the daemon: a sweep to run now (or at opts.At), or, with a cron schedule
// (opts.Cron or the spec's schedule.cron), a template that fires sweeps. It returns the stored sweep.
// A refusal of the request is a *ScheduleConflictError, a *CronError or a *PromptSetError; any other
// error is the store's.
func Submit(ctx context.Context, st SubmitStore, spec *sweep.Spec, opts SubmitOptions) (store.Sweep, error) {
	expr := opts.Cron
	if expr == "" && spec.Schedule != nil {
		expr = spec.Schedule.Cron
	}
	if expr != "" && !opts.At.IsZero() {
		return store.Sweep{}, &ScheduleConflictError{FromSpec: opts.Cron == ""}
	}
	// The prompt sets' content is part of the spec's hash (a schedule's sweeps read them again when
	// they fire: each hashes the files it ran on).
	if _, err := ReadPromptSets(ctx, spec); err != nil {
		return store.Sweep{}, &PromptSetError{Err: err}
	}
	plan := spec.Plan()
	ns := NewSweepOf(spec, plan)
	var points []store.NewPoint
	if expr != "" {
		if _, err := sweep.ParseCronEvery(expr, cmp.Or(opts.MinEvery, sweep.MinEvery)); err != nil {
			return store.Sweep{}, &CronError{Expr: expr, Err: err}
		}
		ns.Schedule, ns.State = expr, store.SweepScheduled
	} else {
		ns.Schedule, ns.NotBefore = "", opts.At
		points = PointsOf(spec, plan)
	}
	id, err := st.CreateSweep(ctx, ns, HostsOf(spec), points)
	if err != nil {
		return store.Sweep{}, fmt.Errorf("orchestrator: store sweep %q: %w", spec.Name, err)
	}
	return st.Sweep(ctx, id)
}

// ErrScheduleActive: a schedule of the spec's name already fires (SubmitNamed with a cron).
var ErrScheduleActive = errors.New("schedule already active")

// ErrUnfinished: the sweep of this spec is interrupted or cancelled and could be queued again, but
// the submission asks for a start time it would not keep (SubmitNamed with At).
var ErrUnfinished = errors.New("sweep unfinished")

// SubmitNamedStore is what SubmitNamed needs of the store (*store.DB satisfies it).
type SubmitNamedStore interface {
	SubmitStore
	ControlStore
	LatestSweepByName(ctx context.Context, name string) (store.Sweep, error)
	ListSweeps(ctx context.Context, states ...store.SweepState) ([]store.Sweep, error)
}

// Submitted says what SubmitNamed did.
type Submitted struct {
	// Sweep is the sweep in the queue (or the schedule's template).
	Sweep store.Sweep
	// Resumed: Sweep is the latest sweep of the spec's name, put back in the queue (it was
	// interrupted, cancelled, or running while its process had died).
	Resumed bool
	// Prior is the latest sweep of the spec's name as it was found (zero when none, or forceNew): the
	// sweep resumed, or the failed or cancelled sweep of an earlier version of the spec that a new
	// sweep follows.
	Prior store.Sweep
}

// SubmitNamed is Submit under the rule of names that Prepare applies for `run`: the spec's name
// means the latest sweep of that name that is not a schedule's template. Unless forceNew, a
// one-off submission of the same spec puts that sweep back in the queue when it is interrupted or
// cancelled (or running while its process died), and is refused with a *SweepExistsError when it is
// queued (ErrQueued), running in a live process (ErrRunning), done or failed (ErrFinished), or made
// from a different spec (ErrSpecChanged) unless it failed or was cancelled (Abandoned: a new sweep,
// with that one as Prior); a cron schedule is refused while a schedule of that name
// is active (ErrScheduleActive). Anything else is a new sweep, as Submit makes it.
func SubmitNamed(ctx context.Context, st SubmitNamedStore, spec *sweep.Spec, opts SubmitOptions, forceNew bool) (Submitted, error) {
	submit := func(prior store.Sweep) (Submitted, error) {
		sw, err := Submit(ctx, st, spec, opts)
		return Submitted{Sweep: sw, Prior: prior}, err
	}
	if forceNew {
		return submit(store.Sweep{})
	}
	if opts.Cron != "" || spec.Schedule != nil {
		scheds, err := st.ListSweeps(ctx, store.SweepScheduled)
		if err != nil {
			return Submitted{}, fmt.Errorf("orchestrator: look up schedule %q: %w", spec.Name, err)
		}
		for i := len(scheds) - 1; i >= 0; i-- {
			if s := scheds[i]; s.Name == spec.Name && s.Template() {
				return Submitted{Prior: s}, existsError(s, ErrScheduleActive)
			}
		}
		return submit(store.Sweep{})
	}
	prev, err := st.LatestSweepByName(ctx, spec.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return submit(store.Sweep{})
	case err != nil:
		return Submitted{}, fmt.Errorf("orchestrator: look up sweep %q: %w", spec.Name, err)
	}
	refuse := func(why error) (Submitted, error) {
		e := existsError(prev, why)
		e.NewHash = spec.Plan().SpecHash
		return Submitted{Prior: prev}, e
	}
	live := LocalLiveness(time.Now())
	orphan, _ := live.Orphaned(prev)
	switch {
	case prev.SpecHash != spec.Plan().SpecHash && Abandoned(prev.State):
		return submit(prev)
	case prev.SpecHash != spec.Plan().SpecHash:
		return refuse(ErrSpecChanged)
	case prev.State == store.SweepDone || prev.State == store.SweepFailed:
		return refuse(ErrFinished)
	case prev.State == store.SweepQueued:
		return refuse(ErrQueued)
	case prev.State == store.SweepRunning && !orphan:
		return refuse(ErrRunning)
	case !opts.At.IsZero():
		return refuse(ErrUnfinished)
	}
	sw, err := Resume(ctx, st, prev, live, "resumed by specsweep submit")
	if err != nil {
		return Submitted{Prior: prev}, err
	}
	return Submitted{Sweep: sw, Resumed: true, Prior: prev}, nil
}
