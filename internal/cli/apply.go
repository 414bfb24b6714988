package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// Exit codes of apply: which check failed (the configuration was rolled back each time).
const (
	ExitApplyStart  = 4 // the server did not come up (or the host refused the apply)
	ExitApplyOutput = 5 // the output check mismatched the sweep's baseline
	ExitApplySpeed  = 6 // the load level ran below the sweep's figure
	ExitRollback    = 7 // a check failed and the rollback failed too: look at the host
)

func applyCmd() command {
	return newCommand("apply", "SWEEP",
		"Make a configuration of a sweep a host's server durably (its own drop-in), check it as the sweep measured it, and roll back to what ran before if a check fails.", applyRun).
		withExamples("specsweep apply nightly --host gpu1                       # the recommendation for equal time at each level",
			"specsweep apply 3 --host gpu1 --config adaptive            # SGLang's adaptive schedule fitted from the sweep",
			"specsweep apply 3 --host gpu1 --config 88b47dfd14c1 --dry-run",
			"specsweep restore --applied gpu1                           # the operator's unit back")
}

type applyOptions struct {
	DB                string  // --db
	Host              string  // --host
	Config            string  // --config: recommended, adaptive or a point id
	Traffic           string  // --traffic
	SLO               string  // --slo
	Level             int     // --level: the speed check's concurrency
	Tolerance         float64 // --tolerance
	ConfigPath        string  // --config-path: where the host keeps an adaptive schedule
	DryRun            bool    // --dry-run
	AcceptNewHostKeys bool    // --accept-new-host-keys
	Sweep             string  // SWEEP
}

func (o *applyOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", dbUsage)
	fs.StringVar(&o.Host, "host", "", "the spec's `HOST` to apply to (required)")
	fs.StringVar(&o.Config, "config", "recommended", "`WHAT` to apply: recommended (recommend's answer), adaptive (the fitted adaptive schedule) or a point id")
	fs.StringVar(&o.Traffic, "traffic", "", "the recommendation's traffic `MIX` (as for recommend)")
	fs.StringVar(&o.SLO, "slo", "", "latency `SLOS` the recommended configuration must meet (as for recommend)")
	fs.IntVar(&o.Level, "level", 0, "the speed check's `CONCURRENCY` (default: the mix's level of the largest share)")
	fs.Float64Var(&o.Tolerance, "tolerance", 0.1, "how far below the sweep's lowest repeat the speed check may measure, a `FRACTION` (0.1: 10%)")
	fs.StringVar(&o.ConfigPath, "config-path", "", "where the host keeps the adaptive schedule, an absolute `PATH` (default /var/lib/specsweep/applied/UNIT-adaptive.json)")
	fs.BoolVar(&o.DryRun, "dry-run", false, "print the drop-in and what would be done; change nothing")
	fs.BoolVar(&o.AcceptNewHostKeys, "accept-new-host-keys", false, "add unknown SSH host keys to known_hosts (a changed key is always refused)")
}

func (o *applyOptions) args(pos []string) (err error) {
	o.Sweep, err = oneArg(pos, "SWEEP")
	return err
}

// hostApplier is what apply needs of a host: hostctl.Applier (the ssh driver has it).
type hostApplier interface {
	Applied(ctx context.Context) (*hostctl.AppliedRecord, error)
	Apply(ctx context.Context, l hostctl.Launch, rec hostctl.AppliedRecord) (hostctl.Instance, error)
	Rollback(ctx context.Context) error
	Commit(ctx context.Context) error
	Unapply(ctx context.Context) error
}

