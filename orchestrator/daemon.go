package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// DaemonStore is what the daemon needs of the store (*store.DB satisfies it).
type DaemonStore interface {
	Store
	SubmitStore
	ListSweeps(ctx context.Context, states ...store.SweepState) ([]store.Sweep, error)
	ClaimNextSweep(ctx context.Context, except ...int64) (store.Sweep, error)
	RequeueRunning(ctx context.Context, reason string, holdAfter int) (requeued, held []int64, err error)
	LatestInstance(ctx context.Context, scheduleID int64) (store.Sweep, error)
	RecoverInterrupted(ctx context.Context, sweepID int64, reason string) (int, error)
}

// DaemonConfig wires a Daemon.
type DaemonConfig struct {
	Store DaemonStore
	// Hosts makes the host adapters of a spec (fresh ones for each sweep). A returned Host that is
	// an io.Closer is closed when the sweep ends.
	Hosts func(spec *sweep.Spec, sweepID int64) []Host
	// MachineKey names the machine behind a spec host: sweeps whose hosts have the same key never
	// run points on it at the same time. Default: MachineKey.
	MachineKey func(h sweep.Host) string
	// Runner is the template of each sweep's Runner (Load, Clock, intervals, Log); Store, Hosts,
	// BeforePoint, KeepUnits and Observe are set by the daemon.
	Runner Config
	// Poll is how often the queue and the schedules are read from the store (default 500 ms): a
	// `specsweep submit` from another process is picked up within that time.
	Poll time.Duration
	Log  *slog.Logger
	// Observe, when set, receives every sweep's updates.
	Observe func(sweepID int64, u Update)
	// LockSweep, when set, takes the per-name lock that `specsweep run` takes too, so a foreground
	// run cannot resume a sweep the daemon runs (nor the reverse). A sweep whose lock is held is put
	// back in the queue and tried again later. A schedule's instances (ScheduleID set) are never
	// resumed by `specsweep run`.
	LockSweep func(sw store.Sweep) (unlock func(), err error)
	// HoldAfterDeaths: a sweep that was running when this many daemons died is held (interrupted)
	// at the next start instead of requeued, until a resume releases it: a spec that kills the
	// daemon (out of memory, a crash) would otherwise kill it at every start under systemd's
	// Restart=. Default DefaultHoldAfterDeaths; negative: never held.
	HoldAfterDeaths int
	// MinEvery is the shortest @every interval of a stored schedule the daemon fires (0:
	// sweep.MinEvery); a shorter one is logged and skipped. `daemon --min-every` sets it.
	MinEvery time.Duration
	// AfterSweep, when set, is called with every sweep that ended (not one interrupted), after its
	// hosts were restored: the CLI judges a watch there (its regressions become events).
	AfterSweep func(ctx context.Context, sweepID int64, spec *sweep.Spec)
}

// DefaultHoldAfterDeaths is the daemon deaths after which a sweep is held: one death is a reboot or
// an operator's kill, a second may be chance, a third in the same sweep is the sweep.
const DefaultHoldAfterDeaths = 3

// MachineKey identifies the machine (and unit) a spec host drives: the SSH user, address and unit,
// or "local" for the local driver.
func MachineKey(h sweep.Host) string {
	switch h.Driver {
	case sweep.DriverLocal:
		return "local"
	case sweep.DriverSlurm:
		if h.Address == "" {
			return "slurm://local"
		}
		return fmt.Sprintf("slurm://%s@%s", h.User, h.Address)
	}
	return fmt.Sprintf("ssh://%s@%s/%s", h.User, h.Address, h.Unit)
}

