package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

const testSpec = `version: 1
name: orch-test
hosts:
  - {name: small, address: small.example, gpus: 2}
  - {name: big, address: big.example, gpus: 8}
server:
  command: [/opt/sglang/bin/python, -m, sglang.launch_server]
  args: [--model-path, /models/m]
  port: 30000
  stop_timeout: 5s
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
matrix:
  method: [baseline, eagle3]
  num_steps: [1, 2, 3]
  topk: [1]
  tp: [1, 8]
workload:
  concurrency: [1, 4]
  requests: 8
  input_tokens: 16
  output_tokens: 8
  repeats: REPEATS
`

func loadSpec(t *testing.T, repeats int) *sweep.Spec {
	t.Helper()
	spec, err := sweep.Parse("test.yaml", []byte(strings.Replace(testSpec, "REPEATS", fmt.Sprint(repeats), 1)))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

type harness struct {
	t     *testing.T
	db    *store.DB
	world *fakeWorld
	spec  *sweep.Spec
	mu    sync.Mutex
	ups   []Update
}

func newHarness(t *testing.T, repeats int, behave func(host string, l hostctl.Launch, n int) behaviour) *harness {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	h := &harness{t: t, db: db, world: newWorld(t, behave), spec: loadSpec(t, repeats)}
	return h
}

func (h *harness) run(ctx context.Context, opts ...func(*Config)) (Prepared, Outcome, error) {
	h.t.Helper()
	// The run is what a test interrupts, not its preparation: with the same context, a deadline of
	// 60 ms ran out in Prepare on a loaded machine.
	prep, err := Prepare(context.WithoutCancel(ctx), h.db, h.spec, false)
	if err != nil {
		return prep, Outcome{}, err
	}
	var hosts []Host
	for _, sh := range h.spec.Hosts {
		fh, ok := h.world.hosts[sh.Name]
		if !ok {
			fh = h.world.host(sh.Name)
		}
		hosts = append(hosts, fh)
	}
	cfg := Config{Store: h.db, Hosts: hosts, Load: h.world.load, Answer: h.world.answer, CheckInterval: 2 * time.Millisecond, WatchInterval: 5 * time.Millisecond,
		SilenceProbe: 200 * time.Millisecond, LivenessTimeout: 300 * time.Millisecond,
		RetryBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		Observe: func(u Update) { h.mu.Lock(); h.ups = append(h.ups, u); h.mu.Unlock() }}
	for _, o := range opts {
		o(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	out, err := r.Run(ctx, prep.SweepID, h.spec)
	return prep, out, err
}

func (h *harness) query(q string, args ...any) [][]any {
	h.t.Helper()
	rows, err := h.db.Query(context.Background(), q, args...)
	if err != nil {
		h.t.Fatalf("%s: %v", q, err)
	}
	return rows.Values
}

func (h *harness) scalar(q string, args ...any) any {
	h.t.Helper()
	v := h.query(q, args...)
	if len(v) != 1 || len(v[0]) != 1 {
		h.t.Fatalf("%s: want one value, got %v", q, v)
	}
	return v[0][0]
}

func TestFullSweepPlacesByTPAndRecordsEverything(t *testing.T) {
	h := newHarness(t, 2, nil)
	_, out, err := h.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	plan := h.spec.Plan()
	if out.State != store.SweepDone || out.Done != len(plan.Points) || out.Failed != 0 {
		t.Fatalf("outcome %+v, want all %d points done", out, len(plan.Points))
	}
	// Every run exactly once: points x levels x repeats, all ok.
	if n := h.scalar("SELECT count(*) FROM run_summary WHERE status = 'ok'"); n != int64(len(plan.Points)*2*2) {
		t.Errorf("ok runs %v, want %d", n, len(plan.Points)*2*2)
	}
	if n := h.scalar("SELECT count(*) FROM run_summary WHERE status <> 'ok'"); n != int64(0) {
		t.Errorf("non-ok runs: %v", n)
	}
	// tp=8 points ran only on the big host; both hosts worked.
	if n := h.scalar("SELECT count(*) FROM point_summary WHERE tp = 8 AND host <> 'big'"); n != int64(0) {
		t.Errorf("%v tp=8 points ran on the small host", n)
	}
	if n := h.scalar("SELECT count(DISTINCT host) FROM point_summary"); n != int64(2) {
		t.Errorf("points ran on %v hosts, want 2", n)
	}
	// Speedup against the baseline at the same tp and concurrency: 1+0.3*steps in the fake.
	for _, row := range h.query("SELECT num_steps, speedup, accept_length FROM run_summary WHERE method = 'eagle3'") {
		steps, sp := row[0].(int64), row[1].(float64)
		if want := 1 + 0.3*float64(steps); sp < want-1e-9 || sp > want+1e-9 {
			t.Errorf("steps %d: speedup %v, want %v", steps, sp, want)
		}
		if row[2] == nil {
			t.Errorf("steps %d: no accept length", steps)
		}
	}
	// Effective args, provenance and load time are recorded for every point.
	if n := h.scalar(`SELECT count(*) FROM point_summary WHERE effective_args IS NULL OR provenance IS NULL
		OR load_s IS NULL OR json_extract(provenance, '$.engine_version') <> '0.5.9-fake'`); n != int64(0) {
		t.Errorf("%v points lack effective args, provenance or load time", n)
	}
	// Every host restored; each point started, was ready and stopped once.
	for name, fh := range h.world.hosts {
		if fh.restored != 1 {
			t.Errorf("host %s restored %d times", name, fh.restored)
		}
	}
	for _, kind := range []string{"start", "ready", "stop"} {
		if n := h.scalar("SELECT count(*) FROM event_log WHERE kind = ?", kind); n != int64(len(plan.Points)) {
			t.Errorf("%v %s events, want %d", n, kind, len(plan.Points))
		}
	}
	if n := h.scalar("SELECT count(*) FROM event_log WHERE kind = 'restored'"); n != int64(2) {
		t.Errorf("%v restored events, want 2", n)
	}
	// Baselines first: at each tp, the first point claimed is the baseline (so speedups are
	// computable from the start).
	first := map[int64]int64{}
	for _, row := range h.query(`SELECT p.tp, p.baseline FROM events e JOIN points p ON p.id = e.point_ref
		WHERE e.kind = 'state' AND e.detail LIKE 'pending -> running%' ORDER BY e.id`) {
		if _, ok := first[row[0].(int64)]; !ok {
			first[row[0].(int64)] = row[1].(int64)
		}
	}
	if len(first) != 2 || first[1] != 1 || first[8] != 1 {
		t.Errorf("first point claimed per tp (tp -> baseline flag): %v, want baselines", first)
	}
}

func TestDeterministicFailuresDoNotRetryAndTheSweepGoesOn(t *testing.T) {
	classes := map[string]hostctl.Class{"1": hostctl.ClassBadArgs, "2": hostctl.ClassOOM}
	h := newHarness(t, 1, func(host string, l hostctl.Launch, n int) behaviour {
		steps := argAfter(l.Argv, "--speculative-num-steps")
		if c, ok := classes[steps]; ok && argAfter(l.Argv, "--tp-size") == "1" {
			return behaviour{readyErr: &hostctl.Failure{Class: c, Detail: "server exited",
				Evidence: []string{"launch_server.py: error: boom"}}}
		}
		if steps == "3" && argAfter(l.Argv, "--tp-size") == "1" {
			return behaviour{crashAt: 2, crash: &hostctl.Failure{Class: hostctl.ClassCrashDuringLoad,
				Detail: "main process exited, code=killed, status=9/KILL", Evidence: []string{"Scheduler hit an exception"}}}
		}
		return behaviour{}
	})
	_, out, err := h.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.State != store.SweepDone || out.Failed != 3 || out.Done != len(h.spec.Plan().Points)-3 {
		t.Fatalf("outcome %+v", out)
	}
	got := map[string]string{}
	for _, row := range h.query("SELECT num_steps, failure_class, attempts, failure_detail FROM point_summary WHERE state = 'failed' AND tp = 1") {
		got[fmt.Sprint(row[0])] = fmt.Sprint(row[1])
		if row[2] != int64(1) {
			t.Errorf("steps %v: %v attempts, deterministic failures must not retry", row[0], row[2])
		}
		if !strings.Contains(fmt.Sprint(row[3]), "\n") {
			t.Errorf("steps %v: failure detail lacks evidence lines: %q", row[0], row[3])
		}
	}
	want := map[string]string{"1": "bad_args", "2": "oom", "3": "crash_during_load"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("failure classes %v, want %v", got, want)
	}
	// The crash during load: level 1 ok, level 2 recorded as failed, no more levels.
	rows := h.query("SELECT concurrency, status FROM run_summary WHERE num_steps = 3 AND tp = 1 ORDER BY concurrency")
	if fmt.Sprint(rows) != "[[1 ok] [4 failed]]" {
		t.Errorf("runs of the crashed point: %v", rows)
	}
	if n := h.scalar("SELECT count(*) FROM event_log WHERE kind = 'failure'"); n != int64(3) {
		t.Errorf("%v failure events, want 3", n)
	}
}

func TestHostTroubleRetriesThenGivesUp(t *testing.T) {
	// The small host cannot be reached for its first two launches; the big one never for tp=8 eagle3 steps=1.
	h := newHarness(t, 1, func(host string, l hostctl.Launch, n int) behaviour {
		if host == "small" && n <= 2 && argAfter(l.Argv, "--speculative-algorithm") == "" {
			return behaviour{startErr: errors.New("ssh: dial tcp 10.231.1.2:22: connect: no route to host")}
		}
		if argAfter(l.Argv, "--tp-size") == "8" && argAfter(l.Argv, "--speculative-num-steps") == "1" {
			return behaviour{startErr: &hostctl.Failure{Class: hostctl.ClassHostUnreachable, Detail: "connection lost"}}
		}
		return behaviour{}
	})
	_, out, err := h.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.Failed != 1 {
		t.Fatalf("outcome %+v, want exactly the unreachable point failed", out)
	}
	row := h.query("SELECT failure_class, attempts FROM point_summary WHERE state = 'failed'")[0]
	if row[0] != "host_unreachable" || row[1] != int64(3) {
		t.Errorf("failed point: %v, want host_unreachable after 3 attempts", row)
	}
	if n := h.scalar("SELECT count(*) FROM event_log WHERE kind = 'host_down'"); n.(int64) < 3 {
		t.Errorf("%v host_down events", n)
	}
	if n := h.scalar("SELECT count(*) FROM run_summary WHERE status = 'ok'"); n != int64((len(h.spec.Plan().Points)-1)*2) {
		t.Errorf("ok runs %v", n)
	}
}

func TestStopTimeoutSIGKILLIsAnEvent(t *testing.T) {
	h := newHarness(t, 1, func(host string, l hostctl.Launch, n int) behaviour {
		return behaviour{stop: hostctl.StopResult{Duration: 5 * time.Second, SIGKILL: true,
			Class: hostctl.ClassStopTimeoutSIGKILL, Evidence: []string{"State 'stop-sigterm' timed out. Killing."}}}
	})
	_, out, err := h.run(context.Background())
	if err != nil || out.State != store.SweepDone {
		t.Fatalf("%+v %v", out, err)
	}
	n := h.scalar("SELECT count(*) FROM event_log WHERE kind = 'stop_timeout_sigkill' AND detail LIKE '%timed out. Killing.%'")
	if n != int64(len(h.spec.Plan().Points)) {
		t.Errorf("%v stop_timeout_sigkill events, want one per point", n)
	}
}

// claimThenCancel is a store whose claim of the second point commits, then sees the run cancelled:
// as the real store may report a cancellation that came during a claim it committed.
type claimThenCancel struct {
	*store.DB
	cancel context.CancelFunc
	n      int
}

func (s *claimThenCancel) ClaimNextPoint(ctx context.Context, sweepID int64, host string) (store.Point, error) {
	p, err := s.DB.ClaimNextPoint(context.WithoutCancel(ctx), sweepID, host)
	if s.n++; s.n == 2 && err == nil {
		s.cancel()
		return p, ctx.Err()
	}
	return p, err
}

// TestInterruptDuringAClaimReleasesThePoint: a run cancelled while it claims a point leaves that
// point pending, not running with nobody to release it (TestInterruptThenResumeRunsEverythingExactlyOnce
// failed so about once in a hundred runs).
func TestInterruptDuringAClaimReleasesThePoint(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHarness(t, 1, func(host string, l hostctl.Launch, n int) behaviour { return behaviour{} })
	_, out, err := h.run(ctx, func(c *Config) { c.Store = &claimThenCancel{DB: h.db, cancel: cancel} })
	if err != nil {
		t.Fatal(err)
	}
	if !out.Interrupted || out.Running != 0 {
		t.Fatalf("outcome %+v, want interrupted with nothing running", out)
	}
}

func TestInterruptThenResumeRunsEverythingExactlyOnce(t *testing.T) {
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHarness(t, 1, func(host string, l hostctl.Launch, n int) behaviour {
		return behaviour{loadDelay: 20 * time.Millisecond}
	})
	_, out, err := h.run(ctx, func(c *Config) {
		c.Observe = func(u Update) {
			// Interrupt in the middle of the second point's load.
			if u.Phase == PhaseLoad && strings.HasPrefix(u.Label, "eagle3") {
				once.Do(cancel)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Interrupted || out.State != store.SweepInterrupted || out.Running != 0 {
		t.Fatalf("outcome %+v, want interrupted with nothing running", out)
	}
	for name, fh := range h.world.hosts {
		if fh.restored != 1 || (fh.running != nil && !fh.running.stopped) {
			t.Errorf("host %s after interrupt: restored %d, server left running %v", name, fh.restored, fh.running != nil && !fh.running.stopped)
		}
	}
	if n := h.scalar("SELECT count(*) FROM point_summary WHERE failure_class = 'interrupted' AND state = 'pending'"); n.(int64) < 1 {
		t.Errorf("no interrupted point went back to pending")
	}

	// Resume with the same spec: same sweep, every run exactly once.
	h.world.behave = func(string, hostctl.Launch, int) behaviour { return behaviour{} }
	prep, out, err := h.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !prep.Resumed || out.State != store.SweepDone || out.Done != len(h.spec.Plan().Points) {
		t.Fatalf("resume: %+v %+v\nnot done: %v", prep, out, h.query(`SELECT point_id, state, coalesce(failure_class, ''), coalesce(failure_detail, '')
			FROM point_summary WHERE state <> 'done'`))
	}
	if n := h.scalar("SELECT count(DISTINCT sweep_id) FROM run_summary"); n != int64(1) {
		t.Errorf("runs in %v sweeps", n)
	}
	rows := h.query(`SELECT point_id, concurrency, repeat, count(*) FROM run_summary WHERE status = 'ok'
		GROUP BY 1, 2, 3 HAVING count(*) <> 1`)
	if len(rows) != 0 {
		t.Errorf("runs recorded more than once: %v", rows)
	}
	if n := h.scalar("SELECT count(*) FROM run_summary WHERE status = 'ok'"); n != int64(len(h.spec.Plan().Points)*2) {
		t.Errorf("ok runs %v, want %d", n, len(h.spec.Plan().Points)*2)
	}
}

func TestPrepareRefusesChangedSpecAndFinishedSweeps(t *testing.T) {
	h := newHarness(t, 1, nil)
	if _, _, err := h.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := Prepare(ctx, h.db, h.spec, false); !errors.Is(err, ErrFinished) {
		t.Errorf("same spec after done: %v, want ErrFinished", err)
	}
	changed := loadSpec(t, 3)
	_, err := Prepare(ctx, h.db, changed, false)
	var se *SweepExistsError
	if !errors.Is(err, ErrSpecChanged) || !errors.As(err, &se) || se.ID != 1 || se.NewHash != changed.Plan().SpecHash {
		t.Errorf("changed spec: %v, want a *SweepExistsError with ErrSpecChanged", err)
	}
	if strings.Contains(err.Error(), "--") {
		t.Errorf("changed spec: %v: the orchestrator names no CLI flag (the CLI words it)", err)
	}
	prep, err := Prepare(ctx, h.db, changed, true)
	if err != nil || prep.Resumed {
		t.Fatalf("--new: %+v %v", prep, err)
	}
	if sw, _ := h.db.LatestSweepByName(ctx, "orch-test"); sw.ID != prep.SweepID || sw.State != store.SweepQueued {
		t.Errorf("latest sweep %+v, want the new one, queued", sw)
	}
}

func argAfter(argv []string, flag string) string {
	for i, a := range argv {
		if a == flag && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}

func TestHostLostDuringLoadRetriesThePoint(t *testing.T) {
	h := newHarness(t, 1, func(host string, l hostctl.Launch, n int) behaviour {
		if n == 1 && argAfter(l.Argv, "--speculative-num-steps") == "2" && argAfter(l.Argv, "--tp-size") == "1" {
			return behaviour{crashAt: 2, crash: &hostctl.Failure{Class: hostctl.ClassHostUnreachable, Detail: "connection lost"}}
		}
		return behaviour{}
	})
	_, out, err := h.run(context.Background())
	if err != nil || out.State != store.SweepDone || out.Failed != 0 {
		t.Fatalf("%+v %v", out, err)
	}
	row := h.query("SELECT attempts FROM point_summary WHERE num_steps = 2 AND tp = 1")[0]
	if row[0] != int64(2) {
		t.Errorf("attempts %v, want 2", row[0])
	}
	// The lost attempt's level-1 run is kept as superseded; the ok runs are the second attempt's.
	got := h.query("SELECT status, count(*) FROM run_summary WHERE num_steps = 2 AND tp = 1 GROUP BY status ORDER BY status")
	if fmt.Sprint(got) != "[[ok 2] [superseded 1]]" {
		t.Errorf("runs of the retried point: %v", got)
	}
}

func TestRefusingHostIsGivenUpAndOthersTakeItsPoints(t *testing.T) {
	h := newHarness(t, 1, func(host string, l hostctl.Launch, n int) behaviour {
		if host == "small" {
			return behaviour{startErr: &hostctl.HostKeyError{Msg: "host key for small.example changed"}}
		}
		return behaviour{}
	})
	_, out, err := h.run(context.Background())
	if err != nil || out.State != store.SweepDone || out.Done != len(h.spec.Plan().Points) {
		t.Fatalf("%+v %v", out, err)
	}
	if n := h.scalar("SELECT count(*) FROM point_summary WHERE host = 'small' AND state = 'done'"); n != int64(0) {
		t.Errorf("%v points done on the refusing host", n)
	}
	if h.world.hosts["small"].launches != 1 {
		t.Errorf("refusing host tried %d times, want 1", h.world.hosts["small"].launches)
	}
	if n := h.scalar("SELECT count(*) FROM event_log WHERE kind = 'host_refused' AND host = 'small'"); n != int64(1) {
		t.Errorf("%v host_refused events", n)
	}
}

func TestCancelFromTheStoreStopsTheRun(t *testing.T) {
	h := newHarness(t, 1, func(string, hostctl.Launch, int) behaviour { return behaviour{loadDelay: 30 * time.Millisecond} })
	var once sync.Once
	var prep Prepared
	prep, out, err := h.run(context.Background(), func(c *Config) {
		c.Observe = func(u Update) {
			if u.Phase == PhaseLoad && strings.HasPrefix(u.Label, "eagle3") {
				// Another process (specsweep cancel) marks the sweep cancelled.
				once.Do(func() {
					sw, _ := h.db.LatestSweepByName(context.Background(), "orch-test")
					if err := h.db.SetSweepState(context.Background(), sw.ID, store.SweepCancelled, "by test"); err != nil {
						t.Error(err)
					}
				})
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = prep
	if out.State != store.SweepCancelled || out.Cancelled == 0 || out.Pending != 0 || out.Running != 0 {
		t.Fatalf("outcome %+v, want cancelled with no pending or running point", out)
	}
	for name, fh := range h.world.hosts {
		if fh.restored != 1 || (fh.running != nil && !fh.running.stopped) {
			t.Errorf("host %s after cancel: restored %d times, server left running %v", name, fh.restored, fh.running != nil && !fh.running.stopped)
		}
	}
	if s := h.scalar("SELECT state FROM sweeps"); s != "cancelled" {
		t.Errorf("sweep state %v", s)
	}
}

func TestBeforePointGatesEveryPoint(t *testing.T) {
	h := newHarness(t, 1, nil)
	var mu sync.Mutex
	held := map[string]bool{}
	calls := 0
	_, out, err := h.run(context.Background(), func(c *Config) {
		c.BeforePoint = func(ctx context.Context, host string) (func(), error) {
			mu.Lock()
			defer mu.Unlock()
			if held[host] {
				t.Errorf("host %s: BeforePoint while its previous lease is held", host)
			}
			held[host] = true
			calls++
			return func() { mu.Lock(); held[host] = false; mu.Unlock() }, nil
		}
	})
	if err != nil || out.State != store.SweepDone {
		t.Fatalf("%+v %v", out, err)
	}
	// One lease per point, plus one per host for the final look that finds nothing.
	if want := len(h.spec.Plan().Points) + 2; calls != want {
		t.Errorf("%d BeforePoint calls, want %d", calls, want)
	}
	for host, v := range held {
		if v {
			t.Errorf("host %s: lease never released", host)
		}
	}
}

func TestHungServerIsACrashDuringLoad(t *testing.T) {
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hung.Close()
	h := newHarness(t, 1, func(host string, l hostctl.Launch, n int) behaviour {
		if argAfter(l.Argv, "--speculative-num-steps") == "3" && argAfter(l.Argv, "--tp-size") == "1" {
			return behaviour{hangURL: hung.URL}
		}
		return behaviour{}
	})
	_, out, err := h.run(context.Background())
	if err != nil || out.Failed != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	row := h.query("SELECT failure_class, failure_detail FROM point_summary WHERE state = 'failed'")[0]
	if row[0] != "crash_during_load" || !strings.Contains(row[1].(string), "server hung") {
		t.Errorf("hung point: %v", row)
	}
}

// TestLevelWithFailedRequestsIsNotOK: a level counts only when every measured request completed; a
// level where some failed (the server alive: its /health_generate answers) is recorded failed with
// its counts, and the point goes on.
func TestLevelWithFailedRequestsIsNotOK(t *testing.T) {
	alive := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health_generate" {
			t.Errorf("probe of %s", r.URL.Path)
		}
	}))
	defer alive.Close()
	h := newHarness(t, 1, func(host string, l hostctl.Launch, n int) behaviour {
		if argAfter(l.Argv, "--speculative-num-steps") == "3" && argAfter(l.Argv, "--tp-size") == "1" {
			return behaviour{partial: 2, aliveURL: alive.URL}
		}
		return behaviour{}
	})
	if _, _, err := h.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows := h.query(`SELECT status, completed, failed FROM run_summary r JOIN point_summary p USING (sweep_id, point_id)
		WHERE r.failed > 0`)
	if len(rows) == 0 {
		t.Fatal("no run with failed requests recorded")
	}
	for _, row := range rows {
		if row[0] != "failed" || row[2] != int64(2) {
			t.Errorf("a level with failed requests: %v, want status failed with 2 failed", row)
		}
	}
	if n := h.query("SELECT count(*) FROM run_summary WHERE status = 'ok' AND failed > 0")[0][0]; n != int64(0) {
		t.Errorf("%v ok runs with failed requests", n)
	}
}

// TestSilentHangIsNamedQuickly: streams that stop without failing (a hung scheduler; /health of
// newer releases still answers) are seen by the liveness probe: after SilenceProbe without data,
// /health_generate does not answer within LivenessTimeout, and the point fails as a crash during
// load saying so, instead of the level waiting for the requests' stall timeouts.
func TestSilentHangIsNamedQuickly(t *testing.T) {
	var probed atomic.Int32
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health_generate" {
			probed.Add(1)
		}
		<-r.Context().Done()
	}))
	defer hung.Close()
	h := newHarness(t, 1, func(host string, l hostctl.Launch, n int) behaviour {
		if argAfter(l.Argv, "--speculative-num-steps") == "3" && argAfter(l.Argv, "--tp-size") == "1" {
			return behaviour{silent: true, hangURL: hung.URL}
		}
		return behaviour{}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, out, err := h.run(ctx); err != nil || out.Failed != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	row := h.query("SELECT failure_class, failure_detail FROM point_summary WHERE state = 'failed'")[0]
	if row[0] != "crash_during_load" || !strings.Contains(row[1].(string), "no request got any data") ||
		!strings.Contains(row[1].(string), "/health_generate") {
		t.Errorf("silently hung point: %v", row)
	}
	if probed.Load() == 0 {
		t.Error("/health_generate was never probed")
	}
}

// TestLaunchCarriesTheSpecsTimeouts: every start gets server.ready_timeout, stop_timeout and
// gpu_wait as the spec says them.
func TestLaunchCarriesTheSpecsTimeouts(t *testing.T) {
	var mu sync.Mutex
	var seen []hostctl.Launch
	h := newHarness(t, 1, func(host string, l hostctl.Launch, n int) behaviour {
		mu.Lock()
		seen = append(seen, l)
		mu.Unlock()
		return behaviour{}
	})
	h.spec.Server.GPUWait = 7 * time.Second
	h.spec.Server.ReadyTimeout = 3 * time.Minute
	if _, out, err := h.run(context.Background()); err != nil || out.State != store.SweepDone {
		t.Fatalf("%+v %v", out, err)
	}
	if len(seen) == 0 {
		t.Fatal("no start")
	}
	for _, l := range seen {
		if l.GPUWait != 7*time.Second || l.ReadyTimeout != 3*time.Minute || l.StopTimeout != 5*time.Second {
			t.Fatalf("launch timeouts: gpu_wait %v, ready %v, stop %v", l.GPUWait, l.ReadyTimeout, l.StopTimeout)
		}
	}
}

// TestServerStopReachesTheLaunch: server.stop decides every point's Launch.Kill: kill (the default)
// has each server killed at its stop, drain has it drained.
func TestServerStopReachesTheLaunch(t *testing.T) {
	for _, c := range []struct {
		stop string
		kill bool
	}{{"", true}, {sweep.StopDrain, false}} {
		var mu sync.Mutex
		kills := map[bool]int{}
		h := newHarness(t, 1, func(host string, l hostctl.Launch, n int) behaviour {
			mu.Lock()
			kills[l.Kill]++
			mu.Unlock()
			return behaviour{}
		})
		h.spec.Server.Stop = c.stop
		if _, out, err := h.run(context.Background()); err != nil || out.State != store.SweepDone {
			t.Fatalf("server.stop %q: %+v %v", c.stop, out, err)
		}
		mu.Lock()
		if kills[!c.kill] != 0 || kills[c.kill] != len(h.spec.Plan().Points) {
			t.Errorf("server.stop %q: launches by Kill %v, want all %d with Kill %v", c.stop, kills, len(h.spec.Plan().Points), c.kill)
		}
		mu.Unlock()
	}
}

// TestRefusedProbeWaitsForTheCause: a server whose death its unit shows only after the runner's
// checks of an aborted level (a Slurm job's ranks, polled) refuses the liveness probe: that is a
// server gone, not hung, and the runner waits for the unit's cause (CI, 2026-12-07:
// TestSlurmSweepSpansNodes's killed rank was named "server hung ... connection refused").
func TestRefusedProbeWaitsForTheCause(t *testing.T) {
	h := newHarness(t, 1, func(host string, l hostctl.Launch, n int) behaviour {
		if argAfter(l.Argv, "--speculative-num-steps") == "2" && argAfter(l.Argv, "--tp-size") == "1" {
			return behaviour{warmupDies: true, diesSlowly: 12, crash: &hostctl.Failure{Class: hostctl.ClassCrashDuringLoad,
				Detail: "rank 1 on node-b: main process exited, code=killed, status=9/KILL"}}
		}
		return behaviour{}
	})
	_, out, err := h.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rows := h.query("SELECT failure_class, failure_detail FROM point_summary WHERE state = 'failed'")
	if out.Failed != 1 || len(rows) != 1 || rows[0][0] != "crash_during_load" || !strings.HasPrefix(fmt.Sprint(rows[0][1]), "rank 1 on node-b:") {
		t.Errorf("failed points %v, want the dead server's crash_during_load naming rank 1", rows)
	}
}

// TestAbortedLevelAsksTheServer: a server that dies as a level begins fails every warmup request, so
// the level is aborted with no measured request failed; the runner must still ask the server why
// (its death shows in the unit's state a moment later) and fail the point with that cause, not
// record the failed level and go on (TestSlurmSweepSpansNodes ended so: a rank killed at ready, both
// levels aborted, the point "done").
func TestAbortedLevelAsksTheServer(t *testing.T) {
	h := newHarness(t, 1, func(host string, l hostctl.Launch, n int) behaviour {
		if argAfter(l.Argv, "--speculative-num-steps") == "2" && argAfter(l.Argv, "--tp-size") == "1" {
			return behaviour{warmupDies: true, crash: &hostctl.Failure{Class: hostctl.ClassCrashDuringLoad,
				Detail: "rank 1 on node-b: main process exited, code=killed, status=9/KILL", Evidence: []string{"Connection closed by peer"}}}
		}
		return behaviour{}
	})
	_, out, err := h.run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if out.State != store.SweepDone || out.Failed != 1 {
		t.Fatalf("outcome %+v, want one failed point", out)
	}
	rows := h.query("SELECT failure_class, failure_detail FROM point_summary WHERE state = 'failed'")
	if len(rows) != 1 || rows[0][0] != "crash_during_load" || !strings.HasPrefix(fmt.Sprint(rows[0][1]), "rank 1 on node-b:") {
		t.Errorf("failed points %v, want the dead server's crash_during_load naming rank 1", rows)
	}
	if n := h.scalar("SELECT count(*) FROM runs r JOIN points p ON p.id = r.point_ref WHERE p.num_steps = 2 AND p.tp = 1"); n != int64(1) {
		t.Errorf("%v runs of the dead server's point, want its one aborted level", n)
	}
}