// applyRun resolves the configuration, applies it with its checks (orchestrator.Apply) and words the
// outcome; the exit code says which check failed.
func applyRun(ctx context.Context, env Env, o *applyOptions) error {
	if o.Host == "" {
		return usagef("--host is required: the spec's host to apply to")
	}
	if !(o.Tolerance >= 0 && o.Tolerance < 1) {
		return usagef("--tolerance %g: want a fraction from 0 to below 1 (0.1 is 10%%)", o.Tolerance)
	}
	if o.Level < 0 || o.Level > maxConcurrencyLevel {
		return usagef("--level %d: want a concurrency from 1 to %d", o.Level, maxConcurrencyLevel)
	}
	if o.ConfigPath != "" {
		if err := sweep.CheckFilePath(o.ConfigPath); err != nil {
			return usagef("--config-path: %v", err)
		}
	}
	opt, err := mixOptions(o.Traffic, o.SLO)
	if err != nil {
		return err
	}
	dbFile, err := filepath.Abs(dbPath(env, o.DB))
	if err != nil {
		return err
	}
	ro, sw, err := openRecorded(ctx, env, o.DB, o.Sweep, "apply")
	if err != nil {
		return err
	}
	s, err := report.LoadID(ctx, ro, sw.ID)
	ro.Close()
	if err != nil {
		return fmt.Errorf("loading sweep %s (id %d): %w", sw.Name, sw.ID, err)
	}
	spec, err := sweep.Parse(sw.Name+".yaml", []byte(sw.SpecText))
	if err != nil {
		return fmt.Errorf("apply: sweep %s (id %d): its stored spec no longer parses: %w", sw.Name, sw.ID, err)
	}
	hi := slices.IndexFunc(spec.Hosts, func(h sweep.Host) bool { return h.Name == o.Host })
	if hi < 0 {
		var names []string
		for _, h := range spec.Hosts {
			names = append(names, h.Name)
		}
		return usagef("--host %s: sweep %s has no such host (its hosts: %s)", o.Host, sw.Name, strings.Join(names, ", "))
	}
	host := spec.Hosts[hi]
	req, err := applyRequest(s, sw, spec, host, opt, o, dbFile)
	if err != nil {
		return err
	}
	if o.DryRun {
		return printDryRun(env, host, req)
	}
	d, err := hostctl.Open(ctx, host, openOptions(spec, hostOptions{acceptNewHostKeys: o.AcceptNewHostKeys, getenv: env.Getenv}))
	if err != nil {
		return err
	}
	defer d.Close()
	ap, ok := d.(hostApplier)
	if !ok {
		return exitError{code: ExitFailure, err: noApplyWords(host)}
	}
	st, err := store.Open(ctx, dbFile)
	if err != nil {
		return err
	}
	defer st.Close()
	req.Progress = func(line string) { fmt.Fprintf(env.Stderr, "apply: %s\n", line) }
	out, err := orchestrator.Apply(ctx, st, ap, req)
	if err != nil {
		return err
	}
	return applyWords(env, host, req, out)
}

// maxConcurrencyLevel is the largest concurrency a spec may measure (sweep.Limits).
const maxConcurrencyLevel = 4096

