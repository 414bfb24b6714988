package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"text/tabwriter"

	"github.com/specsweep/specsweep/hostctl"
)

func doctorCmd() command {
	return newCommand("doctor", "SPEC",
		"Check every host of a spec: SSH, host key, login, root/sudo, systemctl, the unit, the port, GPUs, disk.", doctorRun)
}

type doctorOptions struct {
	AcceptNewHostKeys bool   // --accept-new-host-keys
	Spec              string // SPEC
}

func (o *doctorOptions) flags(fs *flag.FlagSet) {
	fs.BoolVar(&o.AcceptNewHostKeys, "accept-new-host-keys", false, "add unknown host keys to known_hosts (a changed key is always refused)")
}

func (o *doctorOptions) args(pos []string) (err error) {
	o.Spec, err = oneArg(pos, "SPEC")
	return err
}

// doctorRun checks every host of the spec and prints one line per check.
func doctorRun(ctx context.Context, env Env, o *doctorOptions) error {
	spec, err := loadSpec(o.Spec)
	if err != nil {
		return err
	}
	hosts, err := newHosts(ctx, spec, hostOptions{acceptNewHostKeys: o.AcceptNewHostKeys, getenv: env.Getenv})
	if err != nil {
		return err
	}
	results := make([][]hostctl.Check, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() { results[i] = h.Doctor(ctx) })
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
