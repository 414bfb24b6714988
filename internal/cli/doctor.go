package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"text/tabwriter"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/sweep"
)

func doctorCmd() command {
	return command{
		name:    "doctor",
		args:    "SPEC",
		summary: "Check every host of a spec: SSH, host key, login, root/sudo, systemctl, the unit, the port, GPUs, disk.",
		setup: func(fs *flag.FlagSet) func(context.Context, Env, []string) error {
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
				results := make([][]hostctl.Check, len(spec.Hosts))
				var wg sync.WaitGroup
				for i, h := range spec.Hosts {
					wg.Go(func() { results[i] = hostctl.Doctor(ctx, doctorTarget(env, spec, h, *acceptNew)) })
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
		},
	}
}

func doctorTarget(env Env, spec *sweep.Spec, h sweep.Host, acceptNew bool) hostctl.DoctorTarget {
	t := hostctl.DoctorTarget{Name: h.Name, Driver: h.Driver, Unit: h.Unit, Port: spec.Server.Port,
		SSH: sshOptions(h, acceptNew, env.Getenv)}
	if len(spec.Server.Command) > 0 {
		t.Command = spec.Server.Command[0]
	}
	if h.Slurm != nil {
		t.GPUs = h.GPUs
		t.Slurm = &hostctl.SlurmOptions{Sweep: spec.Name, Partition: h.Slurm.Partition, OutputDir: h.Slurm.OutputDir, Local: h.Address == ""}
	}
	return t
}
