package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// The orchestrator's refusals are typed and name no flag; these functions word them with the
// flags of the command that got them.

// prepareWords words Prepare's and SubmitNamed's refusals of the latest sweep of a spec's name for
// command (run or submit), with that command's --new.
func prepareWords(command string, err error) error {
	var se *orchestrator.SweepExistsError
	if !errors.As(err, &se) {
		return err
	}
	sw, id := se.Prior, se.ID
	if sw.ID == 0 {
		sw = store.Sweep{ID: se.ID, Name: se.Name, State: se.State, SpecHash: se.Hash, Holder: se.Holder}
	}
	again := "`specsweep " + command + " --new SPEC` starts a new sweep of this name"
	wordErr := func(format string, a ...any) error { return wordedError{msg: fmt.Sprintf(format, a...), err: err} }
	switch {
	case errors.Is(se, orchestrator.ErrSpecChanged):
		return wordErr("sweep %s (id %d, %s) was made from a different version of this spec (stored hash %.12s, this file %.12s): "+
			"it continues only with the spec it was made from (`specsweep status %d` shows it); %s",
			se.Name, id, stateWord(sw), se.Hash, se.NewHash, id, again)
	case errors.Is(se, orchestrator.ErrRunning):
		return wordErr("sweep %s (id %d) is running (%s): a sweep runs in one process at a time; "+
			"`specsweep status %d` follows it, `specsweep cancel %d` stops it", se.Name, id, holderText(sw.Holder, true), id, id)
	case errors.Is(se, orchestrator.ErrQueued):
		return wordErr("sweep %s (id %d) is already queued: the daemon runs it %s; `specsweep status %d` follows it, %s",
			se.Name, id, queuedWhen(sw), id, again)
	case errors.Is(se, orchestrator.ErrUnfinished):
		return wordErr("sweep %s (id %d) is %s: `specsweep resume %d` queues it again now (--at applies to a new sweep), "+
			"or `specsweep submit --new --at TIME SPEC` queues a new sweep of this name", se.Name, id, sw.State, id)
	case errors.Is(se, orchestrator.ErrScheduleActive):
		return wordErr("schedule %s (id %d) already fires on %q: `specsweep cancel --schedule %d` stops it; `specsweep submit --new SPEC` adds a second schedule of this name",
			se.Name, id, sw.Schedule, id)
	case errors.Is(se, orchestrator.ErrFinished) && sw.State == store.SweepFailed:
		return wordErr("sweep %s (id %d) failed (%s): `specsweep status %d` shows each failed point's cause; "+
			"`specsweep resume %d` queues it again (its failed points stay failed); %s", se.Name, id, countsText(sw), id, id, again)
	case errors.Is(se, orchestrator.ErrFinished):
		return wordErr("sweep %s (id %d) already finished (%s, %s): `specsweep report %d` shows its results; %s",
			se.Name, id, sw.State, countsText(sw), id, again)
	}
	return err
}

// wordedError is a refusal worded for a person that still unwraps to the typed error it words.
type wordedError struct {
	msg string
	err error
}

func (e wordedError) Error() string { return e.msg }
func (e wordedError) Unwrap() error { return e.err }

