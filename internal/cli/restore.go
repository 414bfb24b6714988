package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
)

func restoreCmd() command {
	return newCommand("restore", "SPEC",
		"Put every host of a spec back as the operator left it (drop-in, environment file and marker removed, the unit running again if it ran).", restoreRun).
		withExamples("specsweep restore sweep.yaml            # after a specsweep that died and will not be resumed")
}

type restoreOptions struct {
	DB                string // --db: checked for a running sweep of the spec
	AcceptNewHostKeys bool   // --accept-new-host-keys
	Spec              string // SPEC
}

func (o *restoreOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", "database `PATH` checked for a running sweep of the spec (default $SPECSWEEP_DB or ./specsweep.db)")
	fs.BoolVar(&o.AcceptNewHostKeys, "accept-new-host-keys", false, "add unknown host keys to known_hosts (a changed key is always refused)")
}

func (o *restoreOptions) args(pos []string) (err error) {
	o.Spec, err = oneArg(pos, "SPEC")
	return err
}

// restoreRun restores every host of the spec and prints one line per host.
func restoreRun(ctx context.Context, env Env, o *restoreOptions) error {
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
