package orchestrator

import (
	"cmp"
	"context"
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

// Submit queues a spec for the daemon: a sweep to run now (or at opts.At), or, with a cron schedule
// (opts.Cron or the spec's schedule.cron), a template that fires sweeps. It returns the stored sweep.
// A refusal of the request is a *ScheduleConflictError or a *CronError; any other error is the
// store's.
func Submit(ctx context.Context, st SubmitStore, spec *sweep.Spec, opts SubmitOptions) (store.Sweep, error) {
	expr := opts.Cron
	if expr == "" && spec.Schedule != nil {
		expr = spec.Schedule.Cron
	}
	if expr != "" && !opts.At.IsZero() {
		return store.Sweep{}, &ScheduleConflictError{FromSpec: opts.Cron == ""}
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