// countsText is a stored sweep's point counts in a few words: "3 done, 1 failed" (and the other
// states a sweep has points in).
func countsText(sw store.Sweep) string {
	parts := []string{fmt.Sprintf("%d done", sw.Done), fmt.Sprintf("%d failed", sw.Failed)}
	for _, c := range []struct {
		n    int
		what string
	}{{sw.Pending, "pending"}, {sw.Running, "running"}, {sw.Cancelled, "cancelled"}, {sw.Waiting, "waiting"}, {sw.Pruned, "pruned"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return strings.Join(parts, ", ")
}

// holderText names the process that holds (or held) a sweep: "specsweep run, pid 4242 on gpu-box"
// (with withBeat, ", last heartbeat 12:00:05Z"); "no process" when none ever did.
func holderText(h store.Holder, withBeat bool) string {
	if h.Kind == "" {
		return "no process recorded"
	}
	s := fmt.Sprintf("specsweep %s, pid %d", h.Kind, h.PID)
	if h.Host != "" {
		s += " on " + h.Host
	}
	if withBeat && !h.Heartbeat.IsZero() {
		s += ", last heartbeat " + h.Heartbeat.UTC().Format("15:04:05Z")
	}
	return s
}

// resumeHint says how a stopped sweep continues, by how it was run: a sweep that `specsweep run`
// held resumes with the same `run` command (in the foreground); a daemon's or a submitted one is
// queued again with `specsweep resume ID`.
func resumeHint(sw store.Sweep) string {
	if sw.Holder.Kind == store.HolderRun {
		return fmt.Sprintf("`specsweep run SPEC` (the same spec) resumes it, or `specsweep resume %d` queues it for the daemon", sw.ID)
	}
	return fmt.Sprintf("`specsweep resume %d` queues it again", sw.ID)
}

// submitWords words Submit's refusals for `submit` (its --cron and --at).
func submitWords(err error) error {
	var sc *orchestrator.ScheduleConflictError
	if !errors.As(err, &sc) {
		return err
	}
	if sc.FromSpec {
		return errors.New("--at conflicts with the spec's schedule.cron: a scheduled spec fires by itself")
	}
	return errors.New("--cron and --at exclude each other")
}

// searchWords says what a spec's search does with its planned points, for `plan`: "search climb
// (min_gain 2%, patience 1, probe num_steps 10; budget 12 points): it decides while the sweep runs
// which of the 20 planned points run; the others end pruned, each with its reason". "" when every
// point runs (no search, or a grid without a budget).
func searchWords(spec *sweep.Spec, points int) string {
	s := spec.Search
	if !spec.Searched() {
		return ""
	}
	budget := ""
	if s.Budget > 0 {
		budget = fmt.Sprintf("budget %d points", s.Budget)
	}
	if !s.Climbs() {
		return fmt.Sprintf("search grid (%s): the planned points run in plan order until %d have run; the rest of the %d end pruned (\"budget of %d points reached\")",
			budget, s.Budget, points, s.Budget)
	}
	var opts []string
	opts = append(opts, "min_gain "+strconv.FormatFloat(100*s.MinGain, 'g', 4, 64)+"%", fmt.Sprintf("patience %d", s.Patience))
	if len(s.Probe) > 0 {
		probes := make([]string, len(s.Probe))
		for i, n := range s.Probe {
			probes[i] = strconv.Itoa(n)
		}
		opts = append(opts, "probe num_steps "+strings.Join(probes, ", "))
	}
	what := strings.Join(opts, ", ")
	if budget != "" {
		what += "; " + budget
	}
	return fmt.Sprintf("search climb (%s): it decides while the sweep runs which of the %d planned points run; the others end pruned, each with its reason",
		what, points)
}

// shownState is a sweep's state as a person should read it: a running sweep whose process died
// (orchestrator.Liveness) is "interrupted", and note says since when no process holds it and how to
// resume it ("" otherwise).
func shownState(s store.Sweep, l orchestrator.Liveness) (state, note string) {
	orphan, since := l.Orphaned(s)
	if !orphan {
		return string(s.State), ""
	}
	how := "run the same `specsweep run` command again to resume it"
	if s.Holder.Kind == store.HolderDaemon {
		how = "start the daemon again (`specsweep daemon`, or `systemctl start specsweep`): it resumes the sweeps it was running"
	}
	return string(store.SweepInterrupted),
		fmt.Sprintf("no process has held it since %s (%s); %s", since.UTC().Format("2006-01-02 15:04:05Z"), holderText(s.Holder, false), how)
}

// openRecorded opens the database read-only and finds the sweep ref whose records command reads:
// a schedule's template, which records nothing, is refused as recordedWords words it. The caller
// closes the database.
func openRecorded(ctx context.Context, env Env, db, ref, command string) (*store.DB, store.Sweep, error) {
	st, err := store.OpenReadOnly(ctx, dbPath(env, db))
	if err != nil {
		return nil, store.Sweep{}, err
	}
	sw, err := findSweep(ctx, st, ref)
	if err == nil && sw.Template() {
		_, err = recordedWords(command, sw, 0)
	}
	if err != nil {
		st.Close()
		return nil, store.Sweep{}, err
	}
	return st, sw, nil
}

// recordedWords checks that a sweep has something for a command that reads its results (report,
// export) and says what a partial one holds: an error for a schedule's template (it has no runs of
// its own) and for a sweep with nothing recorded yet (no run, no finished point); a note for a sweep
// that has not ended ("sweep X (id N) is running: ... so far"), "" otherwise.
func recordedWords(command string, sw store.Sweep, runs int) (note string, err error) {
	if sw.Template() {
		return "", fmt.Errorf("%d is schedule %s (%q), not a sweep: it has no runs of its own; each firing makes a sweep %s@TIME, "+
			"which `specsweep %s` takes by id or name (`specsweep status` lists them)", sw.ID, sw.Name, sw.Schedule, sw.Name, command)
	}
	if runs == 0 && sw.Done+sw.Failed == 0 {
		return "", fmt.Errorf("sweep %s (id %d) is %s and nothing of it is recorded yet (no run, no finished point): "+
			"`specsweep status %d` follows it", sw.Name, sw.ID, stateWord(sw), sw.ID)
	}
	if !sw.State.Terminal() {
		return fmt.Sprintf("note: sweep %s (id %d) is %s: this %s holds the %d run(s) recorded so far", sw.Name, sw.ID,
			stateWord(sw), command, runs), nil
	}
	return "", nil
}

// stateWord is a stored sweep's state as a person should read it (shownState: a running sweep whose
// process died is interrupted).
func stateWord(sw store.Sweep) string {
	shown, _ := shownState(sw, orchestrator.LocalLiveness(time.Now()))
	return shown
}

// findSweep resolves a user's reference to a sweep: an id (any sweep, a schedule's template too), or
// a name, which means the newest sweep of that name that is not a schedule's template
// (store.FindSweep). A reference that names no sweep is worded, and a name that only a schedule has
// says so, with the schedule's id and its newest sweep.
func findSweep(ctx context.Context, st *store.DB, ref string) (store.Sweep, error) {
	sw, err := st.FindSweep(ctx, ref)
	if errors.Is(err, store.ErrNotFound) {
		if msg := scheduleOf(ctx, st, strings.TrimSpace(ref)); msg != "" {
			return store.Sweep{}, fmt.Errorf("no sweep is named %q: %s", strings.TrimSpace(ref), msg)
		}
		return store.Sweep{}, fmt.Errorf("no sweep has the id or name %q (`specsweep sweeps` lists them)", ref)
	}
	return sw, err
}

// afreshWords says why a new sweep starts where a sweep of the name exists: it failed or was
// cancelled with an earlier version of the spec (orchestrator.Abandoned), and stays under its id.
func afreshWords(prior store.Sweep) string {
	return fmt.Sprintf("sweep %s (id %d) %s with an earlier version of this spec (%s): a new sweep of this name starts; "+
		"the name now means the new one, and id %d stays in the store", prior.Name, prior.ID, endedWord(prior.State), countsText(prior), prior.ID)
}

// endedWord is how a sweep ended, as a verb: "failed", "was cancelled".
func endedWord(s store.SweepState) string {
	if s == store.SweepCancelled {
		return "was cancelled"
	}
	return string(s)
}
