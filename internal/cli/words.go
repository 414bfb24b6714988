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
	again := "`specsweep " + command + " --new SPEC` starts a new sweep of this name"
	switch {
	case errors.Is(se, orchestrator.ErrSpecChanged):
		return fmt.Errorf("%w: restore that spec to resume it, or pass --new to start a new sweep of this name", err)
	case errors.Is(se, orchestrator.ErrRunning):
		return fmt.Errorf("sweep %s (id %d) is running (%s): a sweep runs in one process at a time; "+
			"`specsweep status %d` follows it, `specsweep cancel %d` stops it", se.Name, id, holderText(sw.Holder, true), id, id)
	case errors.Is(se, orchestrator.ErrQueued):
		return fmt.Errorf("sweep %s (id %d) is already queued: the daemon runs it %s; `specsweep status %d` follows it, %s",
			se.Name, id, queuedWhen(sw), id, again)
	case errors.Is(se, orchestrator.ErrUnfinished):
		return fmt.Errorf("sweep %s (id %d) is %s: `specsweep resume %d` queues it again now (--at applies to a new sweep), "+
			"or `specsweep submit --new --at TIME SPEC` queues a new sweep of this name", se.Name, id, sw.State, id)
	case errors.Is(se, orchestrator.ErrScheduleActive):
		return fmt.Errorf("schedule %s (id %d) already fires on %q: `specsweep cancel %d` stops it; `specsweep submit --new SPEC` adds a second schedule of this name",
			se.Name, id, sw.Schedule, id)
	case errors.Is(se, orchestrator.ErrFinished) && sw.State == store.SweepFailed:
		return fmt.Errorf("sweep %s (id %d) failed (%s): `specsweep status %d` shows each failed point's cause; "+
			"`specsweep resume %d` queues it again (its failed points stay failed); %s", se.Name, id, countsText(sw), id, id, again)
	case errors.Is(se, orchestrator.ErrFinished):
		return fmt.Errorf("sweep %s (id %d) already finished (%s, %s): `specsweep report %d` shows its results; %s",
			se.Name, id, sw.State, countsText(sw), id, again)
	}
	return err
}

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
	h := s.Holder
	who := "specsweep run"
	how := "run the same `specsweep run` command again to resume it"
	if h.Kind == store.HolderDaemon {
		who = "specsweep daemon"
		how = "start the daemon again (`specsweep daemon`, or `systemctl start specsweep`): it resumes the sweeps it was running"
	}
	where := fmt.Sprintf("%s, pid %d", who, h.PID)
	if h.Host != "" {
		where += " on " + h.Host
	}
	return string(store.SweepInterrupted),
		fmt.Sprintf("no process has held it since %s (%s); %s", since.UTC().Format("2006-01-02 15:04:05Z"), where, how)
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

// findSweep resolves a user's reference to a sweep (an id, or a name: store.FindSweep), wording one
// that names no sweep.
func findSweep(ctx context.Context, st *store.DB, ref string) (store.Sweep, error) {
	sw, err := st.FindSweep(ctx, ref)
	if errors.Is(err, store.ErrNotFound) {
		return store.Sweep{}, fmt.Errorf("no sweep has the id or name %q (`specsweep sweeps` lists them)", ref)
	}
	return sw, err
}
