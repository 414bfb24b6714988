package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/specsweep/specsweep/internal/testhost"
)

// freePort is a free loopback address for a daemon or a local server (testhost.FreePort: below the
// ephemeral range, so no outgoing connection takes it meanwhile).
func freePort(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(testhost.FreePort(t)))
}

// smallSpec is a sweep of `steps` EAGLE-3 points plus a baseline on the given hosts.
func smallSpec(name string, hosts []*testhost.Host, steps string, extra string) string {
	gpus := make([]int, len(hosts))
	for i := range gpus {
		gpus[i] = 4
	}
	return hostSpecHead(name, hostsYAML(hosts, gpus)) + fmt.Sprintf(`methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
matrix: {method: [baseline, eagle3], num_steps: [%s], topk: [1], tp: [4]}
workload: {concurrency: [1, 4], requests: 6, warmup_requests: 1, input_tokens: 32, output_tokens: 48}
%s`, steps, extra)
}

// hostSpecHead is a spec's version, name, hosts and server for the simulator as the test hosts'
// unit runs it (port 30000), fast; the methods, matrix and workload follow.
func hostSpecHead(name, hosts string) string {
	return fmt.Sprintf(`version: 1
name: %s
%s
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.5-122B-A10B, --host, 0.0.0.0, --port, "30000", --enable-metrics]
  env: {%s}
  port: 30000
  ready_timeout: 1m
  stop_timeout: 20s
`, name, hosts, testhost.SimPath, fastEnv)
}

type daemonProc struct {
	cmd   *exec.Cmd
	addr  string
	token string // the API's bearer token, read from its file
	// out is what the daemon printed (stdout and stderr); read it once the process has ended.
	out *bytes.Buffer
}

