package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// The orchestrator's refusals are typed and name no flag; these functions word them with the
// flags of the command that got them.

// prepareWords words Prepare's refusal of an existing sweep for `run` (its --new).
func prepareWords(err error) error {
	var se *orchestrator.SweepExistsError
	if !errors.As(err, &se) {
		return err
	}
	if errors.Is(se, orchestrator.ErrSpecChanged) {
		return fmt.Errorf("%w: restore that spec to resume it, or pass --new to start a new sweep of this name", err)
	}
	return fmt.Errorf("%w: pass --new to run it again", err)
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
