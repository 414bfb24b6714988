package hostctl

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/specsweep/specsweep/sweep"
)

// Driver is one spec host behind its driver, as Open makes it. What a driver can do is said by
// its methods, so its users (the orchestrator, doctor, restore) need no driver name and no type
// assertion. Adding a driver is a new type in hostctl and a case in Open.
type Driver interface {
	Host
	// Slots says how many points the host runs at once and who places them.
	Slots() Slots
	// Slot is the handle of the k-th point in flight, 0 <= k < Slots().N: a server of its own
	// (a child process, a unit, a job) over the host's connection.
	Slot(k int) Host
	// Doctor checks the host as `specsweep doctor` does, within DoctorTimeout when unreachable.
	Doctor(ctx context.Context) []Check
	// Clean lists what specsweep left on the host, restores it and checks that nothing is left
	// (`specsweep restore`).
	Clean(ctx context.Context) (Cleanup, error)
}

// Slots is how a driver runs points at once.
type Slots struct {
	// N is how many points run at once (1: one at a time).
	N int
	// GPUs: each point is given its own GPUs of the host's N (packing, docs/spec.md hosts[].pack:
	// the runner shares them out by CUDA_VISIBLE_DEVICES); false: the driver places its points
	// itself (a Slurm cluster), or runs one at a time.
	GPUs bool
}

// Cleanup is what a Clean found and did, for the CLI to word.
type Cleanup struct {
	// Removed is what specsweep had left there and is gone now (files of a unit, queued jobs).
	Removed []string
	// Ephemeral: the driver leaves nothing behind (its servers end with the specsweep process).
	Ephemeral bool
	// Jobs: Removed are a cluster's queued jobs.
	Jobs bool
	// Unit and UnitState: the operator's unit and its state after the restore (ssh).
	Unit, UnitState string
}

// Options are the choices Open takes besides the spec's host.
type Options struct {
	// Sweep is the spec's name (a Slurm cluster names its jobs after it).
	Sweep string
	// Port and Command are the spec's server port and command (doctor checks them).
	Port    int
	Command string
	// Fit is the model and tps doctor weighs against each host's GPUs.
	Fit Fit
	// SpecDir is the spec file's folder: the local driver resolves a relative command with a slash
	// against it ("": the working directory, as for a spec the daemon was given as text).
	SpecDir string
	// AcceptNewHostKeys adds unknown SSH host keys to known_hosts.
	AcceptNewHostKeys bool
	// LogDir: the local driver writes each server's log to LOGDIR/HOST.log when set.
	LogDir string
	// StateDir is where the local driver keeps a host's applied configuration (`specsweep apply`):
	// STATEDIR/HOST/ holds its record, rollback record and the applied server's log. "":
	// $XDG_STATE_HOME/specsweep, else ~/.local/state/specsweep (read through Getenv).
	StateDir string
	// Getenv is the environment ~/.ssh/config, keys and the agent are found in.
	Getenv func(string) string
	// Event, if set, receives the host's notable events (reconnects, pending jobs).
	Event func(host, kind, detail string)
	// Clock is the time source of every driver Open makes and of what they make (instances, SSH
	// connections, Slurm polls, GPU waits); nil: the real clock. Tests inject a fake one.
	Clock Clock

	// ssh, when set, replaces the SSH options made from the spec's host (tests: no ~/.ssh/config,
	// no agent).
	ssh *SSHOptions
	// nodeSSH, when set, replaces a group's nodes' SSH options, one per node in order (tests).
	nodeSSH []SSHOptions
}

// SSHOptionsOf is the one mapping of a spec host to its SSH options.
func SSHOptionsOf(h sweep.Host, o Options) SSHOptions {
	if o.ssh != nil {
		return *o.ssh
	}
	return SSHOptions{Address: h.Address, User: h.User, IdentityFile: h.IdentityFile,
		KnownHosts: h.KnownHosts, AcceptNewHostKeys: o.AcceptNewHostKeys, Getenv: o.Getenv, Clock: o.Clock}
}

