package orchestrator

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

func TestLeasesGoOldestFirstAndHonourCancellation(t *testing.T) {
	l := newLeases()
	ctx := context.Background()
	rel, err := l.acquire(ctx, "m", 5)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int64
	var wg sync.WaitGroup
	for _, prio := range []int64{9, 3, 7} {
		wg.Go(func() {
			r, err := l.acquire(ctx, "m", prio)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, prio)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			r()
		})
	}
	// A waiter that gives up must not keep the machine.
	cctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() { _, err := l.acquire(cctx, "m", 1); gaveUp <- err }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-gaveUp; err == nil {
		t.Error("a cancelled wait got the lease")
	}
	rel()
	rel() // releasing twice is harmless
	wg.Wait()
	if fmt.Sprint(order) != "[3 7 9]" {
		t.Errorf("lease order %v, want oldest sweep first [3 7 9]", order)
	}
	// Another machine is independent; and the machine is free at the end.
	r1, _ := l.acquire(ctx, "other", 1)
	r2, err := l.acquire(ctx, "m", 1)
	if err != nil {
		t.Fatal(err)
	}
	r1()
	r2()
}

// daemonHarness runs a Daemon on a real store with fake hosts.
type daemonHarness struct {
	t     *testing.T
	db    *store.DB
	world *fakeWorld
	packs map[string]*packMachine // by spec host name (world.mu held)
	d     *Daemon
	stop  context.CancelFunc
	done  chan error
	// after counts the AfterSweep calls by sweep id (world.mu held).
	after map[int64]int
}

func newDaemonHarness(t *testing.T) *daemonHarness {
	t.Helper()
	return newDaemonHarnessOn(t, filepath.Join(t.TempDir(), "d.db"), nil)
}

// newDaemonHarnessOn runs the daemon on the store file at path, logging to log (nil: nowhere).
func newDaemonHarnessOn(t *testing.T, path string, log *slog.Logger) *daemonHarness {
	t.Helper()
	db, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	h := &daemonHarness{t: t, db: db, packs: map[string]*packMachine{}, after: map[int64]int{}, world: newWorld(t, func(string, hostctl.Launch, int) behaviour {
		return behaviour{loadDelay: 5 * time.Millisecond}
	})}
	d, err := NewDaemon(DaemonConfig{Store: db, Poll: 10 * time.Millisecond, Log: log, MinEvery: time.Second,
		Runner: Config{Load: h.world.load, Answer: h.world.answer, CheckInterval: 2 * time.Millisecond, WatchInterval: 5 * time.Millisecond,
			SilenceProbe: 200 * time.Millisecond, LivenessTimeout: 300 * time.Millisecond,
			RetryBackoff: time.Millisecond},
		AfterSweep: func(_ context.Context, id int64, spec *sweep.Spec) {
			h.world.mu.Lock()
			defer h.world.mu.Unlock()
			h.after[id]++
		},
		Hosts: func(spec *sweep.Spec, id int64) []Host {
			h.world.mu.Lock()
			defer h.world.mu.Unlock()
			var hs []Host
			for _, sh := range spec.Hosts {
				if m, ok := h.packs[sh.Name]; ok {
					hs = append(hs, m.handle(id))
					continue
				}
				fh, ok := h.world.hosts[sh.Address]
				if !ok {
					fh = h.world.host(sh.Address)
				}
				hs = append(hs, &namedHost{Host: fh, name: sh.Name})
			}
			return hs
		}})
	if err != nil {
		t.Fatal(err)
	}
	h.d = d
	ctx, cancel := context.WithCancel(context.Background())
	h.stop, h.done = cancel, make(chan error, 1)
	go func() { h.done <- d.Run(ctx, nil) }()
	t.Cleanup(func() { cancel(); <-h.done })
	return h
}

// packMachine makes the packing machine the spec host name drives (see packMachine).
func (h *daemonHarness) packMachine(name string, gpus, together int) *packMachine {
	h.world.mu.Lock()
	defer h.world.mu.Unlock()
	m := newPackMachine(h.t, h.world, name, gpus, together)
	h.packs[name] = m
	return m
}

// namedHost gives a shared fake machine the name a spec uses for it.
type namedHost struct {
	Host
	name string
}