// applyRequest resolves --config to a planned point of the stored spec (its argv and env as planned,
// secrets included: the stored point's are redacted) and the figure its speed check compares with.
func applyRequest(s *report.Sweep, sw store.Sweep, spec *sweep.Spec, host sweep.Host, opt report.RecommendOptions, o *applyOptions, dbFile string) (orchestrator.ApplyRequest, error) {
	planned := map[string]sweep.Point{}
	for _, p := range spec.Plan().Points {
		planned[p.ID] = p
	}
	byID := map[string]*report.Point{}
	for _, p := range s.Points {
		byID[p.ID] = p
	}
	req := orchestrator.ApplyRequest{SweepID: sw.ID, Sweep: sw.Name, SpecHash: sw.SpecHash, Spec: spec, Host: host.Name,
		Unit: host.Unit, Choice: o.Config, Tolerance: o.Tolerance, By: byWhom()}
	var chosen *report.Point
	var fit *report.AdaptiveFit
	traffic := opt.Traffic
	switch o.Config {
	case "recommended":
		r, err := report.Recommend(s, opt)
		if err != nil {
			return req, exitError{code: ExitFailure, err: fmt.Errorf("apply: sweep %s (id %d): %w", s.Name, s.ID, err)}
		}
		chosen, traffic = r.Winner.Point, r.Traffic
	case "adaptive":
		var err error
		if fit, err = report.FitAdaptive(s); err != nil {
			return req, exitError{code: ExitFailure, err: fmt.Errorf("apply: sweep %s (id %d): %w", s.Name, s.ID, err)}
		}
		for _, p := range s.Points {
			if p.Method == fit.Method && p.TP == fit.TP && planned[p.ID].ID != "" && (chosen == nil || p.NumSteps == fit.InitialSteps) {
				chosen = p
			}
		}
		if chosen == nil {
			return req, fmt.Errorf("apply: the fitted chain %s tp %d has no planned point in sweep %s", fit.Method, fit.TP, s.Name)
		}
		path := o.ConfigPath
		switch {
		case path != "":
		case host.Driver == sweep.DriverLocal:
			// A local server runs as this user: beside the database, not in a root-owned folder.
			path = filepath.Join(filepath.Dir(dbFile), "applied-"+host.Name+"-adaptive.json")
		default:
			path = "/var/lib/specsweep/applied/" + host.Unit + "-adaptive.json"
		}
		pt := planned[chosen.ID]
		fit.Argv = pt.Argv
		pt.Argv = fit.ServerArgs(path)
		pt.Files = append(slices.Clone(pt.Files), sweep.File{Path: path, Content: string(fit.JSON())})
		req.Point, req.Label = pt, fmt.Sprintf("%s tp=%d with its adaptive schedule (%s), starting at %d steps", fit.Method, fit.TP, path, fit.InitialSteps)
		if traffic == nil {
			traffic = report.EqualTraffic(s.Levels)
		}
	default:
		p, ok := byID[o.Config]
		if !ok {
			return req, usagef("--config %s: not recommended, adaptive, nor a point of sweep %s (`specsweep status %d` lists them)", o.Config, s.Name, s.ID)
		}
		chosen, req.Choice = p, "point"
	}
	if req.Point.ID == "" {
		pt, ok := planned[chosen.ID]
		if !ok {
			return req, fmt.Errorf("apply: point %s is not in sweep %s's plan any more", chosen.ID, s.Name)
		}
		req.Point, req.Label = pt, fmt.Sprintf("%s tp=%d", chosen.Label(), chosen.TP)
	}
	if !host.Fits(req.Point.TP) {
		return req, exitError{code: ExitFailure, err: fmt.Errorf("apply: %s needs %d GPUs, host %s has %d", req.Label, req.Point.TP, host.Name, host.GPUs)}
	}
	// The speed check's level: --level, else the mix's level of the largest share (the configuration
	// chosen for the mix is checked where most of the time goes).
	req.Level = o.Level
	if req.Level == 0 {
		if traffic == nil {
			traffic = report.EqualTraffic(s.Levels)
		}
		best := 0.0
		for _, sh := range traffic {
			if sh.Share > best {
				req.Level, best = sh.Concurrency, sh.Share
			}
		}
	}
	if fit != nil {
		// An adaptive server at a level runs that level's slot: it is held to the slot's best
		// configuration there (the baseline where that is 0 steps).
		chosen = fit.PointAt(s, req.Level)
	}
	if chosen != nil && chosen.Cells[req.Level] != nil {
		req.Expected = chosen.Cells[req.Level].TokS
	} else if o.Level != 0 {
		return req, usagef("--level %d: sweep %s did not measure %s at concurrency %d", o.Level, s.Name, req.Label, o.Level)
	}
	return req, nil
}

// byWhom is user@hostname, for the history and the host's record.
func byWhom() string {
	who := "specsweep"
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	if h, err := os.Hostname(); err == nil {
		who += "@" + h
	}
	return who
}

// noApplyWords says why a host cannot take an apply.
func noApplyWords(h sweep.Host) error {
	switch h.Driver {
	case sweep.DriverSlurm:
		return fmt.Errorf("host %s (driver slurm) has no unit to apply to: a cluster runs each server as a job; run the configuration as a job of your own (`specsweep recommend` prints its arguments)", h.Name)
	}
	return fmt.Errorf("host %s (driver %s) cannot apply a configuration", h.Name, h.Driver)
}

// printDryRun prints what apply would do: the drop-in and the steps.
func printDryRun(env Env, host sweep.Host, req orchestrator.ApplyRequest) error {
	if host.Driver == sweep.DriverLocal {
		return printLocalDryRun(env, host, req)
	}
	l := hostctl.Launch{Argv: req.Point.Argv, Env: req.Point.Env, Port: req.Spec.Server.Port, StopTimeout: req.Spec.Server.StopTimeout}
	dropIn, err := hostctl.RenderAppliedDropIn(host.Name, host.Unit, l, hostctl.AppliedRecord{Sweep: req.Sweep, SweepID: req.SweepID, Point: req.Point.ID, Label: req.Label})
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	w := env.Stdout
	fmt.Fprintf(w, "Would apply %s (point %s of sweep %s, id %d) on host %s, unit %s.\n\n", req.Label, req.Point.ID, req.Sweep, req.SweepID, host.Name, host.Unit)
	fmt.Fprintf(w, "%s:\n%s\n", hostctl.AppliedDropInPath(host.Unit), dropIn)
	if len(req.Point.Env) > 0 {
		names := make([]string, 0, len(req.Point.Env))
		for k := range req.Point.Env {
			names = append(names, k)
		}
		slices.Sort(names)
		fmt.Fprintf(w, "%s (0600): %s\n", hostctl.AppliedEnvFilePath(host.Unit), strings.Join(names, ", "))
	}
	for _, f := range req.Point.Files {
		fmt.Fprintf(w, "%s (0644, %d bytes)\n", f.Path, len(f.Content))
	}
	fmt.Fprintf(w, "\nThen: save what is applied now for a rollback (%s), write the files above, systemctl daemon-reload, restart %s,\n",
		hostctl.ApplyRollbackPath(host.Unit), host.Unit)
	fmt.Fprintf(w, "wait until it is ready, run the output check against the sweep's baseline answers")
	if req.Expected.OK() {
		fmt.Fprintf(w, " and one load level at concurrency %d (at least %.1f output tok/s: the sweep's lowest repeat %.1f less %.0f%%)",
			req.Level, min(req.Expected.Min, req.Expected.Median)*(1-req.Tolerance), req.Expected.Min, 100*req.Tolerance)
	}
	fmt.Fprintf(w, "; on any failure roll back to what ran before.\nNothing was changed (--dry-run).\n")
	return nil
}

