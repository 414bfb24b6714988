package cli

import (
	"errors"
	"fmt"

	"github.com/specsweep/specsweep/orchestrator"
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
