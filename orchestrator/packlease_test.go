package orchestrator

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// packMachine is one fake packing machine: every sweep's handle of it, and each handle's slots,
// drive the same fake servers. It fails the test when servers of two sweeps run on it at once, and
// records the order of Restore calls.
type packMachine struct {
	t     *testing.T
	name  string
	host  *fakeHost   // the machine itself (its Restore brings the operator's server back)
	slots []*fakeHost // slot k's server, the same for every sweep

	// together > 1: a slot's Start waits until that many servers of its sweep are starting or
	// running at once, proving that the slots run side by side (a generous bound fails the test).
	together int

	mu      sync.Mutex
	live    map[int64]int // sweep id -> its servers starting or running
	most    int           // most servers of one sweep at once
	gate    chan struct{} // closed once together servers of a sweep run at once
	gated   bool
	restore []string // "host" or "slot k", in the order they were recorded
	// hostRestoring is closed when the host's Restore begins: a slot's Restore waits for it (or a
	// while), so a host restored beside its slots, not after them, shows.
	hostRestoring chan struct{}
	slotsRestored int
	slotsAtHost   int // slots already restored when the host's Restore began; -1: not yet
}

func newPackMachine(t *testing.T, w *fakeWorld, name string, gpus, together int) *packMachine {
	m := &packMachine{t: t, name: name, host: w.host(name), together: together, live: map[int64]int{},
		gate: make(chan struct{}), hostRestoring: make(chan struct{}), slotsAtHost: -1}
	for k := range gpus {
		m.slots = append(m.slots, w.host(fmt.Sprintf("%s/slot%d", name, k)))
	}
	return m
}

// handle is the machine as sweep id's host factory makes it.
func (m *packMachine) handle(id int64) Host { return &packHandle{m: m, sweep: id} }

type packHandle struct {
	m     *packMachine
	sweep int64
}

func (h *packHandle) Name() string { return h.m.name }
func (h *packHandle) Start(ctx context.Context, l hostctl.Launch) (hostctl.Instance, error) {
	return h.m.host.Start(ctx, l)
}
func (h *packHandle) Restore(ctx context.Context) error { return h.m.restored(ctx, -1, h.m.host) }
func (h *packHandle) Provenance(ctx context.Context) (hostctl.Provenance, error) {
	return h.m.host.Provenance(ctx)
}
func (h *packHandle) Slot(k int) hostctl.Host { return &packSlot{m: h.m, sweep: h.sweep, k: k} }

// Slots: one per GPU, shared out by the runner.
func (h *packHandle) Slots() hostctl.Slots { return hostctl.Slots{N: len(h.m.slots), GPUs: true} }

// packSlot is a slot's handle: named after its machine, as the runner's slot workers are.
type packSlot struct {
	m     *packMachine
	sweep int64
	k     int
}

func (s *packSlot) Name() string { return s.m.name }

func (s *packSlot) Close() error { return nil }

func (s *packSlot) Start(ctx context.Context, l hostctl.Launch) (hostctl.Instance, error) {
	m := s.m
	m.mu.Lock()
	for other, n := range m.live {
		if other != s.sweep && n > 0 {
			m.t.Errorf("machine %s: sweep %d starts a point while %d server(s) of sweep %d run there", m.name, s.sweep, n, other)
		}
	}
	m.live[s.sweep]++
	m.most = max(m.most, m.live[s.sweep])
	if m.together > 1 && m.live[s.sweep] >= m.together && !m.gated {
		m.gated = true
		close(m.gate)
	}
	gate := m.gate
	m.mu.Unlock()
	if m.together > 1 {
		select {
		case <-gate:
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			m.mu.Lock()
			if !m.gated {
				m.t.Errorf("machine %s: sweep %d never ran %d points at once in 10 s", m.name, s.sweep, m.together)
				m.gated = true
				close(m.gate) // once is enough: let the rest run
			}
			m.mu.Unlock()
		}
	}
	inst, err := m.slots[s.k].Start(ctx, l)
	if err != nil {
		m.stopped(s.sweep)
		return nil, err
	}
	return &packInstance{Instance: inst, m: m, sweep: s.sweep}, nil
}

func (s *packSlot) Restore(ctx context.Context) error { return s.m.restored(ctx, s.k, s.m.slots[s.k]) }
func (s *packSlot) Provenance(ctx context.Context) (hostctl.Provenance, error) {
	return s.m.slots[s.k].Provenance(ctx)
}

func (m *packMachine) stopped(sweep int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.live[sweep]--
}