func (n *namedHost) Name() string { return n.name }

func daemonSpec(t *testing.T, name, address, extra string) *sweep.Spec {
	t.Helper()
	spec, err := sweep.Parse(name+".yaml", []byte(fmt.Sprintf(`version: 1
name: %s
hosts: [{name: h, address: %s, gpus: 4}]
server: {command: [/opt/sglang/bin/python, -m, sglang.launch_server], args: [--model-path, /m]}
methods: {baseline: [], eagle3: [--speculative-algorithm, EAGLE3]}
matrix: {method: [baseline, eagle3], num_steps: [1, 2, 3], topk: [1], tp: [1]}
workload: {concurrency: [1, 2], requests: 4, input_tokens: 8, output_tokens: 8}
%s`, name, address, extra)))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// claimOrder is the order in which the named sweeps' points were claimed: a sweep's name per claim
// ("aaaabbbb").
func (h *daemonHarness) claimOrder(names ...string) string {
	h.t.Helper()
	rows, err := h.db.Query(context.Background(), `SELECT s.name FROM events e JOIN sweeps s ON s.id = e.sweep_id
		WHERE e.kind = 'state' AND e.detail LIKE 'pending -> running%' ORDER BY e.id`)
	if err != nil {
		h.t.Fatal(err)
	}
	var b strings.Builder
	for _, v := range rows.Values {
		if name := v[0].(string); slices.Contains(names, name) {
			b.WriteString(name)
		}
	}
	return b.String()
}

func (h *daemonHarness) waitState(id int64, want store.SweepState) {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		sw, err := h.db.Sweep(context.Background(), id)
		if err == nil && sw.State == want {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("sweep %d is %s, want %s", id, sw.State, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDaemonRunsSweepsSharingAMachineOneAfterTheOther(t *testing.T) {
	h := newDaemonHarness(t)
	ctx := context.Background()
	a, err := Submit(ctx, h.db, daemonSpec(t, "a", "m1.example", ""), SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Submit(ctx, h.db, daemonSpec(t, "b", "m1.example", ""), SubmitOptions{})
	c, _ := Submit(ctx, h.db, daemonSpec(t, "c", "m2.example", ""), SubmitOptions{})
	for _, sw := range []store.Sweep{a, b, c} {
		h.waitState(sw.ID, store.SweepDone)
		if got, _ := h.db.Sweep(ctx, sw.ID); got.Holder.Kind != store.HolderDaemon || got.Holder.PID != os.Getpid() {
			t.Errorf("sweep %s: holder %+v, want this daemon", sw.Name, got.Holder)
		}
	}
	// The fake world fails the test on any Start while the machine's server still runs; on top, a's
	// points all come before b's on the shared machine.
	var seq []string
	h.world.mu.Lock()
	for _, l := range h.world.levels {
		if l.host == "m1.example" {
			seq = append(seq, l.argv)
		}
	}
	h.world.mu.Unlock()
	if len(seq) != 2*4*2 {
		t.Fatalf("%d levels on the shared machine, want 16", len(seq))
	}
	if got := h.claimOrder("a", "b"); got != "aaaabbbb" {
		t.Errorf("claims on the shared machine in order %s, want a's then b's", got)
	}
	// Each machine restored once no sweep used it any more. The restore follows the sweep's last
	// state change (the daemon restores a machine once its last sweep has ended), so it is waited for.
	unrestored := func() []string {
		h.world.mu.Lock()
		defer h.world.mu.Unlock()
		var out []string
		for name, fh := range h.world.hosts {
			if fh.restored < 1 {
				out = append(out, name)
			}
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(unrestored()) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	for _, name := range unrestored() {
		t.Errorf("machine %s never restored", name)
	}
	// Each ended sweep was handed to AfterSweep once, after its machines were restored (a watch is
	// judged there).
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		h.world.mu.Lock()
		n := len(h.after)
		h.world.mu.Unlock()
		if n == 3 {
			break
		}
	}
	h.world.mu.Lock()
	defer h.world.mu.Unlock()
	for _, sw := range []store.Sweep{a, b, c} {
		if h.after[sw.ID] != 1 {
			t.Errorf("sweep %s: AfterSweep called %d times, want once", sw.Name, h.after[sw.ID])
		}
	}
}

func TestDaemonHoldsPointsOutsideTheWindow(t *testing.T) {
	h := newDaemonHarness(t)
	ctx := context.Background()
	now := time.Now().UTC()
	closed := fmt.Sprintf("schedule: {window: \"%s-%s\"}", now.Add(2*time.Hour).Format("15:04"), now.Add(3*time.Hour).Format("15:04"))
	sw, err := Submit(ctx, h.db, daemonSpec(t, "w", "m3.example", closed), SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.waitState(sw.ID, store.SweepRunning)
	time.Sleep(200 * time.Millisecond)
	if got, _ := h.db.Sweep(ctx, sw.ID); got.Running+got.Done != 0 {
		t.Errorf("a point started outside the window: %+v", got)
	}
	act := h.d.Activity(sw.ID)
	if !strings.Contains(act["h"].Detail, "waiting for the window") {
		t.Errorf("activity %+v, want waiting for the window", act)
	}
}

func TestDaemonScheduleFiresAndSkipsWhileItsSweepRuns(t *testing.T) {
	h := newDaemonHarness(t)
	ctx := context.Background()
	h.world.mu.Lock()
	h.world.behave = func(string, hostctl.Launch, int) behaviour { return behaviour{loadDelay: 150 * time.Millisecond} }
	h.world.mu.Unlock()
	tmpl, err := Submit(ctx, h.db, daemonSpec(t, "nightly", "m4.example", ""), SubmitOptions{Cron: "@every 1s", MinEvery: time.Second})
	if err != nil || tmpl.State != store.SweepScheduled || tmpl.Points != 0 {
		t.Fatalf("template %+v %v", tmpl, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		inst, _ := h.db.Query(ctx, "SELECT count(*) FROM sweeps WHERE schedule_id = ? AND state = 'done'", tmpl.ID)
		skip, _ := h.db.Query(ctx, "SELECT count(*) FROM events WHERE sweep_id = ? AND kind = 'schedule_skipped'", tmpl.ID)
		if inst.Values[0][0].(int64) >= 1 && skip.Values[0][0].(int64) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no done instance and skipped firing after 30 s: %v %v", inst.Values, skip.Values)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := h.db.CancelSweep(ctx, tmpl.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	rows, _ := h.db.Query(ctx, "SELECT name FROM sweeps WHERE schedule_id = ?", tmpl.ID)
	for _, v := range rows.Values {
		if !strings.HasPrefix(v[0].(string), "nightly@") {
			t.Errorf("instance named %v", v[0])
		}
	}
}

// syncBuffer is a log sink safe for the daemon's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDaemonGoesOnPastAStoredBadSchedule: a stored schedule robfig/cron panics on ("TZ=", stored by
// a version that did not refuse it) made every daemon start crash. Now the daemon logs it, skips it
// and runs the queue.
func TestDaemonGoesOnPastAStoredBadSchedule(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "d.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	spec := daemonSpec(t, "broken", "m5.example", "")
	ns := NewSweepOf(spec, spec.Plan())
	ns.Schedule, ns.State = "TZ=", store.SweepScheduled
	bad, err := db.CreateSweep(ctx, ns, HostsOf(spec), nil)
	if err != nil {
		t.Fatal(err)
	}
	good, err := Submit(ctx, db, daemonSpec(t, "good", "m6.example", ""), SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	h := newDaemonHarnessOn(t, path, slog.New(slog.NewTextHandler(&logs, nil)))
	h.waitState(good.ID, store.SweepDone)
	if l := logs.String(); !strings.Contains(l, "bad schedule") || !strings.Contains(l, fmt.Sprintf("sweep=%d", bad)) ||
		!strings.Contains(l, "names no zone") {
		t.Errorf("the log does not name the bad schedule:\n%s", l)
	}
	if sw, err := h.db.Sweep(ctx, bad); err != nil || sw.State != store.SweepScheduled {
		t.Errorf("the bad schedule: %+v %v, want it left scheduled", sw, err)
	}
}

// blockingStore holds a schedule's firing inside LatestInstance until released.
type blockingStore struct {
	*store.DB
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	order   chan string
}

func (b *blockingStore) LatestInstance(ctx context.Context, id int64) (store.Sweep, error) {
	b.once.Do(func() { close(b.entered) })
	<-b.release
	defer func() { b.order <- "firing done" }()
	return b.DB.LatestInstance(ctx, id)
}

// TestDaemonWaitsForAFiringAtShutdown: a schedule firing when the daemon is stopped finishes before
// Run returns (the caller closes the store next): robfig/cron's Stop does not wait for running jobs,
// its Done channel does.
func TestDaemonWaitsForAFiringAtShutdown(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "d.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := Submit(ctx, db, daemonSpec(t, "nightly", "m4.example", ""), SubmitOptions{Cron: "@every 1s", MinEvery: time.Second}); err != nil {
		t.Fatal(err)
	}
	bs := &blockingStore{DB: db, entered: make(chan struct{}), release: make(chan struct{}), order: make(chan string, 4)}
	d, err := NewDaemon(DaemonConfig{Store: bs, Poll: 10 * time.Millisecond, MinEvery: time.Second,
		Hosts: func(*sweep.Spec, int64) []Host { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = d.Run(rctx, nil); bs.order <- "run returned"; close(done) }()
	<-bs.entered // a firing is running
	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second): // Run still waits: let the firing finish
	}
	close(bs.release)
	<-done
	if first := <-bs.order; first != "firing done" {
		t.Fatalf("Run returned before the firing ended (%q came first)", first)
	}
}

// TestDaemonGroupSharesItsNodesMachines: a host group is each of its nodes' machines: a sweep of a
// group over m1 and m2 and a sweep of m2 alone take turns (the older first), and their machine keys
// are the nodes' own.
func TestDaemonGroupSharesItsNodesMachines(t *testing.T) {
	h := newDaemonHarness(t)
	ctx := context.Background()
	group := daemonSpec(t, "a", "m1.example", "")
	text := strings.Replace(string(group.Source), "hosts: [{name: h, address: m1.example, gpus: 4}]",
		"hosts: [{name: h, gpus: 4, nodes: [{address: m2.example}, {address: m1.example}]}]", 1)
	group, err := sweep.Parse("a.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := h.d.machineKeys(group.Hosts[0]); strings.Join(got, " ") != "ssh://@m1.example/sglang.service ssh://@m2.example/sglang.service" {
		t.Errorf("group keys %q, want each node's, sorted", got)
	}
	a, err := Submit(ctx, h.db, group, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Submit(ctx, h.db, daemonSpec(t, "b", "m2.example", ""), SubmitOptions{})
	for _, sw := range []store.Sweep{a, b} {
		h.waitState(sw.ID, store.SweepDone)
	}
	if got := h.claimOrder("a", "b"); got != "aaaabbbb" {
		t.Errorf("claims in order %s, want the group's sweep's, then the one of its node m2", got)
	}
}

// TestDaemonStoppedDuringRecoveryRecoversAndExitsCleanly: a stop asked for before recovery ends
// (a SIGTERM right after start) is a clean stop, not "store: list sweeps: context canceled", and
// the interrupted sweep is still put back in the queue.
func TestDaemonStoppedDuringRecoveryRecoversAndExitsCleanly(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "d.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sub, err := Submit(ctx, db, daemonSpec(t, "interrupted", "m4.example", ""), SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ClaimNextSweep(ctx); err != nil { // running when the last daemon died
		t.Fatal(err)
	}
	w := newWorld(t, func(string, hostctl.Launch, int) behaviour { return behaviour{} })
	d, err := NewDaemon(DaemonConfig{Store: db, Poll: 10 * time.Millisecond,
		Hosts: func(spec *sweep.Spec, _ int64) []Host {
			return []Host{&namedHost{Host: w.host(spec.Hosts[0].Address), name: spec.Hosts[0].Name}}
		}})
	if err != nil {
		t.Fatal(err)
	}
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	if err := d.Run(stopped, func() { t.Error("ready after a stop was asked for") }); err != nil {
		t.Fatalf("Run asked to stop during recovery: %v, want a clean stop", err)
	}
	sw, err := db.Sweep(ctx, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sw.State != store.SweepQueued {
		t.Errorf("the interrupted sweep is %s after recovery, want queued", sw.State)
	}
}
