package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// hostOptions are the command-line choices that shape how hosts are reached.
type hostOptions struct {
	acceptNewHostKeys bool
	logDir            string // local driver: server logs go to LOGDIR/HOST.log when set
	event             func(host, kind, detail string)
	getenv            func(string) string // the environment ~/.ssh/config, keys and the agent are found in
}

// sshOptions is the one mapping of a spec host to its SSH options (run, the daemon and doctor).
func sshOptions(h sweep.Host, acceptNew bool, getenv func(string) string) hostctl.SSHOptions {
	return hostctl.SSHOptions{Address: h.Address, User: h.User, IdentityFile: h.IdentityFile,
		KnownHosts: h.KnownHosts, AcceptNewHostKeys: acceptNew, Getenv: getenv}
}

// sweepHosts is the one host factory of run and the daemon: the spec's hosts, with the connection
// events of each recorded under sweepID.
func sweepHosts(ctx context.Context, st *store.DB, spec *sweep.Spec, sweepID int64, opts hostOptions) []*specHost {
	opts.event = func(host, kind, detail string) {
		_ = st.AddEvent(context.WithoutCancel(ctx), store.Event{SweepID: sweepID, Host: host, Kind: kind, Detail: detail})
	}
	return newHosts(spec, opts)
}

// specHost adapts one spec host to the orchestrator: the SSH connection is made on first use, so an
// unreachable host is host trouble of its points (retried, then host_unreachable), not a refusal to
// run the whole sweep.
type specHost struct {
	h     sweep.Host
	opts  hostOptions
	sweep string // the spec's name: a Slurm cluster names its jobs after it

	mu   sync.Mutex
	impl hostctl.Host
	// slot numbers a packing host's concurrent servers from 1 (0: the host itself); parent is the
	// host a slot belongs to (its SSH connection is the slots' too).
	slot   int
	parent *specHost
}

// Slot is the k-th concurrent server of a packing host (docs/spec.md, hosts[].pack): a handle of
// its own, with a child process of its own on a local host and a unit of its own on an SSH host.
func (s *specHost) Slot(k int) orchestrator.Host {
	return &specHost{h: s.h, opts: s.opts, sweep: s.sweep, slot: k + 1, parent: s}
}

// Parallel is how many points a host runs at once that places them itself: a Slurm cluster's
// max_jobs (docs/slurm.md); 0 for the others.
func (s *specHost) Parallel() int {
	if s.h.Driver != sweep.DriverSlurm || s.h.Slurm == nil || s.parent != nil {
		return 0
	}
	return s.h.Slurm.MaxJobs
}

func newHosts(spec *sweep.Spec, opts hostOptions) []*specHost {
	out := make([]*specHost, 0, len(spec.Hosts))
	for _, h := range spec.Hosts {
		out = append(out, &specHost{h: h, opts: opts, sweep: spec.Name})
	}
	return out
}

func (s *specHost) Name() string { return s.h.Name }

func (s *specHost) get(ctx context.Context) (hostctl.Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.impl != nil {
		return s.impl, nil
	}
	if s.h.Driver == sweep.DriverLocal {
		o := hostctl.LocalOptions{Name: s.h.Name}
		if s.opts.logDir != "" {
			name := s.h.Name
			if s.slot > 0 {
				name += fmt.Sprintf("-slot%d", s.slot-1)
			}
			o.LogFile = filepath.Join(s.opts.logDir, name+".log")
		}
		s.impl = hostctl.NewLocal(o)
		return s.impl, nil
	}
	if s.parent != nil {
		// The host's connection, and a unit of the slot's own on it.
		s.mu.Unlock()
		p, err := s.parent.get(ctx)
		s.mu.Lock()
		if err != nil {
			return nil, err
		}
		if s.impl == nil {
			switch r := p.(type) {
			case *hostctl.Remote:
				s.impl = r.Slot(s.slot - 1)
			case *hostctl.Slurm:
				s.impl = r.Slot(s.slot - 1)
			default:
				return nil, fmt.Errorf("host %s: driver %s runs one point at a time", s.h.Name, s.h.Driver)
			}
		}
		return s.impl, nil
	}
	if s.h.Driver == sweep.DriverSlurm {
		c, err := hostctl.DialSlurm(ctx, hostctl.SlurmOptions{Name: s.h.Name, Sweep: s.sweep, Local: s.h.Address == "",
			SSH:       sshOptions(s.h, s.opts.acceptNewHostKeys, s.opts.getenv),
			Partition: s.h.Slurm.Partition, Account: s.h.Slurm.Account, TimeLimit: s.h.Slurm.TimeLimit,
			SbatchArgs: s.h.Slurm.SbatchArgs, OutputDir: s.h.Slurm.OutputDir,
			Event: func(kind, detail string) {
				if s.opts.event != nil {
					s.opts.event(s.h.Name, kind, detail)
				}
			}})
		if err != nil {
			return nil, err
		}
		s.impl = c
		return c, nil
	}
	r, err := hostctl.DialRemote(ctx, hostctl.RemoteOptions{
		Name: s.h.Name, Unit: s.h.Unit, CreateUnit: s.h.CreateUnit,
		SSH: sshOptions(s.h, s.opts.acceptNewHostKeys, s.opts.getenv),
		Event: func(kind, detail string) {
			if s.opts.event != nil {
				s.opts.event(s.h.Name, kind, detail)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	s.impl = r
	return r, nil
}

func (s *specHost) Start(ctx context.Context, l hostctl.Launch) (hostctl.Instance, error) {
	impl, err := s.get(ctx)
	if err != nil {
		return nil, err
	}
	return impl.Start(ctx, l)
}

func (s *specHost) Restore(ctx context.Context) error {
	s.mu.Lock()
	impl := s.impl
	s.mu.Unlock()
	if impl == nil {
		// Never reached in this run. A unit left changed by an earlier crash is still restored:
		// connect now and let the driver's marker say what to undo (for a slot, the host's Restore
		// does: it restores every slot with a marker).
		if s.h.Driver == sweep.DriverLocal || s.parent != nil {
			return nil
		}
		var err error
		if impl, err = s.get(ctx); err != nil {
			return fmt.Errorf("restore %s: %w", s.h.Name, err)
		}
	}
	return impl.Restore(ctx)
}

func (s *specHost) Provenance(ctx context.Context) (hostctl.Provenance, error) {
	impl, err := s.get(ctx)
	if err != nil {
		return hostctl.Provenance{}, err
	}
	return impl.Provenance(ctx)
}

func (s *specHost) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.impl == nil {
		return nil
	}
	return s.impl.Close()
}
