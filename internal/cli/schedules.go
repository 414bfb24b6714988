package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/specsweep/specsweep/internal/tabular"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

func schedulesCmd() command {
	return newCommand("schedules", "",
		"List the schedules (cron templates that fire NAME@TIME sweeps): id, name, cron, state, next firing, last fired sweep.", schedulesRun).
		withExamples("specsweep schedules", "specsweep cancel --schedule 2          # one stops firing")
}

type schedulesOptions = listOptions

// schedulesRun lists the schedules of the store, oldest first.
func schedulesRun(ctx context.Context, env Env, o *schedulesOptions) error {
	if err := checkFormat(o.Format); err != nil {
		return err
	}
	st, err := store.OpenReadOnly(ctx, dbPath(env, o.DB))
	if err != nil {
		return err
	}
	defer st.Close()
	scheds, err := schedules(ctx, st)
	if err != nil {
		return err
	}
	now := time.Now()
	cols := []string{"id", "name", "cron", "state", "next_fire", "last_sweep", "last_sweep_id", "last_state"}
	vals := make([][]any, 0, len(scheds))
	for _, s := range scheds {
		row := []any{s.ID, s.Name, s.Schedule, string(s.State), formatTime(nextFire(s, now), o.Format), nil, nil, nil}
		if last, err := st.LatestInstance(ctx, s.ID); err == nil {
			row[5], row[6], row[7] = last.Name, last.ID, stateWord(last)
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		vals = append(vals, row)
	}
	if len(vals) == 0 && o.Format == "table" {
		fmt.Fprintln(env.Stdout, "no schedule (`specsweep submit --cron EXPR SPEC` makes one)")
		return nil
	}
	return tabular.Write(env.Stdout, o.Format, cols, vals)
}

// schedules are the store's schedule templates (store.Sweep.Template), oldest first.
func schedules(ctx context.Context, st *store.DB) ([]store.Sweep, error) {
	all, err := st.ListSweeps(ctx, store.SweepScheduled, store.SweepCancelled)
	if err != nil {
		return nil, err
	}
	var out []store.Sweep
	for _, s := range all {
		if s.Template() {
			out = append(out, s)
		}
	}
	return out, nil
}

// nextFire is an active schedule's next firing after now (zero for a cancelled one, or a cron
// that does not parse). The daemon holds crons to its --min-every; this only reads the expression.
func nextFire(s store.Sweep, now time.Time) time.Time {
	if s.State != store.SweepScheduled || s.Schedule == "" {
		return time.Time{}
	}
	sched, err := sweep.ParseCronEvery(s.Schedule, time.Nanosecond)
	if err != nil {
		return time.Time{}
	}
	return sched.Next(now)
}

// findSchedule resolves --schedule: a schedule's id. A name is refused with the ids of the
// schedules of that name; a sweep's id with what it is.
func findSchedule(ctx context.Context, st *store.DB, ref string) (store.Sweep, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(ref), 10, 64)
	if err != nil {
		scheds, lerr := schedules(ctx, st)
		if lerr != nil {
			return store.Sweep{}, lerr
		}
		var named []string
		for _, s := range scheds {
			if s.Name == ref {
				named = append(named, fmt.Sprintf("%d (%s, %q)", s.ID, s.State, s.Schedule))
			}
		}
		if len(named) == 0 {
			return store.Sweep{}, usagef("--schedule takes a schedule's id; no schedule is named %q (`specsweep schedules` lists them)", ref)
		}
		return store.Sweep{}, usagef("--schedule takes a schedule's id; the schedules named %q: %s", ref, strings.Join(named, ", "))
	}
	sw, err := st.Sweep(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Sweep{}, fmt.Errorf("no schedule has the id %d (`specsweep schedules` lists them)", id)
	}
	if err != nil {
		return store.Sweep{}, err
	}
	if !sw.Template() {
		return store.Sweep{}, fmt.Errorf("%d is sweep %s, not a schedule: `specsweep cancel %d` and `specsweep resume %d` take it without --schedule (`specsweep schedules` lists the schedules)",
			id, sw.Name, id, id)
	}
	return sw, nil
}

// scheduleOf words a name that means no sweep but a schedule: its id, and its newest sweep when it
// fired one. "" when no schedule has that name.
func scheduleOf(ctx context.Context, st *store.DB, name string) string {
	scheds, err := schedules(ctx, st)
	if err != nil {
		return ""
	}
	for i := len(scheds) - 1; i >= 0; i-- {
		s := scheds[i]
		if s.Name != name {
			continue
		}
		msg := fmt.Sprintf("it is the name of schedule %d (%s, %q), and a name means a sweep, never a schedule "+
			"(`specsweep status %d` shows the schedule, `specsweep schedules` lists them)", s.ID, s.State, s.Schedule, s.ID)
		if last, err := st.LatestInstance(ctx, s.ID); err == nil {
			msg += fmt.Sprintf("; its newest sweep is %s (id %d, %s)", last.Name, last.ID, stateWord(last))
		} else {
			msg += "; it has not fired yet"
		}
		return msg
	}
	return ""
}

// fireText is a firing time for a sentence: "2026-12-01 22:00:00Z", or "unknown".
func fireText(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// printSchedule writes a schedule's state: its cron, next firing and last fired sweep.
func printSchedule(ctx context.Context, env Env, st *store.DB, s store.Sweep) error {
	w := env.Stdout
	fmt.Fprintf(w, "schedule %s (id %d): %s, fires on %q", s.Name, s.ID, s.State, s.Schedule)
	if s.State == store.SweepScheduled {
		fmt.Fprintf(w, ", next at %s", fireText(nextFire(s, time.Now())))
	} else {
		fmt.Fprintf(w, " no more (`specsweep resume --schedule %d` starts it again)", s.ID)
	}
	fmt.Fprintln(w)
	last, err := st.LatestInstance(ctx, s.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		fmt.Fprintln(w, "it has not fired yet")
	case err != nil:
		return err
	default:
		fmt.Fprintf(w, "last fired: sweep %s (id %d), %s: %s (`specsweep status %d`)\n", last.Name, last.ID, stateWord(last), countsText(last), last.ID)
	}
	return nil
}
