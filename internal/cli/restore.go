package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// leftoverHost is a host that can say what specsweep left on it (the ssh driver).
type leftoverHost interface {
	Leftovers(ctx context.Context) ([]string, error)
	UnitState(ctx context.Context) (hostctl.State, error)
}

func restoreCmd() command {
	return command{
		name:    "restore",
		args:    "SPEC",
		summary: "Put every host of a spec back as the operator left it (drop-in, environment file and marker removed, the unit running again if it ran).",
		setup: func(fs *flag.FlagSet) func(context.Context, Env, []string) error {
			db := fs.String("db", "", "database file checked for a running sweep of the spec (default $SPECSWEEP_DB or ./specsweep.db)")
			acceptNew := fs.Bool("accept-new-host-keys", false, "add unknown host keys to known_hosts (a changed key is always refused)")
			return func(ctx context.Context, env Env, pos []string) error {
				path, err := oneArg(pos, "SPEC")
				if err != nil {
					return err
				}
				spec, err := loadSpec(path)
				if err != nil {
					return err
				}
				unlock, err := restoreGuard(ctx, dbPath(env, *db), spec.Name)
				if err != nil {
					return err
				}
				defer unlock()
				hosts := newHosts(spec, hostOptions{acceptNewHostKeys: *acceptNew})
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
		},
	}
}

// restoreGuard refuses to restore the hosts of a sweep that a process is running now (its points
// would lose their server): the sweep's lock, and its state in the database when there is one.
func restoreGuard(ctx context.Context, dbFile, name string) (func(), error) {
	if _, err := os.Stat(dbFile); err != nil {
		return func() {}, nil
	}
	unlock, err := lockSweep(dbFile, name)
	if err != nil {
		return nil, fmt.Errorf("restore: %w: stop it first (Ctrl-C restores its hosts itself)", err)
	}
	if err := runningSweepOf(ctx, dbFile, name); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// runningSweepOf refuses when the database has the sweep name running, or an instance of the
// schedule of that name (known by its schedule id).
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
	for _, sw := range all {
		if sw.State == store.SweepRunning && (named[sw.ID] || named[sw.ScheduleID]) {
			return fmt.Errorf("restore: sweep %s (id %d) is running in %s: `specsweep cancel %d` first (the process running it restores its hosts)",
				sw.Name, sw.ID, dbFile, sw.ID)
		}
	}
	return nil
}

// restoreCluster cancels the jobs of the spec's sweep still in a Slurm cluster's queue.
func restoreCluster(ctx context.Context, c *hostctl.Slurm) (status, detail string, err error) {
	before, err := c.Leftovers(ctx)
	if err != nil {
		return "", "", err
	}
	if err := c.Restore(ctx); err != nil {
		return "", "", err
	}
	if after, err := c.Leftovers(ctx); err != nil {
		return "", "", err
	} else if len(after) > 0 {
		return "", "", fmt.Errorf("still in the queue after scancel: %s", strings.Join(after, ", "))
	}
	if len(before) == 0 {
		return "ok", "no job of the sweep in the queue", nil
	}
	return "restored", "cancelled " + strings.Join(before, ", "), nil
}

// restoreHost restores one host and says what it found and did.
func restoreHost(ctx context.Context, h *specHost) (status, detail string, err error) {
	if h.h.Driver == sweep.DriverLocal {
		return "ok", "local driver: servers end with the specsweep process that started them; nothing stays behind", nil
	}
	impl, err := h.get(ctx)
	if err != nil {
		return "", "", err
	}
	if c, ok := impl.(*hostctl.Slurm); ok {
		return restoreCluster(ctx, c)
	}
	lh, ok := impl.(leftoverHost)
	if !ok {
		return "", "", errors.New("this driver cannot list what it left")
	}
	before, err := lh.Leftovers(ctx)
	if err != nil {
		return "", "", err
	}
	if err := impl.Restore(ctx); err != nil {
		return "", "", err
	}
	after, err := lh.Leftovers(ctx)
	if err != nil {
		return "", "", err
	}
	if len(after) > 0 {
		return "", "", fmt.Errorf("still there after the restore: %s", strings.Join(after, ", "))
	}
	st, err := lh.UnitState(ctx)
	if err != nil {
		return "", "", err
	}
	unit := h.h.Unit
	if unit == "" {
		unit = "the unit"
	}
	if len(before) == 0 {
		return "ok", fmt.Sprintf("nothing of specsweep there; %s is %s", unit, st.ActiveState), nil
	}
	return "restored", fmt.Sprintf("removed %s; %s is %s", strings.Join(before, ", "), unit, st.ActiveState), nil
}
