package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

func restoreCmd() command {
	return newCommand("restore", "SPEC",
		"Put every host of a spec back as the operator left it (drop-in, launch script, environment file and marker removed, the unit running again if it ran).", restoreRun).
		withExamples("specsweep restore sweep.yaml            # after a specsweep that died and will not be resumed")
}

type restoreOptions struct {
	DB                string // --db: checked for a running sweep of the spec
	AcceptNewHostKeys bool   // --accept-new-host-keys
	Applied           string // --applied HOST: undo `specsweep apply` there
	Spec              string // SPEC (optional with --applied)
}

func (o *restoreOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", "database `PATH` checked for a running sweep of the spec (default $SPECSWEEP_DB or ./specsweep.db)")
	fs.BoolVar(&o.AcceptNewHostKeys, "accept-new-host-keys", false, "add unknown host keys to known_hosts (a changed key is always refused)")
	fs.StringVar(&o.Applied, "applied", "", "undo `specsweep apply` on `HOST`: the operator's unit back, byte-identical, running as before the first apply (the host is found in the apply history, or in SPEC)")
}

func (o *restoreOptions) args(pos []string) (err error) {
	if o.Applied != "" && len(pos) == 0 {
		return nil
	}
	o.Spec, err = oneArg(pos, "SPEC")
	return err
}

// restoreRun restores every host of the spec and prints one line per host.
func restoreRun(ctx context.Context, env Env, o *restoreOptions) error {
	if o.Applied != "" {
		return restoreApplied(ctx, env, o)
	}
	spec, err := loadSpec(o.Spec)
	if err != nil {
		return err
	}
	unlock, err := restoreGuard(ctx, dbPath(env, o.DB), spec.Name)
	if err != nil {
		return err
	}
	defer unlock()
	hosts, err := newHosts(ctx, spec, hostOptions{acceptNewHostKeys: o.AcceptNewHostKeys, specDir: specDir(o.Spec)})
	if err != nil {
		return err
	}
	type outcome struct{ status, detail string }
	res := make([]outcome, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() {
			defer h.Close()
			status, detail, err := restoreHost(ctx, h)
			if err != nil {
				status, detail = "FAILED", err.Error()
			}
			res[i] = outcome{status, detail}
		})
	}
	wg.Wait()
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tSTATUS\tDETAIL")
	failed := 0
	for i, h := range hosts {
		if res[i].status == "FAILED" {
			failed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", h.Name(), res[i].status, res[i].detail)
	}
	tw.Flush()
	if failed > 0 {
		return exitError{code: ExitFailure, err: fmt.Errorf("restore: %d of %d host(s) not restored", failed, len(hosts))}
	}
	return nil
}