// applyWords prints the outcome and maps it to an exit code.
func applyWords(env Env, host sweep.Host, req orchestrator.ApplyRequest, out orchestrator.ApplyOutcome) error {
	w := env.Stdout
	if out.Result == store.ApplyApplied {
		fmt.Fprintf(w, "Applied %s on %s (unit %s", req.Label, host.Name, host.Unit)
		if out.Engine != "" {
			fmt.Fprintf(w, ", SGLang %s", out.Engine)
		}
		fmt.Fprintf(w, "): ready")
		if out.Agreement != nil {
			fmt.Fprintf(w, ", output check agreement %.2f", *out.Agreement)
		}
		if out.TokS > 0 {
			fmt.Fprintf(w, ", %.1f output tok/s at concurrency %d (the sweep measured %.1f)", out.TokS, req.Level, req.Expected.Median)
		}
		fmt.Fprintf(w, ".\nIt stays across reboots and sweeps; `specsweep restore --applied %s` returns the operator's unit (history: apply id %d).\n", host.Name, out.ID)
		return nil
	}
	fmt.Fprintf(w, "NOT applied: the %s check failed: %s\n", out.Failure, out.Detail)
	for _, l := range out.Evidence {
		fmt.Fprintf(w, "  | %s\n", l)
	}
	code := map[orchestrator.ApplyFailure]int{orchestrator.ApplyStartFailed: ExitApplyStart, orchestrator.ApplyHostFailed: ExitApplyStart,
		orchestrator.ApplyOutputFailed: ExitApplyOutput, orchestrator.ApplySpeedFailed: ExitApplySpeed}[out.Failure]
	if out.Result == store.ApplyRollbackFailed {
		fmt.Fprintf(w, "The rollback failed too: host %s may run neither configuration; `specsweep restore --applied %s` returns the operator's unit.\n", host.Name, host.Name)
		code = ExitRollback
	} else {
		fmt.Fprintf(w, "Rolled back: %s runs what it ran before (history: apply id %d).\n", host.Name, out.ID)
	}
	return exitError{code: code, err: errors.New("apply: " + string(out.Failure) + " check failed")}
}

// printLocalDryRun is --dry-run on a local host: the detached server's command line, its
// environment's names, its files and the steps.
func printLocalDryRun(env Env, host sweep.Host, req orchestrator.ApplyRequest) error {
	w := env.Stdout
	fmt.Fprintf(w, "Would apply %s (point %s of sweep %s, id %d) on local host %s, as a server detached from specsweep:\n  %s\n",
		req.Label, req.Point.ID, req.Sweep, req.SweepID, host.Name, strings.Join(quoteAll(req.Point.Argv), " "))
	if len(req.Point.Env) > 0 {
		names := make([]string, 0, len(req.Point.Env))
		for k := range req.Point.Env {
			names = append(names, k)
		}
		slices.Sort(names)
		fmt.Fprintf(w, "environment: %s\n", strings.Join(names, ", "))
	}
	for _, f := range req.Point.Files {
		fmt.Fprintf(w, "%s (0644, %d bytes)\n", f.Path, len(f.Content))
	}
	fmt.Fprintf(w, "Then: save what is applied now for a rollback (the host's state directory, docs/hostctl.md), stop it, start this one in a session of its own,\n"+
		"wait until it is ready and run the checks; on any failure roll back to what ran before.\nNothing was changed (--dry-run).\n")
	return nil
}

func quoteAll(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = hostctl.ShellQuote(a)
	}
	return out
}
