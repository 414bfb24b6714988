// Package orchestrator runs sweeps: one worker per host takes the next pending point that host can
// hold, restarts the server with the point's configuration, waits for it with fail-fast
// classification, measures the load ladder and commits every run as it completes. Everything it
// learns goes to the store as it happens, so a crash at any instant loses nothing and a resume
// re-runs only the points that were not finished.
//
// The package defines the small interfaces it consumes (Host, Store, Clock, LoadFunc); hostctl,
// store and workload satisfy them, and tests use fakes.
package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/workload"
)

// Host is one spec host (hostctl.Driver satisfies it, as hostctl.Open makes it): a server of its
// own, and Slots() handles of the points it runs at once.
type Host interface {
	server
	// Slots says how many points the host runs at once and whether the runner shares its GPUs
	// out among them (packing) or the host places them itself (a Slurm cluster).
	Slots() hostctl.Slots
	// Slot is the handle of the k-th point in flight, 0 <= k < Slots().N.
	Slot(k int) hostctl.Host
}

// hostctl's drivers are the hosts the CLI and the daemon give the runner.
var _ Host = hostctl.Driver(nil)

// server runs one server at a time: a host, or one of its slots (hostctl.Host satisfies it).
type server interface {
	Name() string
	Start(ctx context.Context, l hostctl.Launch) (hostctl.Instance, error)
	Restore(ctx context.Context) error
	Provenance(ctx context.Context) (hostctl.Provenance, error)
}

// Store is what a sweep run reads and writes (*store.DB satisfies it).
type Store interface {
	Sweep(ctx context.Context, id int64) (store.Sweep, error)
	SetSweepState(ctx context.Context, id int64, to store.SweepState, detail string) error
	Points(ctx context.Context, sweepID int64) ([]store.Point, error)
	ClaimNextPoint(ctx context.Context, sweepID int64, host string) (store.Point, error)
	// ClaimNextPointUpTo claims what fits the GPUs free on a packing host.
	ClaimNextPointUpTo(ctx context.Context, sweepID int64, host string, maxTP int) (store.Point, error)
	// ClaimNextPointOf claims what a host that spans nodes runs: a point of one of tps.
	ClaimNextPointOf(ctx context.Context, sweepID int64, host string, tps []int) (store.Point, error)
	FinishPoint(ctx context.Context, sweepID int64, pointID string, attempt int, f store.PointFinish) error
	ReleasePoint(ctx context.Context, sweepID int64, pointID string, attempt int, reason string) error
	CancelPoints(ctx context.Context, sweepID int64, reason string) (int, error)
	SetPointInfo(ctx context.Context, sweepID int64, pointID string, attempt int, info store.PointInfo) error
	RecordRunAndFinish(ctx context.Context, run store.Run, finish *store.PointFinish) error
	AddEvent(ctx context.Context, e store.Event) error
	// HoldSweep and Heartbeat record which process runs a sweep and that it still does.
	HoldSweep(ctx context.Context, id int64, h store.Holder) error
	Heartbeat(ctx context.Context, id int64, pid int) error
}

// LoadFunc measures one load level (workload.Run).
type LoadFunc func(ctx context.Context, cfg workload.Config) (*workload.Result, error)

// AnswerFunc answers the output check's prompts (workload.Answer).
type AnswerFunc func(ctx context.Context, cfg workload.CheckConfig) ([]string, error)

// Clock is the time source of backoffs and health checks, injected so tests need not sleep.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config wires a Runner.
type Config struct {
	Store Store
	// Hosts are the sweep's hosts; each gets one worker. Their names must be the sweep's host names.
	Hosts []Host
	// Load measures a level; nil means workload.Run.
	Load LoadFunc
	// Answer runs one pass of the output check (workload.Answer by default).
	Answer AnswerFunc
	Clock  Clock
	Log    *slog.Logger
	// MaxAttempts bounds how often a point is tried when the host is the problem (unreachable, lost
	// connection); deterministic failures (bad_args, oom, ...) are never retried. Default 3.
	MaxAttempts int
	// RetryBackoff is the first wait before a host is tried again after transient trouble; it doubles
	// up to MaxBackoff. Defaults 2 s and 1 min.
	RetryBackoff, MaxBackoff time.Duration
	// CheckInterval is how often a ready server's unit state and journal are checked while load runs,
	// so a crash ends the level within about that long. Default 500 ms.
	CheckInterval time.Duration
	// SilenceProbe: when no request got a byte for this long while load runs, the server's liveness
	// is probed with /health_generate (a real generation: /health of newer releases answers from a
	// fast path even with the scheduler hung). Default 3 s.
	SilenceProbe time.Duration
	// LivenessTimeout bounds that probe: no answer within it names the server hung. Default 15 s
	// (a busy server queues the probe's generation behind its batch).
	LivenessTimeout time.Duration
	// CleanupTimeout bounds stopping a server and restoring a unit after an interruption, beyond the
	// point's stop_timeout. Default 30 s.
	CleanupTimeout time.Duration
	// Observe, when set, receives every notable happening (for progress displays); it must be quick.
	Observe func(Update)
	// BeforePoint, when set, is called by a host's worker before it takes a point: the point starts
	// only once it returns, and release is called when the point's server has stopped. The daemon
	// uses it to keep sweeps that share a machine off each other and to hold new points outside a
	// quiet window. An error ends the worker (ctx cancelled) or the run.
	BeforePoint func(ctx context.Context, host string) (release func(), err error)
	// KeepUnits leaves the hosts' units as they are at the end of Run (the daemon restores a machine
	// once no sweep uses it); by default Run restores every host.
	KeepUnits bool
	// WatchInterval is how often Run reads its sweep's state, so a `specsweep cancel` from another
	// process stops it. Default 1 s.
	WatchInterval time.Duration
	// Holder is how this process runs sweeps (store.HolderRun or store.HolderDaemon): Run records
	// it, with PID and HostName, as the sweep's holder and writes its heartbeat every Heartbeat while
	// it runs the sweep, so a reader tells a sweep whose process died from one that runs (Orphaned).
	// "" records nothing.
	Holder string
	// PID and HostName name this process; defaults os.Getpid() and os.Hostname().
	PID      int
	HostName string
	// Heartbeat is how often the holder's heartbeat is written. Default 5 s.
	Heartbeat time.Duration
}