// restoreGuard refuses to restore the hosts of a sweep that a process is running now (its points
// would lose their server): the sweep's lock, and its state in the database when there is one.
func restoreGuard(ctx context.Context, dbFile, name string) (func(), error) {
	if _, err := os.Stat(dbFile); err != nil {
		return func() {}, nil
	}
	unlock, err := lockSweep(dbFile, name)
	if err != nil {
		return nil, fmt.Errorf("%w: stop it first (Ctrl-C restores its hosts itself)", err)
	}
	if err := runningSweepOf(ctx, dbFile, name); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// runningSweepOf refuses when the database has the sweep name running, or an instance of the
// schedule of that name (known by its schedule id), in a live process: a running sweep whose process
// died (orchestrator.Liveness) is what restore is for.
func runningSweepOf(ctx context.Context, dbFile, name string) error {
	st, err := store.OpenReadOnly(ctx, dbFile)
	if err != nil {
		return err
	}
	defer st.Close()
	all, err := st.ListSweeps(ctx)
	if err != nil {
		return err
	}
	named := map[int64]bool{}
	for _, sw := range all {
		if sw.Name == name {
			named[sw.ID] = true
		}
	}
	live := orchestrator.LocalLiveness(time.Now())
	for _, sw := range all {
		if sw.State != store.SweepRunning || !(named[sw.ID] || named[sw.ScheduleID]) {
			continue
		}
		if orphan, _ := live.Orphaned(sw); orphan {
			continue // its process died: nothing runs on its hosts any more
		}
		return fmt.Errorf("sweep %s (id %d) is running in %s (%s): `specsweep cancel %d` first (the process running it restores its hosts)",
			sw.Name, sw.ID, dbFile, holderText(sw.Holder, true), sw.ID)
	}
	return nil
}

// restoreHost restores one host and words what its driver found and did.
func restoreHost(ctx context.Context, h hostctl.Driver) (status, detail string, err error) {
	c, err := h.Clean(ctx)
	switch {
	case err != nil:
		return "", "", err
	case c.Ephemeral:
		return "ok", "local driver: servers end with the specsweep process that started them; nothing stays behind", nil
	case c.Jobs && len(c.Removed) == 0:
		return "ok", "no job of the sweep in the queue", nil
	case c.Jobs:
		return "restored", "cancelled " + strings.Join(c.Removed, ", "), nil
	}
	unit := c.Unit
	if unit == "" {
		unit = "the unit"
	}
	if len(c.Removed) == 0 {
		return "ok", fmt.Sprintf("nothing of specsweep there; %s is %s", unit, c.UnitState), nil
	}
	return "restored", fmt.Sprintf("removed %s; %s is %s", strings.Join(c.Removed, ", "), unit, c.UnitState), nil
}

// restoreApplied undoes `specsweep apply` on a host: found in SPEC, else through the sweep of its
// latest apply in the history; the unapply is recorded there.
func restoreApplied(ctx context.Context, env Env, o *restoreOptions) error {
	st, err := store.Open(ctx, dbPath(env, o.DB))
	if err != nil {
		return err
	}
	defer st.Close()
	var spec *sweep.Spec
	if o.Spec != "" {
		if spec, err = loadSpec(o.Spec); err != nil {
			return err
		}
	} else {
		hist, err := st.Applies(ctx, o.Applied, 50)
		if err != nil {
			return err
		}
		var from int64
		for _, a := range hist {
			if a.Action == store.ApplyActionApply && a.SweepID != 0 {
				from = a.SweepID
				break
			}
		}
		if from == 0 {
			return exitError{code: ExitFailure, err: fmt.Errorf("restore --applied: no apply on host %s is recorded in %s: name the spec that has the host (`specsweep restore --applied %s SPEC`)",
				o.Applied, dbPath(env, o.DB), o.Applied)}
		}
		sw, err := st.Sweep(ctx, from)
		if err != nil {
			return err
		}
		if spec, err = sweep.Parse(sw.Name+".yaml", []byte(sw.SpecText)); err != nil {
			return fmt.Errorf("restore --applied: sweep %s (id %d), which applied on %s: its stored spec no longer parses: %w", sw.Name, sw.ID, o.Applied, err)
		}
	}
	hi := slices.IndexFunc(spec.Hosts, func(h sweep.Host) bool { return h.Name == o.Applied })
	if hi < 0 {
		return usagef("--applied %s: spec %s has no such host", o.Applied, spec.Name)
	}
	host := spec.Hosts[hi]
	d, err := hostctl.Open(ctx, host, openOptions(spec, hostOptions{acceptNewHostKeys: o.AcceptNewHostKeys, getenv: env.Getenv, specDir: specDir(o.Spec)}))
	if err != nil {
		return err
	}
	defer d.Close()
	ap, ok := d.(hostApplier)
	if !ok {
		return exitError{code: ExitFailure, err: noApplyWords(host)}
	}
	id, err := st.BeginApply(ctx, store.NewApply{Action: store.ApplyActionUnapply, Host: host.Name, Unit: host.Unit, By: byWhom()})
	if err != nil {
		return err
	}
	uerr := ap.Unapply(ctx)
	end := store.ApplyEnd{Result: store.ApplyUnapplied, Detail: "the operator's unit is back"}
	if uerr != nil {
		end = store.ApplyEnd{Result: store.ApplyFailed, Failure: "host", Detail: uerr.Error()}
	}
	if err := st.FinishApply(context.WithoutCancel(ctx), id, end); err != nil {
		return err
	}
	if uerr != nil {
		return exitError{code: ExitFailure, err: fmt.Errorf("restore --applied %s: %w", host.Name, uerr)}
	}
	fmt.Fprintf(env.Stdout, "%s: the operator's %s is back (its unit file untouched; running if it ran before the first apply).\n", host.Name, host.Unit)
	return nil
}
