package cli

import (
	"context"
	"fmt"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// hostOptions are the command-line choices that shape how hosts are reached.
type hostOptions struct {
	acceptNewHostKeys bool
	logDir            string // local driver: server logs go to LOGDIR/HOST.log when set
	event             func(host, kind, detail string)
	getenv            func(string) string // the environment ~/.ssh/config, keys and the agent are found in
	specDir           string              // the spec file's folder ("" for a spec the daemon got as text)
}

// openOptions maps the command line and the spec to what hostctl.Open takes.
func openOptions(spec *sweep.Spec, opts hostOptions) hostctl.Options {
	o := hostctl.Options{Sweep: spec.Name, Port: spec.Server.Port, AcceptNewHostKeys: opts.acceptNewHostKeys,
		LogDir: opts.logDir, Getenv: opts.getenv, Event: opts.event, SpecDir: opts.specDir, Fit: fitOf(spec)}
	if len(spec.Server.Command) > 0 {
		o.Command = spec.Server.Command[0]
	}
	return o
}

// sweepHosts is the one host factory of run and the daemon: the spec's hosts, with the connection
// events of each recorded under sweepID.
func sweepHosts(ctx context.Context, st *store.DB, spec *sweep.Spec, sweepID int64, opts hostOptions) []hostctl.Driver {
	opts.event = func(host, kind, detail string) {
		_ = st.AddEvent(context.WithoutCancel(ctx), store.Event{SweepID: sweepID, Host: host, Kind: kind, Detail: detail})
	}
	hosts, err := newHosts(ctx, spec, opts)
	if err != nil {
		// Not reached for a spec that validated (sweep.Parse checks every driver): the host that
		// cannot be opened says why at its first use.
		for _, h := range spec.Hosts[len(hosts):] {
			hosts = append(hosts, unopened{name: h.Name, err: err})
		}
	}
	return hosts
}

// newHosts opens every host of the spec (hostctl.Open connects to nothing yet).
func newHosts(ctx context.Context, spec *sweep.Spec, opts hostOptions) ([]hostctl.Driver, error) {
	o := openOptions(spec, opts)
	out := make([]hostctl.Driver, 0, len(spec.Hosts))
	for _, h := range spec.Hosts {
		d, err := hostctl.Open(ctx, h, o)
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

// unopened is a host hostctl.Open refused: every use returns why.
type unopened struct {
	name string
	err  error
}

func (u unopened) Name() string { return u.name }
func (u unopened) Start(context.Context, hostctl.Launch) (hostctl.Instance, error) {
	return nil, u.err
}
func (u unopened) Restore(context.Context) error { return u.err }
func (u unopened) Provenance(context.Context) (hostctl.Provenance, error) {
	return hostctl.Provenance{}, u.err
}
func (u unopened) Close() error          { return nil }
func (u unopened) Slots() hostctl.Slots  { return hostctl.Slots{N: 1} }
func (u unopened) Slot(int) hostctl.Host { return u }
func (u unopened) Doctor(context.Context) []hostctl.Check {
	return []hostctl.Check{{Host: u.name, Name: "driver", Status: hostctl.CheckFail, Detail: u.err.Error()}}
}
func (u unopened) Clean(context.Context) (hostctl.Cleanup, error) {
	return hostctl.Cleanup{}, fmt.Errorf("host %s: %w", u.name, u.err)
}