// Open is the one place that turns a spec's host into a driver. It connects to nothing: the
// connection is made on first use, so an unreachable host is trouble of its points (retried),
// not a refusal of the whole sweep.
func Open(ctx context.Context, h sweep.Host, o Options) (Driver, error) {
	switch h.Driver {
	case sweep.DriverLocal:
		return &openLocal{h: h, o: o, Local: newSpecLocal(h, o, -1)}, nil
	case sweep.DriverSSH:
		if len(h.Nodes) > 0 {
			return newGroup(h, o), nil
		}
		d := &openSSH{h: h, o: o}
		d.conn.dial = d.dial
		return d, nil
	case sweep.DriverSlurm:
		if h.Slurm == nil {
			return nil, fmt.Errorf("host %s: driver slurm without its slurm block", h.Name)
		}
		d := &openSlurm{h: h, o: o}
		d.conn.dial = d.dial
		return d, nil
	}
	return nil, fmt.Errorf("host %s: unknown driver %q", h.Name, h.Driver)
}

var (
	_ Driver = (*openLocal)(nil)
	_ Driver = (*openSSH)(nil)
	_ Driver = (*openSlurm)(nil)
)

func (o Options) event(host string) func(kind, detail string) {
	return func(kind, detail string) {
		if o.Event != nil {
			o.Event(host, kind, detail)
		}
	}
}

// lazy is a connection made on first use and kept.
type lazy[T Host] struct {
	dial func(ctx context.Context) (T, error)
	mu   sync.Mutex
	impl T
	ok   bool
}

func (l *lazy[T]) get(ctx context.Context) (T, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ok {
		return l.impl, nil
	}
	impl, err := l.dial(ctx)
	if err != nil {
		return impl, err
	}
	l.impl, l.ok = impl, true
	return impl, nil
}

func (l *lazy[T]) current() (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.impl, l.ok
}

func (l *lazy[T]) close() error {
	if impl, ok := l.current(); ok {
		return impl.Close()
	}
	return nil
}

// lazySlot is a slot of a connected driver: its handle is taken from the host's connection once
// that is made.
type lazySlot struct {
	name string
	get  func(ctx context.Context) (Host, error)
	mu   sync.Mutex
	impl Host
}

func (s *lazySlot) handle(ctx context.Context) (Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.impl != nil {
		return s.impl, nil
	}
	impl, err := s.get(ctx)
	if err != nil {
		return nil, err
	}
	s.impl = impl
	return impl, nil
}

func (s *lazySlot) Name() string { return s.name }

func (s *lazySlot) Start(ctx context.Context, l Launch) (Instance, error) {
	impl, err := s.handle(ctx)
	if err != nil {
		return nil, err
	}
	return impl.Start(ctx, l)
}

// Restore restores the slot when it was used in this run; a slot left by an earlier crash is the
// host's Restore's (it restores every slot with a marker).
func (s *lazySlot) Restore(ctx context.Context) error {
	s.mu.Lock()
	impl := s.impl
	s.mu.Unlock()
	if impl == nil {
		return nil
	}
	return impl.Restore(ctx)
}

func (s *lazySlot) Provenance(ctx context.Context) (Provenance, error) {
	impl, err := s.handle(ctx)
	if err != nil {
		return Provenance{}, err
	}
	return impl.Provenance(ctx)
}

func (s *lazySlot) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.impl == nil {
		return nil
	}
	return s.impl.Close()
}

// packSlots is the Slots of a host that packs (hosts[].pack): one slot per GPU.
func packSlots(h sweep.Host) Slots {
	if h.Pack {
		return Slots{N: h.GPUs, GPUs: true}
	}
	return Slots{N: 1}
}

// openLocal is driver "local": a child process here per slot; an applied server (localapply.go) a
// detached process.
type openLocal struct {
	h sweep.Host
	o Options
	*Local
	applyMu sync.Mutex // one change of the applied configuration at a time (in this process)
}

