package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/internal/argparse"
	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/sim"
	"github.com/specsweep/specsweep/sweep"
)

// specDir is the folder of the spec file at path: a local host's relative command is resolved
// against it (docs/spec.md, server.command).
func specDir(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Dir(path)
	}
	return filepath.Dir(abs)
}

// machineChecks are what validate and plan can check of a spec on this machine, beyond its text:
// errors (a local host's server command that cannot be started here) and warnings (points a
// sglangsim server's memory model says cannot start: the simulator's out of memory).
func machineChecks(ctx context.Context, spec *sweep.Spec, points []sweep.Point, path string) (errs, warns []string) {
	// The prompt sets are read in full: a bad line is refused here with its file and line, and
	// their content hashes are the spec hash's, as run will compute it.
	if _, err := orchestrator.ReadPromptSets(ctx, spec); err != nil {
		errs = append(errs, fmt.Sprintf("%s: %v", path, err))
	}
	if len(spec.Server.Command) == 0 {
		return errs, nil
	}
	cmd := spec.Server.Command[0]
	for _, h := range spec.Hosts {
		if h.Driver != sweep.DriverLocal {
			continue
		}
		if err := hostctl.CheckLocalCommand(cmd, specDir(path)); err != nil {
			errs = append(errs, fmt.Sprintf("%s: server.command[0]: %v: host %q runs it here (driver local), so every point would fail launch_failed", path, err, h.Name))
		}
		break // one command, one machine: said once
	}
	if filepath.Base(cmd) != "sglangsim" {
		return errs, nil
	}
	// The simulator's memory verdict per point, grouped by what it says.
	type group struct {
		reason string
		labels []string
	}
	var groups []*group
	fits := sim.NewFits()
	for _, pt := range points {
		f, err := fits.Of(pt.Argv[len(spec.Server.Command):], pt.Env)
		if err != nil || f.Reason() == "" {
			continue // arguments the simulator refuses are bad_args at start: not a memory question
		}
		i := slices.IndexFunc(groups, func(g *group) bool { return g.reason == f.Reason() })
		if i < 0 {
			groups = append(groups, &group{reason: f.Reason()})
			i = len(groups) - 1
		}
		groups[i].labels = append(groups[i].labels, pt.Label())
	}
	for _, g := range groups {
		shown := g.labels
		if len(shown) > 3 {
			shown = append(shown[:3:3], "...")
		}
		warns = append(warns, fmt.Sprintf("%s: warning: %d point(s) will not start on the simulator's GPUs (%s): %s",
			path, len(g.labels), strings.Join(shown, ", "), g.reason))
	}
	return errs, warns
}

// daemonCanResolve refuses a spec for the daemon whose local host's command is a relative path with
// a slash: `run` resolves it against the spec file's folder, but the daemon gets the spec as text,
// with no folder, and would resolve it against its own working directory, another program.
func daemonCanResolve(spec *sweep.Spec, path string) error {
	for i, d := range spec.Workload.Datasets {
		if !filepath.IsAbs(d.Path) {
			return exitError{code: ExitFailure, err: fmt.Errorf("%s: workload.datasets[%d].path %q is relative to the spec's folder, which the daemon does not have: write it absolute (%s) to submit this spec", path, i, d.Path, filepath.Join(specDir(path), d.Path))}
		}
	}
	if len(spec.Server.Command) == 0 || filepath.IsAbs(spec.Server.Command[0]) || !strings.Contains(spec.Server.Command[0], "/") {
		return nil
	}
	for _, h := range spec.Hosts {
		if h.Driver == sweep.DriverLocal {
			abs := filepath.Join(specDir(path), spec.Server.Command[0])
			return exitError{code: ExitFailure, err: fmt.Errorf("%s: server.command[0] %q is relative to the spec's folder, which the daemon does not have: write it absolute (%s) to submit this spec", path, spec.Server.Command[0], abs)}
		}
	}
	return nil
}

// fitOf is what doctor weighs against each host's GPUs: the server's model folder, the tps the plan
// sweeps and the spec's --mem-fraction-static.
func fitOf(spec *sweep.Spec) hostctl.Fit {
	var f hostctl.Fit
	f.ModelPath, _ = argparse.Last(spec.Server.Args, argparse.ModelPath)
	if v, ok := argparse.Last(spec.Server.Args, argparse.MemFractionStatic); ok {
		f.MemFraction, _ = strconv.ParseFloat(v, 64)
	}
	for _, pt := range spec.Plan().Points {
		if !slices.Contains(f.TPs, pt.TP) {
			f.TPs = append(f.TPs, pt.TP)
		}
	}
	slices.Sort(f.TPs)
	return f
}