func startDaemon(t testing.TB, db string, args ...string) *daemonProc {
	t.Helper()
	addr := freePort(t)
	cmd, out := startSpecsweep(t, append([]string{"daemon", "--db", db, "--listen", addr}, args...)...)
	d := &daemonProc{cmd: cmd, addr: addr, out: out}
	waitFor(t, 30*time.Second, "the daemon's /healthz", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	tokenFile := db + ".token"
	for i, a := range args {
		if a == "--token-file" && i+1 < len(args) {
			tokenFile = args[i+1]
		}
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatalf("the daemon's token: %v", err)
	}
	d.token = strings.TrimSpace(string(b))
	return d
}

// api sends a request to the daemon's API as a well-behaved client does (the token; a body as
// application/yaml); edit, if not nil, changes the request first. It returns the status and body.
func (d *daemonProc) api(t testing.TB, method, path, body string, edit func(r *http.Request)) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+d.addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/yaml")
	}
	if edit != nil {
		edit(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func submit(t testing.TB, db, text string, args ...string) int64 {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	r := specsweep(t, 30*time.Second, append([]string{"submit", "--db", db, p}, args...)...)
	if r.code != 0 {
		t.Fatalf("submit:\n%s", r)
	}
	var id int64
	if _, err := fmt.Sscan(r.stdout, &id); err != nil {
		t.Fatalf("submit printed no id: %q", r.stdout)
	}
	return id
}

func sweepState(db string, id int64) string {
	var s string
	if countRows(db, fmt.Sprintf("SELECT count(*) FROM sweeps WHERE id = %d", id)) == 0 {
		return ""
	}
	d, err := openRO(db)
	if err != nil {
		return ""
	}
	defer d.Close()
	_ = d.QueryRow("SELECT state FROM sweeps WHERE id = ?", id).Scan(&s)
	return s
}

func waitState(t *testing.T, db string, id int64, want string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, fmt.Sprintf("sweep %d to be %s", id, want), func() bool { return sweepState(db, id) == want })
}

// interval is the time a point held its machine: from its claim to the end of its server's stop.
type interval struct {
	sweep      int64
	host       string
	start, end int64
}

func pointIntervals(t *testing.T, db string) []interval {
	t.Helper()
	d := openDB(t, db)
	rows, err := d.Query(`SELECT p.sweep_id, p.host, p.started_at,
			(SELECT max(at) FROM event_log e WHERE e.sweep_id = p.sweep_id AND e.point_id = p.point_id AND e.kind = 'stop')
		FROM point_summary p WHERE p.state = 'done'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []interval
	for rows.Next() {
		var iv interval
		if err := rows.Scan(&iv.sweep, &iv.host, &iv.start, &iv.end); err != nil {
			t.Fatal(err)
		}
		out = append(out, iv)
	}
	return out
}

// TestDaemonOnRealHosts: submit -> run -> done; sweeps on disjoint hosts run at once, sweeps on one
// host never overlap there; a cron schedule fires and skips while its previous sweep runs; the API
// and /metrics answer; cancel stops a sweep and restores units; SIGKILL of the daemon mid-sweep and
// a restart finish the sweep with every run exactly once; SIGTERM exits cleanly.
func TestDaemonOnRealHosts(t *testing.T) {
	defer parallel(t)() // shares nothing: its own test hosts (docs/development.md, "Parallel end-to-end tests")
	hosts := boot(t, 3, testhost.Options{})
	a, b, c := hosts[0], hosts[1], hosts[2]
	db := filepath.Join(t.TempDir(), "daemon.db")
	d := startDaemon(t, db, "--min-every", "1s")

	// Three sweeps: s1 and s3 share host a, s2 has host b to itself.
	s1 := submit(t, db, smallSpec("s1", []*testhost.Host{a}, "1, 2", ""))
	s2 := submit(t, db, smallSpec("s2", []*testhost.Host{b}, "1, 2", ""))
	s3 := submit(t, db, smallSpec("s3", []*testhost.Host{a}, "1", ""))
	for _, id := range []int64{s1, s2, s3} {
		waitState(t, db, id, "done", 3*time.Minute)
	}
	ivs := pointIntervals(t, db)
	var on1, on2 []interval
	for _, iv := range ivs {
		switch iv.sweep {
		case s1:
			on1 = append(on1, iv)
		case s2:
			on2 = append(on2, iv)
		}
	}
	span := func(ivs []interval) (int64, int64) {
		lo, hi := ivs[0].start, ivs[0].end
		for _, iv := range ivs {
			lo, hi = min(lo, iv.start), max(hi, iv.end)
		}
		return lo, hi
	}
	lo1, hi1 := span(on1)
	lo2, hi2 := span(on2)
	if max(lo1, lo2) >= min(hi1, hi2) {
		t.Errorf("sweeps on disjoint hosts did not run at once: s1 %d..%d, s2 %d..%d", lo1, hi1, lo2, hi2)
	}
	for i, x := range ivs {
		for _, y := range ivs[i+1:] {
			if x.host == y.host && x.sweep != y.sweep && x.start < y.end && y.start < x.end {
				t.Errorf("points of sweeps %d and %d overlapped on %s: %d..%d and %d..%d", x.sweep, y.sweep, x.host, x.start, x.end, y.start, y.end)
			}
		}
	}
	for _, iv := range ivs {
		if iv.sweep == s3 && iv.start < hi1 {
			t.Errorf("s3 started on the shared host before s1, submitted first, was done there")
		}
	}

	// The API and /metrics.
	code, body := d.api(t, "GET", "/api/sweeps", "", nil)
	var list []map[string]any
	if err := json.Unmarshal([]byte(body), &list); err != nil || code != 200 || len(list) != 3 {
		t.Errorf("/api/sweeps: %d %v, %d sweeps", code, err, len(list))
	}
	resp, err := http.Get("http://" + d.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	for _, name := range []string{"specsweep_sweeps", "specsweep_points", "specsweep_point_duration_seconds", "specsweep_ready_seconds", "specsweep_host_up"} {
		if fams[name] == nil {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if f := fams["specsweep_sweeps"]; f != nil {
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == "done" && m.GetGauge().GetValue() != 3 {
				t.Errorf("specsweep_sweeps{state=done} = %v, want 3", m.GetGauge().GetValue())
			}
		}
	}

	// A schedule every 2 s on host c whose sweeps take longer: it fires, and skips while one runs.
	// (--min-every lets the test's schedule fire every 2 s: the default minimum is 1m.)
	tmpl := submit(t, db, smallSpec("nightly", []*testhost.Host{c}, "1, 2, 3", ""), "--cron", "@every 2s", "--min-every", "1s")
	waitFor(t, 3*time.Minute, "two scheduled sweeps done and a skipped firing", func() bool {
		return countRows(db, fmt.Sprintf("SELECT count(*) FROM sweeps WHERE schedule_id = %d AND state = 'done'", tmpl)) >= 2 &&
			countRows(db, fmt.Sprintf("SELECT count(*) FROM events WHERE sweep_id = %d AND kind = 'schedule_skipped'", tmpl)) >= 1
	})
	if r := specsweep(t, 30*time.Second, "cancel", "--db", db, fmt.Sprint(tmpl)); r.code != 0 {
		t.Fatalf("cancel schedule:\n%s", r)
	}
	if n := countRows(db, fmt.Sprintf("SELECT count(*) FROM sweeps WHERE schedule_id = %d AND name NOT LIKE 'nightly@%%'", tmpl)); n != 0 {
		t.Errorf("%d scheduled sweeps not named nightly@TIME", n)
	}
	// Let a firing in flight end before looking at host c.
	waitFor(t, 2*time.Minute, "the schedule's sweeps to end", func() bool {
		return countRows(db, fmt.Sprintf("SELECT count(*) FROM sweeps WHERE schedule_id = %d AND state IN ('queued', 'running')", tmpl)) == 0
	})

	// Cancel a running sweep: its points stop, its units are restored.
	s4 := submit(t, db, smallSpec("s4", []*testhost.Host{b}, "1, 2, 3, 4, 5", ""))
	waitFor(t, time.Minute, "s4 to run a point", func() bool {
		return countRows(db, fmt.Sprintf("SELECT count(*) FROM runs r JOIN points p ON p.id = r.point_ref WHERE p.sweep_id = %d", s4)) > 0
	})
	if r := specsweep(t, 30*time.Second, "cancel", "--db", db, "s4"); r.code != 0 {
		t.Fatalf("cancel:\n%s", r)
	}
	waitFor(t, time.Minute, "s4 to stop", func() bool {
		return countRows(db, fmt.Sprintf("SELECT count(*) FROM points WHERE sweep_id = %d AND state IN ('running', 'pending')", s4)) == 0 &&
			countRows(db, fmt.Sprintf("SELECT count(*) FROM events WHERE sweep_id = %d AND kind = 'restored'", s4)) > 0
	})
	if s := sweepState(db, s4); s != "cancelled" {
		t.Errorf("s4 is %s, want cancelled", s)
	}
	checkRestored(t, []*testhost.Host{b, c})

	// SIGKILL the daemon in the middle of a sweep; a new daemon finishes it, every run once.
	s5 := submit(t, db, smallSpec("s5", []*testhost.Host{a, b}, "1, 2, 3", ""))
	waitFor(t, time.Minute, "s5 to record a run", func() bool {
		return countRows(db, fmt.Sprintf("SELECT count(*) FROM runs r JOIN points p ON p.id = r.point_ref WHERE p.sweep_id = %d", s5)) > 0
	})
	signal(t, d.cmd, syscall.SIGKILL)
	_ = d.cmd.Wait()
	d = startDaemon(t, db, "--min-every", "1s")
	waitState(t, db, s5, "done", 3*time.Minute)
	dbh := openDB(t, db)
	if n := scalar[int](t, dbh, `SELECT count(*) FROM (SELECT point_id, concurrency, repeat FROM run_summary
		WHERE sweep_id = ? AND status = 'ok' GROUP BY 1, 2, 3 HAVING count(*) > 1)`, s5); n != 0 {
		t.Errorf("%d runs of s5 recorded twice", n)
	}
	if n := scalar[int](t, dbh, "SELECT count(*) FROM run_summary WHERE sweep_id = ? AND status = 'ok'", s5); n != 4*2 {
		t.Errorf("s5 has %d ok runs, want 8", n)
	}
	if s := scalar[string](t, dbh, "PRAGMA integrity_check"); s != "ok" {
		t.Errorf("integrity_check: %s", s)
	}

	// SIGTERM in the middle of a sweep: clean exit within seconds, units restored, sweep queued.
	s6 := submit(t, db, smallSpec("s6", []*testhost.Host{a}, "1, 2, 3", ""))
	waitFor(t, time.Minute, "s6 to run", func() bool { return sweepState(db, s6) == "running" })
	time.Sleep(time.Second)
	t0 := time.Now()
	signal(t, d.cmd, syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		t.Errorf("daemon exit after SIGTERM: %v", err)
	}
	if took := time.Since(t0); took > 30*time.Second {
		t.Errorf("daemon took %s to stop", took)
	}
	if s := sweepState(db, s6); s != "queued" {
		t.Errorf("s6 after the daemon stopped: %s, want queued (resumed by the next daemon)", s)
	}
	checkRestored(t, hosts)
}

func TestDaemonTokenIsRequired(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("starts the daemon")
	}
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, filepath.Join(dir, "d.db"), "--token-file", tok)
	for _, c := range []struct {
		auth string
		want int
	}{{"", 401}, {"Bearer wrong", 401}, {"Bearer s3cret-token", 200}} {
		req, _ := http.NewRequest("GET", "http://"+d.addr+"/api/sweeps", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("auth %q: %d, want %d", c.auth, resp.StatusCode, c.want)
		}
	}
	signal(t, d.cmd, syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		t.Errorf("exit: %v", err)
	}
}

// TestRunRefusesASweepTheDaemonRuns: `specsweep run` of a spec whose sweep the daemon is running
// must not resume it behind the daemon's back.
func TestRunRefusesASweepTheDaemonRuns(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("starts the daemon")
	}
	sim := testhost.SimBinary(t)
	f := writeSpec(t, fmt.Sprintf(`version: 1
name: e2e-lock
hosts: [{name: here, driver: local, gpus: 4}]
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.5-122B-A10B, --host, 127.0.0.1, --port, "31779"]
  env: {%s}
  port: 31779
methods: {baseline: [], eagle3: [--speculative-algorithm, EAGLE3]}
matrix: {method: [baseline, eagle3], num_steps: [1, 2, 3], topk: [1], tp: [4]}
workload: {concurrency: [1], requests: 8, input_tokens: 16, output_tokens: 64}
`, sim, fastEnv))
	d := startDaemon(t, f.db)
	id := submit(t, f.db, mustRead(t, f.spec))
	waitState(t, f.db, id, "running", 30*time.Second)
	r := specsweep(t, 30*time.Second, "run", "--db", f.db, f.spec)
	if r.code != 1 || !strings.Contains(r.stderr, "being run by another specsweep process") {
		t.Errorf("run while the daemon runs the sweep:\n%s", r)
	}
	signal(t, d.cmd, syscall.SIGTERM)
	_ = d.cmd.Wait()
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