// newSpecLocal is the local server of slot k (-1: the host itself).
func newSpecLocal(h sweep.Host, o Options, k int) *Local {
	lo := LocalOptions{Name: h.Name, Clock: o.Clock, Dir: o.SpecDir}
	if o.LogDir != "" {
		name := h.Name
		if k >= 0 {
			name += fmt.Sprintf("-slot%d", k)
		}
		lo.LogFile = filepath.Join(o.LogDir, name+".log")
	}
	return NewLocal(lo)
}

func (d *openLocal) Slots() Slots { return packSlots(d.h) }

func (d *openLocal) Slot(k int) Host { return &localSlot{Local: newSpecLocal(d.h, d.o, k), d: d} }

func (d *openLocal) Doctor(ctx context.Context) []Check {
	return doctorLocal(ctx, d.target())
}

func (d *openLocal) target() DoctorTarget {
	t := DoctorTarget{Name: d.h.Name, Port: d.o.Port, Command: d.o.Command, Fit: d.o.Fit, Dir: d.o.SpecDir}
	return t.withDefaults()
}

// Clean: a sweep's servers end with specsweep; an applied server a sweep stopped (its marker left
// by a crash) is started again.
func (d *openLocal) Clean(ctx context.Context) (Cleanup, error) {
	if err := d.resumeApplied(ctx); err != nil {
		return Cleanup{}, err
	}
	return Cleanup{Ephemeral: true}, nil
}

// openSSH is driver "ssh": a systemd unit over SSH, a unit of its own per slot.
type openSSH struct {
	h    sweep.Host
	o    Options
	conn lazy[*Remote]
}

func (d *openSSH) options() RemoteOptions {
	return RemoteOptions{Name: d.h.Name, Unit: d.h.Unit, CreateUnit: d.h.CreateUnit,
		DBus: d.h.DBus != nil && *d.h.DBus, TryDBus: d.h.DBus == nil,
		SSH: SSHOptionsOf(d.h, d.o), Event: d.o.event(d.h.Name), Clock: d.o.Clock}
}

func (d *openSSH) dial(ctx context.Context) (*Remote, error) { return DialRemote(ctx, d.options()) }

func (d *openSSH) Name() string { return d.h.Name }

func (d *openSSH) Start(ctx context.Context, l Launch) (Instance, error) {
	r, err := d.conn.get(ctx)
	if err != nil {
		return nil, err
	}
	return r.Start(ctx, l)
}

// Restore connects when this run never did: a unit left changed by an earlier crash is still
// restored, guided by the driver's marker.
func (d *openSSH) Restore(ctx context.Context) error {
	r, err := d.conn.get(ctx)
	if err != nil {
		return fmt.Errorf("restore %s: %w", d.h.Name, err)
	}
	return r.Restore(ctx)
}

func (d *openSSH) Provenance(ctx context.Context) (Provenance, error) {
	r, err := d.conn.get(ctx)
	if err != nil {
		return Provenance{}, err
	}
	return r.Provenance(ctx)
}

func (d *openSSH) Close() error { return d.conn.close() }

func (d *openSSH) Slots() Slots { return packSlots(d.h) }

func (d *openSSH) Slot(k int) Host {
	return &lazySlot{name: d.h.Name, get: func(ctx context.Context) (Host, error) {
		r, err := d.conn.get(ctx)
		if err != nil {
			return nil, err
		}
		return r.Slot(k), nil
	}}
}

func (d *openSSH) Doctor(ctx context.Context) []Check {
	t := DoctorTarget{Name: d.h.Name, Unit: d.h.Unit, Port: d.o.Port, SSH: SSHOptionsOf(d.h, d.o), Fit: d.o.Fit, DBus: d.h.DBus}
	return doctorSSH(ctx, t.withDefaults(), doctorUnit)
}

func (d *openSSH) Clean(ctx context.Context) (Cleanup, error) {
	r, err := d.conn.get(ctx)
	if err != nil {
		return Cleanup{}, err
	}
	before, err := r.Leftovers(ctx)
	if err != nil {
		return Cleanup{}, err
	}
	if err := r.Restore(ctx); err != nil {
		return Cleanup{}, err
	}
	after, err := r.Leftovers(ctx)
	if err != nil {
		return Cleanup{}, err
	}
	if len(after) > 0 {
		return Cleanup{}, fmt.Errorf("still there after the restore: %s", strings.Join(after, ", "))
	}
	st, err := r.UnitState(ctx)
	if err != nil {
		return Cleanup{}, err
	}
	return Cleanup{Removed: before, Unit: d.h.Unit, UnitState: st.ActiveState}, nil
}