// machineKeys are the machines a spec host drives: its own, or each node's of a group (sorted, so
// leases are always taken in one order).
func (d *Daemon) machineKeys(h sweep.Host) []string {
	if len(h.Nodes) == 0 {
		return []string{d.cfg.MachineKey(h)}
	}
	var keys []string
	for _, n := range h.Nodes {
		keys = append(keys, d.cfg.MachineKey(sweep.Host{Name: n.Name, Driver: h.Driver, User: n.User, Address: n.Address, Unit: h.Unit}))
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// Daemon runs queued and scheduled sweeps until its context ends.
type Daemon struct {
	cfg    DaemonConfig
	leases *leases
	reload chan struct{}

	mu        sync.Mutex
	active    map[int64]*activeSweep
	users     map[string]int         // machine key -> active sweeps that use it
	schedules map[int64]cron.EntryID // template sweep id -> cron entry
	activity  map[int64]map[string]Update
	cron      *cron.Cron
	stopping  bool
	changed   chan struct{} // closed and replaced whenever a sweep ends
	// lockedUntil: sweeps found locked by another process are not claimed again before then.
	lockedUntil map[int64]time.Time
}

// lockRetry is how long a sweep locked by another process waits before the daemon tries again.
const lockRetry = 30 * time.Second

type activeSweep struct {
	id     int64
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	hosts  []Host
	keys   map[string][]string // spec host name -> machine keys (a group's: each node's)
}

// NewDaemon checks cfg and fills its defaults.
func NewDaemon(cfg DaemonConfig) (*Daemon, error) {
	if cfg.Store == nil || cfg.Hosts == nil {
		return nil, errors.New("orchestrator: daemon needs a store and a host factory")
	}
	if cfg.MachineKey == nil {
		cfg.MachineKey = MachineKey
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	switch {
	case cfg.HoldAfterDeaths == 0:
		cfg.HoldAfterDeaths = DefaultHoldAfterDeaths
	case cfg.HoldAfterDeaths < 0:
		cfg.HoldAfterDeaths = 0
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Runner.Log == nil {
		cfg.Runner.Log = cfg.Log
	}
	if cfg.Runner.Clock == nil {
		cfg.Runner.Clock = realClock{}
	}
	return &Daemon{cfg: cfg, leases: newLeases(), reload: make(chan struct{}, 1),
		active: map[int64]*activeSweep{}, users: map[string]int{}, schedules: map[int64]cron.EntryID{},
		activity: map[int64]map[string]Update{}, changed: make(chan struct{}), lockedUntil: map[int64]time.Time{}}, nil
}

// now is the daemon's clock: the Runner template's, as the runners use it.
func (d *Daemon) now() time.Time { return d.cfg.Runner.Clock.Now() }

// Reload makes the daemon read its schedules again now (SIGHUP).
func (d *Daemon) Reload() {
	select {
	case d.reload <- struct{}{}:
	default:
	}
}

// Run recovers what a previous daemon left, then runs queued sweeps and fires schedules until ctx
// ends; then it stops every running point, restores the units, puts the interrupted sweeps back in
// the queue and returns. ready, if not nil, is called once start-up is done.
func (d *Daemon) Run(ctx context.Context, ready func()) error {
	// Recovery runs to its end even when a stop is asked for meanwhile: cut between the requeue and
	// the restore, the next start would see the sweeps queued and never restore their hosts. Each
	// restore is bounded by its own timeout.
	if err := d.recover(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return nil // asked to stop during recovery: a clean stop
	}
	d.cron = cron.New(cron.WithLocation(time.UTC))
	d.cron.Start()
	// A firing still creating its sweep finishes before Run returns (and the store is closed).
	defer func() { <-d.cron.Stop().Done() }()
	d.loadSchedules(ctx)
	d.startQueued(ctx)
	if ready != nil {
		ready()
	}
	tick := time.NewTicker(d.cfg.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			d.shutdown()
			return nil
		case <-d.reload:
			d.cfg.Log.Info("reloading schedules")
			d.loadSchedules(ctx)
		case <-tick.C:
			d.loadSchedules(ctx)
			d.startQueued(ctx)
		}
	}
}

// recover puts the sweeps a dead daemon was running back in the queue (their running points
// pending again), finishes cancellations nobody carried out, and restores the units they touched.
func (d *Daemon) recover(ctx context.Context) error {
	st := d.cfg.Store
	ids, held, err := st.RequeueRunning(ctx, "daemon restarted: the attempt was interrupted", d.cfg.HoldAfterDeaths)
	if err != nil {
		return err
	}
	for _, id := range held {
		d.cfg.Log.Error("holding a sweep the daemon died running several times: it is not requeued; resume it to release it",
			"sweep", id, "deaths", d.cfg.HoldAfterDeaths)
	}
	// Held sweeps' hosts are restored too.
	ids = append(ids, held...)
	cancelled, err := st.ListSweeps(ctx, store.SweepCancelled)
	if err != nil {
		return err
	}
	for _, sw := range cancelled {
		if sw.Running == 0 {
			continue
		}
		if _, err := st.RecoverInterrupted(ctx, sw.ID, "sweep cancelled"); err != nil {
			return err
		}
		if _, err := st.CancelPoints(ctx, sw.ID, "sweep cancelled"); err != nil {
			return err
		}
		ids = append(ids, sw.ID)
	}
	for _, id := range ids {
		sw, err := st.Sweep(ctx, id)
		if err != nil {
			return err
		}
		spec, err := sweep.Parse(fmt.Sprintf("sweep %d", id), []byte(sw.SpecText))
		if err != nil {
			continue
		}
		d.cfg.Log.Info("recovered an interrupted sweep: restoring its hosts", "sweep", id, "name", sw.Name)
		hosts := d.cfg.Hosts(spec, id)
		r, err := New(d.runnerConfig(id, hosts, nil))
		if err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, d.cfg.Runner.CleanupTimeout+spec.Server.StopTimeout+30*time.Second)
		r.RestoreHosts(rctx, id, hosts)
		cancel()
		closeHosts(hosts)
	}
	return nil
}

func (d *Daemon) runnerConfig(id int64, hosts []Host, before func(context.Context, string) (func(), error)) Config {
	c := d.cfg.Runner
	c.Store, c.Hosts, c.BeforePoint, c.KeepUnits = d.cfg.Store, hosts, before, true
	c.Holder = store.HolderDaemon
	c.Observe = func(u Update) {
		d.mu.Lock()
		if d.activity[id] == nil {
			d.activity[id] = map[string]Update{}
		}
		d.activity[id][u.ActivityKey()] = u
		d.mu.Unlock()
		if d.cfg.Observe != nil {
			d.cfg.Observe(id, u)
		}
	}
	return c
}

// startQueued starts every queued sweep whose time has come.
func (d *Daemon) startQueued(ctx context.Context) {
	for ctx.Err() == nil {
		d.mu.Lock()
		stopping := d.stopping
		d.mu.Unlock()
		if stopping {
			return
		}
		var skip []int64
		d.mu.Lock()
		for id, until := range d.lockedUntil {
			if d.now().Before(until) {
				skip = append(skip, id)
			} else {
				delete(d.lockedUntil, id)
			}
		}
		d.mu.Unlock()
		sw, err := d.cfg.Store.ClaimNextSweep(ctx, skip...)
		if errors.Is(err, store.ErrNotFound) {
			return
		}
		if err != nil {
			d.cfg.Log.Error("cannot read the queue", "err", err)
			return
		}
		d.start(ctx, sw)
	}
}

// start runs one claimed sweep beside the others; machines shared with other sweeps are leased
// point by point (a packing host's slots share the sweep's lease), the oldest sweep first.
func (d *Daemon) start(ctx context.Context, sw store.Sweep) {
	spec, err := sweep.Parse(fmt.Sprintf("sweep %d", sw.ID), []byte(sw.SpecText))
	if err != nil {
		d.cfg.Log.Error("stored spec no longer parses", "sweep", sw.ID, "err", err)
		_ = d.cfg.Store.SetSweepState(ctx, sw.ID, store.SweepFailed, "spec: "+err.Error())
		return
	}
	unlock := func() {}
	if d.cfg.LockSweep != nil {
		if unlock, err = d.cfg.LockSweep(sw); err != nil {
			d.cfg.Log.Warn("sweep is locked by another process: retrying later", "sweep", sw.ID, "err", err)
			_ = d.cfg.Store.SetSweepState(ctx, sw.ID, store.SweepQueued, "locked by another process: "+err.Error())
			d.mu.Lock()
			d.lockedUntil[sw.ID] = d.now().Add(lockRetry)
			d.mu.Unlock()
			return
		}
	}
	hosts := d.cfg.Hosts(spec, sw.ID)
	keys := map[string][]string{}
	for _, h := range spec.Hosts {
		keys[h.Name] = d.machineKeys(h)
	}
	var window *sweep.Window
	if spec.Schedule != nil && spec.Schedule.Window != "" {
		if w, err := sweep.ParseWindow(spec.Schedule.Window); err == nil {
			window = &w
		}
	}
	// The slot workers of a packing host all ask for the same machine: they share the sweep's lease.
	shares := newSweepLeases(d.leases, sw.ID)
	before := func(ctx context.Context, host string) (func(), error) {
		if window != nil {
			if err := d.waitWindow(ctx, sw.ID, host, *window); err != nil {
				return nil, err
			}
		}
		// A group's nodes are machines of their own: each is waited for and leased, in one order.
		var rels []func()
		release := func() {
			for _, rel := range slices.Backward(rels) {
				rel()
			}
		}
		for _, k := range keys[host] {
			if err := d.waitOlder(ctx, sw.ID, k); err != nil {
				release()
				return nil, err
			}
			rel, err := shares.acquire(ctx, k)
			if err != nil {
				release()
				return nil, err
			}
			rels = append(rels, rel)
		}
		return release, nil
	}
	runner, err := New(d.runnerConfig(sw.ID, hosts, before))
	if err != nil {
		unlock()
		d.cfg.Log.Error("cannot run sweep", "sweep", sw.ID, "err", err)
		_ = d.cfg.Store.SetSweepState(ctx, sw.ID, store.SweepFailed, err.Error())
		return
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a := &activeSweep{id: sw.ID, name: sw.Name, cancel: cancel, done: make(chan struct{}), hosts: hosts, keys: keys}
	d.mu.Lock()
	d.active[sw.ID] = a
	for _, ks := range keys {
		for _, k := range ks {
			d.users[k]++
		}
	}
	d.mu.Unlock()
	d.cfg.Log.Info("sweep started", "sweep", sw.ID, "name", sw.Name, "points", sw.Points)
	go func() {
		defer close(a.done)
		defer unlock()
		out, err := runner.Run(sctx, sw.ID, spec)
		if err != nil {
			d.cfg.Log.Error("sweep ended with an error", "sweep", sw.ID, "err", err)
		}
		d.mu.Lock()
		stopping := d.stopping
		d.mu.Unlock()
		bg := context.WithoutCancel(ctx)
		if out.Interrupted && stopping {
			// The daemon is stopping: the next daemon resumes this sweep.
			if err := d.cfg.Store.SetSweepState(bg, sw.ID, store.SweepQueued, "daemon stopped"); err != nil {
				d.cfg.Log.Error("cannot requeue sweep", "sweep", sw.ID, "err", err)
			}
		}
		d.cfg.Log.Info("sweep ended", "sweep", sw.ID, "name", sw.Name, "state", out.State, "done", out.Done,
			"failed", out.Failed, "pending", out.Pending)
		d.finish(bg, a, runner, spec)
		if d.cfg.AfterSweep != nil && !out.Interrupted {
			d.cfg.AfterSweep(bg, sw.ID, spec)
		}
	}()
}

// finish restores the machines the sweep used that no other running sweep uses, then forgets it.
func (d *Daemon) finish(ctx context.Context, a *activeSweep, runner *Runner, spec *sweep.Spec) {
	d.mu.Lock()
	var idle []Host
	for _, h := range a.hosts {
		free := true
		for _, k := range a.keys[h.Name()] {
			d.users[k]--
			if d.users[k] == 0 {
				delete(d.users, k)
			} else {
				free = false // another sweep runs there: it restores what it changed
			}
		}
		if free {
			idle = append(idle, h)
		}
	}
	d.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, d.cfg.Runner.CleanupTimeout+spec.Server.StopTimeout+30*time.Second)
	defer cancel()
	// Lease each machine for its restore, so a sweep that starts meanwhile waits for it.
	var leased []Host
	var releases []func()
	for _, h := range idle {
		var rels []func()
		for _, k := range a.keys[h.Name()] {
			rel, err := d.leases.acquire(rctx, k, 0)
			if err != nil {
				break
			}
			rels = append(rels, rel)
		}
		if len(rels) < len(a.keys[h.Name()]) {
			for _, rel := range rels {
				rel()
			}
			continue
		}
		leased, releases = append(leased, h), append(releases, rels...)
	}
	runner.RestoreHosts(rctx, a.id, leased)
	for _, rel := range releases {
		rel()
	}
	closeHosts(a.hosts)
	d.mu.Lock()
	delete(d.active, a.id)
	delete(d.activity, a.id)
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
}

// waitOlder blocks while an older running sweep uses the machine: sweeps that share a machine use
// it in submission order (the lease alone would interleave their points).
func (d *Daemon) waitOlder(ctx context.Context, id int64, key string) error {
	for {
		d.mu.Lock()
		blocked := false
		for oid, a := range d.active {
			if oid >= id {
				continue
			}
			for _, ks := range a.keys {
				blocked = blocked || slices.Contains(ks, key)
			}
		}
		ch := d.changed
		d.mu.Unlock()
		if !blocked {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// waitWindow blocks until the quiet window is open.
func (d *Daemon) waitWindow(ctx context.Context, id int64, host string, w sweep.Window) error {
	now := d.now()
	next := w.Next(now)
	if !next.After(now) {
		return nil
	}
	d.cfg.Log.Info("outside the sweep's window: waiting", "sweep", id, "host", host, "until", next.Format(time.RFC3339))
	d.mu.Lock()
	if d.activity[id] == nil {
		d.activity[id] = map[string]Update{}
	}
	d.activity[id][host] = Update{At: now, Host: host, Phase: PhaseIdle, Detail: "waiting for the window until " + next.Format(time.RFC3339)}
	d.mu.Unlock()
	t := time.NewTimer(time.Until(next))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// shutdown stops every running sweep (their points go back to pending, units restored) and waits.
func (d *Daemon) shutdown() {
	d.mu.Lock()
	d.stopping = true
	var all []*activeSweep
	for _, a := range d.active {
		all = append(all, a)
	}
	d.mu.Unlock()
	for _, a := range all {
		a.cancel()
	}
	for _, a := range all {
		<-a.done
	}
}

// loadSchedules brings the cron entries in line with the scheduled sweeps in the store.
func (d *Daemon) loadSchedules(ctx context.Context) {
	tmpls, err := d.cfg.Store.ListSweeps(ctx, store.SweepScheduled)
	if err != nil {
		d.cfg.Log.Error("cannot read schedules", "err", err)
		return
	}
	want := map[int64]store.Sweep{}
	for _, t := range tmpls {
		want[t.ID] = t
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, entry := range d.schedules {
		if _, ok := want[id]; !ok {
			d.cron.Remove(entry)
			delete(d.schedules, id)
			d.cfg.Log.Info("schedule removed", "sweep", id)
		}
	}
	for id, t := range want {
		if _, ok := d.schedules[id]; ok {
			continue
		}
		sched, err := sweep.ParseCronEvery(t.Schedule, cmp.Or(d.cfg.MinEvery, sweep.MinEvery))
		if err != nil {
			d.cfg.Log.Error("bad schedule", "sweep", id, "cron", t.Schedule, "err", err)
			continue
		}
		d.schedules[id] = d.cron.Schedule(sched, cron.FuncJob(func() { d.fire(ctx, id) }))
		d.cfg.Log.Info("schedule loaded", "sweep", id, "name", t.Name, "cron", t.Schedule, "next", sched.Next(d.now()).UTC().Format(time.RFC3339))
	}
}

// fire makes a new sweep of a schedule's spec, unless its previous one has not ended.
func (d *Daemon) fire(ctx context.Context, templateID int64) {
	st := d.cfg.Store
	tmpl, err := st.Sweep(ctx, templateID)
	if err != nil || tmpl.State != store.SweepScheduled {
		return
	}
	now := d.now().UTC()
	if last, err := st.LatestInstance(ctx, templateID); err == nil && !last.State.Terminal() {
		d.cfg.Log.Info("schedule fired while its previous sweep runs: skipped", "schedule", templateID, "previous", last.ID)
		_ = st.AddEvent(ctx, store.Event{SweepID: templateID, Kind: "schedule_skipped",
			Detail: fmt.Sprintf("previous sweep %d (%s) is %s", last.ID, last.Name, last.State)})
		return
	}
	spec, err := sweep.Parse(tmpl.Name, []byte(tmpl.SpecText))
	if err != nil {
		d.cfg.Log.Error("scheduled spec no longer parses", "schedule", templateID, "err", err)
		return
	}
	if _, err := ReadPromptSets(ctx, spec); err != nil {
		d.cfg.Log.Error("schedule could not read its prompt sets", "schedule", templateID, "err", err)
		_ = st.AddEvent(ctx, store.Event{SweepID: templateID, Kind: "schedule_skipped", Detail: "prompt sets: " + err.Error()})
		return
	}
	plan := spec.Plan()
	ns := NewSweepOf(spec, plan)
	ns.Name, ns.Schedule, ns.ScheduleID = fmt.Sprintf("%s@%s", tmpl.Name, now.Format("20060102T150405Z")), "", templateID
	id, err := st.CreateSweep(ctx, ns, HostsOf(spec), PointsOf(spec, plan))
	if err != nil {
		d.cfg.Log.Error("schedule could not create its sweep", "schedule", templateID, "err", err)
		return
	}
	_ = st.AddEvent(ctx, store.Event{SweepID: templateID, Kind: "schedule_fired", Detail: fmt.Sprintf("sweep %d (%s)", id, ns.Name)})
	d.cfg.Log.Info("schedule fired", "schedule", templateID, "sweep", id, "name", ns.Name)
}

// Activity is what each host of a running sweep is doing, for the status API.
func (d *Daemon) Activity(id int64) map[string]Update {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]Update{}
	for h, u := range d.activity[id] {
		out[h] = u
	}
	return out
}

// Running lists the ids of the sweeps this daemon runs now.
func (d *Daemon) Running() []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []int64
	for id := range d.active {
		ids = append(ids, id)
	}
	return ids
}

func closeHosts(hosts []Host) {
	for _, h := range hosts {
		if c, ok := h.(io.Closer); ok {
			_ = c.Close()
		}
	}
}

// leases hands each machine to one holder at a time (a sweep, through its sweepLeases, or a
// restore); among waiters the lowest priority value (the oldest sweep id) goes first, so sweeps
// sharing a machine run in submission order there.
type leases struct {
	mu      sync.Mutex
	busy    map[string]bool
	waiting map[string][]*waiter
}

type waiter struct {
	prio int64
	ch   chan struct{}
}

func newLeases() *leases {
	return &leases{busy: map[string]bool{}, waiting: map[string][]*waiter{}}
}

func (l *leases) acquire(ctx context.Context, key string, prio int64) (func(), error) {
	l.mu.Lock()
	if !l.busy[key] {
		l.busy[key] = true
		l.mu.Unlock()
		return l.releaser(key), nil
	}
	w := &waiter{prio: prio, ch: make(chan struct{})}
	l.waiting[key] = append(l.waiting[key], w)
	l.mu.Unlock()
	select {
	case <-w.ch:
		return l.releaser(key), nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		select {
		case <-w.ch:
			// Granted just now: pass it on.
			l.handOver(key)
		default:
			ws := l.waiting[key]
			for i, x := range ws {
				if x == w {
					l.waiting[key] = append(ws[:i], ws[i+1:]...)
					break
				}
			}
		}
		return nil, ctx.Err()
	}
}

func (l *leases) releaser(key string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.handOver(key)
		})
	}
}

// handOver gives a held machine to the first waiter, or frees it. l.mu is held.
func (l *leases) handOver(key string) {
	ws := l.waiting[key]
	if len(ws) == 0 {
		delete(l.busy, key)
		return
	}
	best := 0
	for i, w := range ws {
		if w.prio < ws[best].prio {
			best = i
		}
	}
	w := ws[best]
	l.waiting[key] = append(ws[:best], ws[best+1:]...)
	if len(l.waiting[key]) == 0 {
		delete(l.waiting, key)
	}
	close(w.ch)
}

// sweepLeases is one sweep's hold on the machines it leases. The slot workers of a packing host run
// points of the sweep side by side on one machine: the first that needs the machine acquires its
// lease (queued with the other sweeps, oldest first), the others join it, and the lease goes back to
// the leases only when the sweep's last holder lets go. Between sweeps a machine stays exclusive.
type sweepLeases struct {
	l    *leases
	prio int64

	mu   sync.Mutex
	held map[string]*sharedLease // machine key -> the sweep's lease of it, acquired or being acquired
}

// sharedLease is a sweep's lease of one machine and its holders (and would-be holders).
type sharedLease struct {
	refs    int           // holders, plus the workers waiting for the acquisition
	granted chan struct{} // closed once the acquisition ended (release or err set)
	release func()        // the lease's releaser, once granted
	err     error         // why the acquisition failed
	cancel  context.CancelFunc
}

func newSweepLeases(l *leases, prio int64) *sweepLeases {
	return &sweepLeases{l: l, prio: prio, held: map[string]*sharedLease{}}
}

// acquire returns once the sweep holds the machine key: at once when another of its workers holds
// it. A cancelled wait takes its reference back; the last one to give up abandons the acquisition.
func (s *sweepLeases) acquire(ctx context.Context, key string) (func(), error) {
	s.mu.Lock()
	sl := s.held[key]
	if sl == nil {
		// The acquisition belongs to every worker waiting for it, not only to the first: it runs on
		// a context of its own, cancelled when the last of them gives up.
		actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		sl = &sharedLease{granted: make(chan struct{}), cancel: cancel}
		s.held[key] = sl
		go s.obtain(actx, key, sl)
	}
	sl.refs++
	s.mu.Unlock()
	select {
	case <-sl.granted:
	case <-ctx.Done():
		s.drop(key, sl)
		return nil, ctx.Err()
	}
	if sl.err != nil {
		s.drop(key, sl)
		return nil, sl.err
	}
	var once sync.Once
	return func() { once.Do(func() { s.drop(key, sl) }) }, nil
}

// obtain acquires the machine's lease for sl; if every worker gave up meanwhile, it lets it go.
func (s *sweepLeases) obtain(ctx context.Context, key string, sl *sharedLease) {
	rel, err := s.l.acquire(ctx, key, s.prio)
	s.mu.Lock()
	sl.release = rel
	if err != nil {
		sl.err = fmt.Errorf("lease of %s: %w", key, err)
	}
	close(sl.granted)
	abandoned := sl.refs == 0
	s.mu.Unlock()
	if abandoned && rel != nil {
		rel()
	}
}

// drop takes one reference back; the last one returns the lease (or abandons its acquisition).
func (s *sweepLeases) drop(key string, sl *sharedLease) {
	s.mu.Lock()
	sl.refs--
	if sl.refs > 0 {
		s.mu.Unlock()
		return
	}
	if s.held[key] == sl {
		delete(s.held, key)
	}
	var rel func()
	select {
	case <-sl.granted:
		rel = sl.release // nil when the acquisition failed
	default:
		// Still queued: obtain sees refs 0 and hands back whatever it gets.
	}
	s.mu.Unlock()
	sl.cancel()
	if rel != nil {
		rel()
	}
}