// restored records a Restore of slot k (-1: of the machine itself).
func (m *packMachine) restored(ctx context.Context, k int, fh *fakeHost) error {
	if k < 0 {
		m.mu.Lock()
		m.restore = append(m.restore, "host")
		if m.slotsAtHost < 0 {
			m.slotsAtHost = m.slotsRestored
			close(m.hostRestoring)
		}
		m.mu.Unlock()
		return fh.Restore(ctx)
	}
	// A slot's restore takes a while (its server's stop): a host restored beside it begins first.
	select {
	case <-m.hostRestoring:
	case <-time.After(100 * time.Millisecond):
	}
	m.mu.Lock()
	m.restore = append(m.restore, fmt.Sprintf("slot %d", k))
	m.slotsRestored++
	m.mu.Unlock()
	return fh.Restore(ctx)
}

// packInstance counts its sweep's servers down when it stops.
type packInstance struct {
	hostctl.Instance
	m     *packMachine
	sweep int64
}

func (i *packInstance) Stop(ctx context.Context, progress func(hostctl.State)) (hostctl.StopResult, error) {
	res, err := i.Instance.Stop(ctx, progress)
	i.m.stopped(i.sweep)
	return res, err
}

// packSpec is a sweep of 4 TP 1 points on a local host that packs 4 GPUs.
func packSpec(t *testing.T, name string) *sweep.Spec {
	t.Helper()
	spec, err := sweep.Parse(name+".yaml", []byte(fmt.Sprintf(`version: 1
name: %s
hosts: [{name: big, driver: local, gpus: 4, pack: true}]
server: {command: [/opt/sglang/bin/python, -m, sglang.launch_server], args: [--model-path, /m]}
methods: {baseline: [], eagle3: [--speculative-algorithm, EAGLE3]}
matrix: {method: [baseline, eagle3], num_steps: [1, 2, 3], topk: [1], tp: [1]}
workload: {concurrency: [1, 2], requests: 4, input_tokens: 8, output_tokens: 8}
`, name)))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestDaemonPackingHostRunsItsSlotsSideBySide: the slot workers of a packing host all lease the
// same machine; under the daemon they share their sweep's lease rather than queue on it, so the
// host runs points side by side (they used to run one at a time).
func TestDaemonPackingHostRunsItsSlotsSideBySide(t *testing.T) {
	h := newDaemonHarness(t)
	ctx := context.Background()
	m := h.packMachine("big", 4, 2)
	sw, err := Submit(ctx, h.db, packSpec(t, "p"), SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.waitState(sw.ID, store.SweepDone)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.most < 2 {
		t.Errorf("at most %d point(s) of the sweep ran at once on the packing host, want 2 or more", m.most)
	}
}

// TestDaemonPackedSweepsSharingAMachineTakeTurns: two packing sweeps on one machine: each runs its
// points side by side, and no point of the second runs while the first holds the machine (the
// packMachine fails the test on any overlap); the older sweep goes first.
func TestDaemonPackedSweepsSharingAMachineTakeTurns(t *testing.T) {
	h := newDaemonHarness(t)
	ctx := context.Background()
	m := h.packMachine("big", 4, 2)
	a, err := Submit(ctx, h.db, packSpec(t, "a"), SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Submit(ctx, h.db, packSpec(t, "b"), SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.waitState(a.ID, store.SweepDone)
	h.waitState(b.ID, store.SweepDone)
	if got := h.claimOrder("a", "b"); got != "aaaabbbb" {
		t.Errorf("claims on the shared machine in order %s, want a's then b's", got)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.most < 2 {
		t.Errorf("at most %d point(s) of a sweep ran at once on the packing host, want 2 or more", m.most)
	}
}

// TestSweepLeasesShareWithinASweepOnly: a sweep's second holder of a machine joins its lease at
// once; another sweep gets the machine only when the last holder has let go (twice is harmless).
func TestSweepLeasesShareWithinASweepOnly(t *testing.T) {
	l := newLeases()
	s := newSweepLeases(l, 2)
	ctx := context.Background()
	r1 := mustAcquire(t, s, ctx, "m")
	r2 := mustAcquire(t, s, ctx, "m") // joins: nobody else could give it to this worker
	older := make(chan func(), 1)
	go func() {
		rel, err := l.acquire(ctx, "m", 1)
		if err != nil {
			t.Error(err)
		}
		older <- rel
	}()
	waitWaiters(t, l, "m", 1)
	r1()
	r1()
	select {
	case <-older:
		t.Fatal("another sweep got the machine while the sweep still holds it")
	default:
	}
	r2()
	select {
	case rel := <-older:
		rel()
	case <-time.After(10 * time.Second):
		t.Fatal("the machine never went to the other sweep once the sweep let go")
	}
	assertFree(t, l, s, "m")
}

// TestSweepLeasesCancelledWaitsLeaveNothing: workers of a sweep waiting for a machine another
// sweep holds share one place in its queue; when they give up, no reference and no queued
// acquisition is left, and the machine goes to the next sweep. One that gives up while another
// still waits leaves that one its turn.
func TestSweepLeasesCancelledWaitsLeaveNothing(t *testing.T) {
	l := newLeases()
	ctx := context.Background()
	held, err := l.acquire(ctx, "m", 1) // another sweep holds the machine
	if err != nil {
		t.Fatal(err)
	}
	s := newSweepLeases(l, 2)
	c1, cancel1 := context.WithCancel(ctx)
	c2, cancel2 := context.WithCancel(ctx)
	e1, e2 := make(chan error, 1), make(chan error, 1)
	go func() { _, err := s.acquire(c1, "m"); e1 <- err }()
	go func() { _, err := s.acquire(c2, "m"); e2 <- err }()
	waitRefs(t, s, "m", 2)
	waitWaiters(t, l, "m", 1) // one acquisition for both
	cancel1()
	cancel2()
	for _, e := range []chan error{e1, e2} {
		select {
		case err := <-e:
			if err == nil {
				t.Error("a cancelled wait got the lease")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a cancelled wait did not return")
		}
	}
	held()
	// The machine is free for a third sweep, and nothing of the cancelled sweep is left.
	rel := mustAcquireLease(t, l, "m", 3)
	rel()
	assertFree(t, l, s, "m")

	// One gives up, the other keeps waiting and gets the machine when it is free.
	held, _ = l.acquire(ctx, "m", 1)
	c3, cancel3 := context.WithCancel(ctx)
	defer cancel3()
	e3 := make(chan error, 1)
	got := make(chan func(), 1)
	go func() { _, err := s.acquire(c3, "m"); e3 <- err }()
	go func() {
		rel, err := s.acquire(ctx, "m")
		if err != nil {
			t.Error(err)
		}
		got <- rel
	}()
	waitRefs(t, s, "m", 2)
	cancel3()
	if err := <-e3; err == nil {
		t.Error("a cancelled wait got the lease")
	}
	held()
	select {
	case rel := <-got:
		rel()
	case <-time.After(10 * time.Second):
		t.Fatal("the worker still waiting never got the machine")
	}
	assertFree(t, l, s, "m")
}

// TestRunRestoresSlotsBeforeTheirHost: a packing host's own Restore brings the operator's server
// back on its GPUs, so it begins only once every slot's server is restored (stopped).
func TestRunRestoresSlotsBeforeTheirHost(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w := newWorld(t, nil)
	m := newPackMachine(t, w, "big", 4, 0)
	spec := packSpec(t, "restore")
	prep, err := Prepare(ctx, db, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Store: db, Hosts: []Host{m.handle(prep.SweepID)}, Load: w.load, Answer: w.answer,
		CheckInterval: 2 * time.Millisecond, WatchInterval: 5 * time.Millisecond, RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Run(ctx, prep.SweepID, spec)
	if err != nil || out.State != store.SweepDone {
		t.Fatalf("run: %+v %v", out, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.slotsAtHost != len(m.slots) || len(m.restore) != len(m.slots)+1 || m.restore[len(m.restore)-1] != "host" {
		t.Errorf("restores %v (%d slots restored when the host's began), want the %d slots' then the host's",
			m.restore, m.slotsAtHost, len(m.slots))
	}
}

func mustAcquire(t *testing.T, s *sweepLeases, ctx context.Context, key string) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rel, err := s.acquire(ctx, key)
	if err != nil {
		t.Fatalf("acquire %s: %v", key, err)
	}
	return rel
}

func mustAcquireLease(t *testing.T, l *leases, key string, prio int64) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rel, err := l.acquire(ctx, key, prio)
	if err != nil {
		t.Fatalf("the machine %s is not free for another sweep: %v", key, err)
	}
	return rel
}

// waitWaiters waits until n acquisitions are queued for key.
func waitWaiters(t *testing.T, l *leases, key string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d queued acquisition(s) of %s", n, key), func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.waiting[key]) == n
	})
}

// waitRefs waits until the sweep's lease of key has n holders or waiters.
func waitRefs(t *testing.T, s *sweepLeases, key string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d reference(s) to the sweep's lease of %s", n, key), func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.held[key] != nil && s.held[key].refs == n
	})
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("never saw %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// assertFree checks that the machine is neither held nor waited for, and that the sweep keeps no
// lease of it.
func assertFree(t *testing.T, l *leases, s *sweepLeases, key string) {
	t.Helper()
	l.mu.Lock()
	busy, waiting := l.busy[key], len(l.waiting[key])
	l.mu.Unlock()
	s.mu.Lock()
	kept := slices.Collect(maps.Keys(s.held))
	s.mu.Unlock()
	if busy || waiting > 0 || len(kept) > 0 {
		t.Errorf("machine %s: busy %v, %d waiting, the sweep keeps leases of %v; want it free", key, busy, waiting, kept)
	}
}

// TestSlotUpdatesNameTheirSlotAndGPUs: every update of a packing host's slot worker says its slot
// and, while a point runs, the GPUs it holds, so the daemon's activity keeps one entry per slot.
func TestSlotUpdatesNameTheirSlotAndGPUs(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w := newWorld(t, nil)
	m := newPackMachine(t, w, "big", 4, 0)
	spec := packSpec(t, "updates")
	prep, err := Prepare(ctx, db, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	keys := map[string]bool{}
	var bad []string
	r, err := New(Config{Store: db, Hosts: []Host{m.handle(prep.SweepID)}, Load: w.load, Answer: w.answer,
		CheckInterval: 2 * time.Millisecond, WatchInterval: 5 * time.Millisecond, RetryBackoff: time.Millisecond,
		Observe: func(u Update) {
			mu.Lock()
			defer mu.Unlock()
			if u.Phase == PhaseRestored {
				return
			}
			keys[u.ActivityKey()] = true
			if u.Slot == 0 || (u.Point != "" && len(u.GPUs) == 0) {
				bad = append(bad, fmt.Sprintf("%s %s slot %d GPUs %v", u.Phase, u.Point, u.Slot, u.GPUs))
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := r.Run(ctx, prep.SweepID, spec); err != nil || out.State != store.SweepDone {
		t.Fatalf("run: %+v %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("updates without their slot or GPUs: %v", bad)
	}
	if !keys["big/slot 0"] || !keys["big/slot 1"] || keys["big"] {
		t.Errorf("activity keys %v, want one per slot (big/slot 0, big/slot 1, ...)", keys)
	}
}

// clusterHandle is a packing machine seen as a host that places its points itself (a Slurm
// cluster): Parallel slots, no GPU pool.
type clusterHandle struct {
	*packHandle
	n int
}

func (c *clusterHandle) Slots() hostctl.Slots { return hostctl.Slots{N: c.n} }

// TestParallelHostRunsItsSlotsWithoutAGPUPool: a parallel host's slots run points side by side,
// whatever their tp, each with its own port and the point's id as the launch's tag; no GPU is set
// (the cluster places them) and no packed event is written.
func TestParallelHostRunsItsSlotsWithoutAGPUPool(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var mu sync.Mutex
	var launches []hostctl.Launch
	w := newWorld(t, func(host string, l hostctl.Launch, n int) behaviour {
		mu.Lock()
		launches = append(launches, l)
		mu.Unlock()
		return behaviour{}
	})
	m := newPackMachine(t, w, "big", 3, 2)
	spec := packSpec(t, "cluster")
	prep, err := Prepare(ctx, db, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	h := &clusterHandle{packHandle: m.handle(prep.SweepID).(*packHandle), n: 3}
	r, err := New(Config{Store: db, Hosts: []Host{h}, Load: w.load, Answer: w.answer,
		CheckInterval: 2 * time.Millisecond, WatchInterval: 5 * time.Millisecond, RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := r.Run(ctx, prep.SweepID, spec); err != nil || out.State != store.SweepDone {
		t.Fatalf("run: %+v %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(launches) != len(spec.Plan().Points) {
		t.Fatalf("%d launches for %d points", len(launches), len(spec.Plan().Points))
	}
	for _, l := range launches {
		if _, set := l.Env["CUDA_VISIBLE_DEVICES"]; set || l.Tag == "" || l.Port < 30000 || l.Port > 30002 {
			t.Errorf("launch tag %q port %d env %v", l.Tag, l.Port, l.Env)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.most < 2 {
		t.Errorf("at most %d point(s) at once on a parallel host of 3 slots", m.most)
	}
	if n := scalarInt(t, db, "SELECT count(*) FROM event_log WHERE kind IN ('packed', 'ran_beside')"); n != 0 {
		t.Errorf("%d packing events for a host that places its points itself", n)
	}
}

func scalarInt(t *testing.T, db *store.DB, q string) int64 {
	t.Helper()
	res, err := db.Query(context.Background(), q)
	if err != nil || len(res.Values) != 1 {
		t.Fatalf("%s: %v", q, err)
	}
	return res.Values[0][0].(int64)
}