// openSlurm is driver "slurm": a job per point on a cluster, max_jobs in flight.
type openSlurm struct {
	h    sweep.Host
	o    Options
	conn lazy[*Slurm]
}

func (d *openSlurm) options() SlurmOptions {
	s := d.h.Slurm
	return SlurmOptions{Name: d.h.Name, Sweep: d.o.Sweep, Local: d.h.Address == "", SSH: SSHOptionsOf(d.h, d.o),
		Partition: s.Partition, Account: s.Account, TimeLimit: s.TimeLimit, SbatchArgs: s.SbatchArgs,
		OutputDir: s.OutputDir, Event: d.o.event(d.h.Name), Clock: d.o.Clock,
		GPUsPerNode: d.h.GPUs, MaxNodes: s.MaxNodes, DistInitPort: d.h.DistInitPort}
}

func (d *openSlurm) dial(ctx context.Context) (*Slurm, error) { return DialSlurm(ctx, d.options()) }

func (d *openSlurm) Name() string { return d.h.Name }

func (d *openSlurm) Start(ctx context.Context, l Launch) (Instance, error) {
	c, err := d.conn.get(ctx)
	if err != nil {
		return nil, err
	}
	return c.Start(ctx, l)
}

// Restore connects when this run never did: jobs a killed run left are cancelled.
func (d *openSlurm) Restore(ctx context.Context) error {
	c, err := d.conn.get(ctx)
	if err != nil {
		return fmt.Errorf("restore %s: %w", d.h.Name, err)
	}
	return c.Restore(ctx)
}

func (d *openSlurm) Provenance(ctx context.Context) (Provenance, error) {
	c, err := d.conn.get(ctx)
	if err != nil {
		return Provenance{}, err
	}
	return c.Provenance(ctx)
}

func (d *openSlurm) Close() error { return d.conn.close() }

// Slots: the cluster places its jobs itself, max_jobs at once.
func (d *openSlurm) Slots() Slots { return Slots{N: max(d.h.Slurm.MaxJobs, 1)} }

func (d *openSlurm) Slot(k int) Host {
	return &lazySlot{name: d.h.Name, get: func(ctx context.Context) (Host, error) {
		c, err := d.conn.get(ctx)
		if err != nil {
			return nil, err
		}
		return c.Slot(k), nil
	}}
}

func (d *openSlurm) Doctor(ctx context.Context) []Check {
	o := d.options()
	t := DoctorTarget{Name: d.h.Name, Port: d.o.Port, SSH: o.SSH, Slurm: &o, GPUs: d.h.GPUs}
	t = t.withDefaults()
	if o.Local {
		dctx, cancel := context.WithTimeout(ctx, DoctorChecksTimeout)
		defer cancel()
		return doctorSlurm(dctx, localShell{}, t)
	}
	return doctorSSH(ctx, t, func(ctx context.Context, c *Conn, t DoctorTarget, _ func(string, CheckStatus, string, ...any)) []Check {
		return doctorSlurm(ctx, sshShell{c}, t)
	})
}

func (d *openSlurm) Clean(ctx context.Context) (Cleanup, error) {
	c, err := d.conn.get(ctx)
	if err != nil {
		return Cleanup{}, err
	}
	before, err := c.Leftovers(ctx)
	if err != nil {
		return Cleanup{}, err
	}
	if err := c.Restore(ctx); err != nil {
		return Cleanup{}, err
	}
	after, err := c.Leftovers(ctx)
	if err != nil {
		return Cleanup{}, err
	}
	if len(after) > 0 {
		return Cleanup{}, fmt.Errorf("still in the queue after scancel: %s", strings.Join(after, ", "))
	}
	return Cleanup{Removed: before, Jobs: true}, nil
}
