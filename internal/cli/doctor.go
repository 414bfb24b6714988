package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
)

func doctorCmd() command {
	return newCommand("doctor", "SPEC",
		"Check every host of a spec: SSH, host key, login, root/sudo, systemctl, the D-Bus API, the unit, the port, GPUs, disk.", doctorRun).
		withExamples("specsweep doctor sweep.yaml",
			"specsweep doctor --accept-new-host-keys sweep.yaml     # first contact with new hosts")
}

type doctorOptions struct {
	DB                string // --db: checked for a sweep of the spec that runs now
	AcceptNewHostKeys bool   // --accept-new-host-keys
	Spec              string // SPEC
}

func (o *doctorOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", "database `PATH` checked for a sweep of the spec that runs now, whose servers the checks would see (default $SPECSWEEP_DB or ./specsweep.db)")
	fs.BoolVar(&o.AcceptNewHostKeys, "accept-new-host-keys", false, "add unknown host keys to known_hosts (a changed key is always refused)")
}

func (o *doctorOptions) args(pos []string) (err error) {
	o.Spec, err = oneArg(pos, "SPEC")
	return err
}

// runningNote is a note for doctor when the database (if there is one) has a sweep of the spec's
// name running in a live process: its servers hold the hosts, and the port and unit checks see them.
func runningNote(ctx context.Context, dbFile, name string) string {
	if _, err := os.Stat(dbFile); err != nil {
		return ""
	}
	st, err := store.OpenReadOnly(ctx, dbFile)
	if err != nil {
		return ""
	}
	defer st.Close()
	sw, err := st.LatestSweepByName(ctx, name)
	if err != nil || !orchestrator.HeldElsewhere(sw, orchestrator.LocalLiveness(time.Now())) {
		return ""
	}
	return fmt.Sprintf("note: sweep %s (id %d) is running in %s (%s): its servers hold these hosts now, so the port and unit checks see them",
		sw.Name, sw.ID, dbFile, holderText(sw.Holder, false))
}

// doctorRun checks every host of the spec and prints one line per check.
func doctorRun(ctx context.Context, env Env, o *doctorOptions) error {
	spec, err := loadSpec(o.Spec)
	if err != nil {
		return err
	}
	if note := runningNote(ctx, dbPath(env, o.DB), spec.Name); note != "" {
		fmt.Fprintln(env.Stderr, note)
	}
	hosts, err := newHosts(ctx, spec, hostOptions{acceptNewHostKeys: o.AcceptNewHostKeys, getenv: env.Getenv, specDir: specDir(o.Spec)})
	if err != nil {
		return err
	}
	results := make([][]hostctl.Check, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() { results[i] = append(h.Doctor(ctx), appliedCheck(ctx, h)...) })
	}
	wg.Wait()
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	failed := 0
	for _, checks := range results {
		for _, c := range checks {
			if c.Status == hostctl.CheckFail {
				failed++
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Host, c.Status, c.Name, c.Detail)
		}
	}
	tw.Flush()
	if failed > 0 {
		return exitError{code: ExitFailure, err: fmt.Errorf("doctor: %d check(s) failed", failed)}
	}
	if len(spec.Hosts) == 0 {
		return errors.New("no hosts")
	}
	return nil
}

// appliedCheck says what `specsweep apply` made the host's server (its own record on the host), as
// an info line; none for a host that cannot apply.
func appliedCheck(ctx context.Context, h hostctl.Driver) []hostctl.Check {
	ap, ok := h.(hostApplier)
	if !ok {
		return nil
	}
	c := hostctl.Check{Host: h.Name(), Name: "applied", Status: hostctl.CheckOK}
	rec, err := ap.Applied(ctx)
	switch {
	case errors.Is(err, hostctl.ErrAppliedNotRunning):
		c.Status, c.Detail = hostctl.CheckWarn, err.Error()
	case err != nil:
		c.Status, c.Detail = hostctl.CheckWarn, "cannot read what is applied: "+err.Error()
	case rec == nil:
		c.Detail = "nothing applied: the operator's configuration"
	default:
		c.Detail = fmt.Sprintf("applied: %s (point %s of sweep %s, id %d; %s) since %s by %s; `specsweep restore --applied %s` returns the operator's unit",
			rec.Label, rec.Point, rec.Sweep, rec.SweepID, rec.Choice, rec.AppliedAt.Format(time.RFC3339), rec.By, h.Name())
	}
	return []hostctl.Check{c}
}