// Update is one happening of a running sweep, for progress displays.
type Update struct {
	At     time.Time
	Host   string
	Point  string // point id, "" for host-level updates
	Label  string // the point's human label
	Phase  Phase
	Detail string
	// Duration: for PhaseReady the time from start to ready; for PhaseDone and PhaseFailed the
	// point's time on the host.
	Duration time.Duration
	// Slot is a packing host's slot the update is of, from 1 (0: a host that runs one point at a
	// time); GPUs are the GPU indices its point holds.
	Slot int
	GPUs []int
}

// ActivityKey names whose activity u is: the host, or "HOST/slot K" for a packing host's slot.
func (u Update) ActivityKey() string {
	if u.Slot == 0 {
		return u.Host
	}
	return fmt.Sprintf("%s/slot %d", u.Host, u.Slot-1)
}

// Phase names what a host is doing.
type Phase string

// Phases of a point on a host.
const (
	PhaseStarting Phase = "starting"
	PhaseReady    Phase = "ready"
	PhaseLoad     Phase = "load"
	PhaseStopping Phase = "stopping"
	PhaseDone     Phase = "done"
	PhaseFailed   Phase = "failed"
	PhaseRetry    Phase = "retry"
	PhaseIdle     Phase = "idle"
	PhaseRestored Phase = "restored"
)

// The values defaults fills into a Config's zero fields (their meaning: the fields' comments).
const (
	DefaultMaxAttempts     = 3
	DefaultRetryBackoff    = 2 * time.Second
	DefaultMaxBackoff      = time.Minute
	DefaultCheckInterval   = 500 * time.Millisecond
	DefaultSilenceProbe    = 3 * time.Second
	DefaultLivenessTimeout = 15 * time.Second
	DefaultWatchInterval   = time.Second
	DefaultCleanupTimeout  = 30 * time.Second
	DefaultHeartbeat       = 5 * time.Second
)

func (c *Config) defaults() error {
	if c.Store == nil {
		return errors.New("orchestrator: no store")
	}
	if len(c.Hosts) == 0 {
		return errors.New("orchestrator: no hosts")
	}
	seen := map[string]bool{}
	for _, h := range c.Hosts {
		if seen[h.Name()] {
			return fmt.Errorf("orchestrator: host %q given twice", h.Name())
		}
		seen[h.Name()] = true
	}
	if c.Load == nil {
		c.Load = workload.Run
	}
	if c.Answer == nil {
		c.Answer = workload.Answer
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.CheckInterval <= 0 {
		c.CheckInterval = DefaultCheckInterval
	}
	if c.SilenceProbe <= 0 {
		c.SilenceProbe = DefaultSilenceProbe
	}
	if c.LivenessTimeout <= 0 {
		c.LivenessTimeout = DefaultLivenessTimeout
	}
	if c.WatchInterval <= 0 {
		c.WatchInterval = DefaultWatchInterval
	}
	if c.CleanupTimeout <= 0 {
		c.CleanupTimeout = DefaultCleanupTimeout
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.PID <= 0 {
		c.PID = os.Getpid()
	}
	if c.HostName == "" {
		c.HostName, _ = os.Hostname() // "" when unknown: the pid check then never applies
	}
	if c.Holder != "" && c.Holder != store.HolderRun && c.Holder != store.HolderDaemon {
		return fmt.Errorf("orchestrator: unknown holder kind %q", c.Holder)
	}
	return nil
}
