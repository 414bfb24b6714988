package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

const truthPath = "/var/lib/sglangsim-truth.jsonl"

// benchSpec is a 12-point sweep (baseline + EAGLE-3 steps 1..11 at tp 4) at two concurrency levels.
// sglangsim runs 5x faster than real time: faster would make four simulators on this machine's two
// cores compete for CPU, which real GPU hosts do not.
func benchSpec(hosts []*testhost.Host, systemctl bool) string {
	gpus := make([]int, len(hosts))
	for i := range gpus {
		gpus[i] = 4
	}
	return fmt.Sprintf(`version: 1
name: bench-sweep
%s
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.5-122B-A10B, --host, 0.0.0.0, --port, "30000", --enable-metrics]
  env: {SGLANGSIM_TRUTH: %s, SGLANGSIM_TIME_SCALE: "0.2", SGLANGSIM_LOAD_SECONDS: "10", SGLANGSIM_WARMUP_SECONDS: "2", SGL_FORCE_SHUTDOWN: "1"}
  port: 30000
  ready_timeout: 1m
  stop_timeout: 20s
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
matrix: {method: [baseline, eagle3], num_steps: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], topk: [1], tp: [4]}
workload: {concurrency: [1, 8], requests: 8, warmup_requests: 0, input_tokens: 256, output_tokens: 128}
`, benchHosts(hosts, gpus, systemctl), testhost.SimPath, truthPath)
}

// benchHosts is hostsYAML, each host with dbus: false when systemctl (the test hosts' root logins
// reach systemd's D-Bus API: without, their units are driven over it).
func benchHosts(hosts []*testhost.Host, gpus []int, systemctl bool) string {
	y := hostsYAML(hosts, gpus)
	if systemctl {
		y = strings.ReplaceAll(y, "}\n", ", dbus: false}\n")
	}
	return y
}

type truthLine struct {
	Event     string  `json:"event"`
	UnixMS    float64 `json:"unix_ms"`
	Arrival   float64 `json:"arrival_unix_ms"`
	Finish    float64 `json:"finish_unix_ms"`
	Tokens    int     `json:"completion_tokens"`
	RID       string  `json:"rid"`
	ExitCause string  `json:"reason"`
}

// truthLines reads a host's truth file (lines that are not a truthLine are skipped).
func truthLines(t testing.TB, h *testhost.Host) []truthLine {
	b, err := h.ReadFile(truthPath)
	if err != nil {
		t.Fatalf("%s: truth file: %v", h.Name, err)
	}
	var out []truthLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var l truthLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// deadTimes reads a host's truth file: for each server instance, the time from its ready instant to
// the first request of the load generator (more than one output token: readiness probes ask for one).
func deadTimes(t testing.TB, h *testhost.Host) []time.Duration {
	var out []time.Duration
	ready := -1.0
	for _, l := range truthLines(t, h) {
		switch {
		case l.Event == "ready":
			ready = l.UnixMS
		case l.Event == "request" && l.Tokens > 1 && ready > 0:
			out = append(out, time.Duration((l.Arrival-ready)*float64(time.Millisecond)))
			ready = -1
		}
	}
	return out
}

// checkTimes reads a host's truth file: for each server instance, the time of its output check (the
// lossless check: a measurement, generated on the server), from the check's first request to the
// last one's finish. The check's answers are shorter than the levels' (levelTokens output tokens,
// which the check never reaches), and the readiness probes ask for one token.
func checkTimes(t testing.TB, h *testhost.Host, levelTokens int) []time.Duration {
	var out []time.Duration
	first, last := -1.0, -1.0
	end := func() {
		if first >= 0 {
			out = append(out, time.Duration((last-first)*float64(time.Millisecond)))
		}
		first, last = -1, -1
	}
	for _, l := range truthLines(t, h) {
		switch {
		case l.Event == "ready":
			end()
		case l.Event == "request" && l.Tokens > 1 && l.Tokens < levelTokens:
			if first < 0 {
				first = l.Arrival
			}
			last = max(last, l.Finish)
		case l.Event == "request" && l.Tokens >= levelTokens:
			end()
		}
	}
	end()
	return out
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkSweep runs the same 12-point sweep on 1 and on 4 real test hosts, side by side, and
// reports: wall time of each and their ratio (target >= 3.5x), dead time per point from sglangsim's
// ready instant to the first measured request (target median < 300 ms), and the orchestration
// overhead per point outside server start-up and measurement (from the database).
// Run: bench/sweep.sh (go test -run '^$' -bench Sweep -benchtime 1x ./internal/e2e).
func BenchmarkSweep(b *testing.B) {
	hosts := testhost.Boot(b, 4, testhost.Options{})
	var wall [3]time.Duration
	for b.Loop() {
		// The same sweep on one host whose unit is driven with systemctl (hosts[].dbus: false) comes
		// last.
		for i, n := range []int{1, 4, 1} {
			systemctl := i == 2
			for _, h := range hosts {
				_, _ = h.Run(b.Context(), "rm -f "+truthPath)
			}
			dir := b.TempDir()
			spec, db := filepath.Join(dir, "spec.yaml"), filepath.Join(dir, "sweep.db")
			if err := os.WriteFile(spec, []byte(benchSpec(hosts[:n], systemctl)), 0o644); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			out, err := specsweepCmd(context.Background(), b, "run", "--db", db, spec).CombinedOutput()
			wall[i] = time.Since(t0)
			if err != nil {
				b.Fatalf("sweep on %d hosts: %v\n%s", n, err, tail(string(out), 30))
			}
			var dead []time.Duration
			for _, h := range hosts[:n] {
				dead = append(dead, deadTimes(b, h)...)
			}
			over := overheads(b, db)
			// The output check (on by default) is a measurement the overhead holds: apart, per point
			// (each host's points in the order they ran, as its truth file has them).
			var checks, outside []time.Duration
			byHost := overheadsByHost(b, db)
			for _, h := range hosts[:n] {
				ch := checkTimes(b, h, 128)
				if len(ch) != len(byHost[h.Name]) {
					b.Fatalf("%s: %d output checks in the truth file for %d points", h.Name, len(ch), len(byHost[h.Name]))
				}
				for i, o := range byHost[h.Name] {
					checks, outside = append(checks, ch[i]), append(outside, o-ch[i])
				}
			}
			printPhases(b, db)
			fmt.Printf("  output check per point median %s; overhead outside it median %s (max %s)\n",
				median(checks).Round(time.Millisecond), median(outside).Round(time.Millisecond), slices.Max(outside).Round(time.Millisecond))
			via := ""
			if systemctl {
				via = " with systemctl"
			}
			fmt.Printf("sweep of 12 points on %d host(s)%s: %s wall; dead time ready->first request median %s (max %s, %d points); "+
				"orchestration overhead per point median %s (max %s)\n", n, via, wall[i].Round(time.Millisecond),
				median(dead).Round(time.Millisecond), slices.Max(dead).Round(time.Millisecond), len(dead),
				median(over).Round(time.Millisecond), slices.Max(over).Round(time.Millisecond))
			if i == 1 {
				b.ReportMetric(float64(median(dead).Milliseconds()), "dead-ms/point")
				b.ReportMetric(float64(median(over).Milliseconds()), "overhead-ms/point")
			}
		}
		fmt.Printf("speedup of 4 hosts over 1: %.2fx\n", wall[0].Seconds()/wall[1].Seconds())
		b.ReportMetric(wall[0].Seconds()/wall[1].Seconds(), "x-speedup-4-hosts")
	}
}

// overheads is, per point, the time from its claim to the end of its server's stop minus the
// server's start-up (load_s) and the measured levels: what the orchestrator adds (drop-in,
// daemon-reload, readiness lag, provenance, stop).
func overheads(t testing.TB, dbPath string) []time.Duration {
	db := openDB(t, dbPath)
	rows, err := db.Query(`SELECT (SELECT max(at) FROM event_log e WHERE e.sweep_id = p.sweep_id AND e.point_id = p.point_id
			AND e.kind = 'stop') - p.started_at - p.load_s * 1000
		- (SELECT sum(r.finished_at - r.started_at) FROM run_summary r WHERE r.sweep_id = p.sweep_id
			AND r.point_id = p.point_id AND r.status = 'ok')
		FROM point_summary p WHERE p.state = 'done'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []time.Duration
	for rows.Next() {
		var ms float64
		if err := rows.Scan(&ms); err != nil {
			t.Fatal(err)
		}
		out = append(out, time.Duration(ms*float64(time.Millisecond)))
	}
	return out
}

// overheadsByHost is overheads by host, each host's points in the order they were claimed.
func overheadsByHost(t testing.TB, dbPath string) map[string][]time.Duration {
	db := openDB(t, dbPath)
	rows, err := db.Query(`SELECT p.host, (SELECT max(at) FROM event_log e WHERE e.sweep_id = p.sweep_id AND e.point_id = p.point_id
			AND e.kind = 'stop') - p.started_at - p.load_s * 1000
		- (SELECT sum(r.finished_at - r.started_at) FROM run_summary r WHERE r.sweep_id = p.sweep_id
			AND r.point_id = p.point_id AND r.status = 'ok')
		FROM point_summary p WHERE p.state = 'done' ORDER BY p.started_at`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]time.Duration{}
	for rows.Next() {
		var host string
		var ms float64
		if err := rows.Scan(&host, &ms); err != nil {
			t.Fatal(err)
		}
		out[host] = append(out[host], time.Duration(ms*float64(time.Millisecond)))
	}
	return out
}

// printPhases prints the median of each phase of a point, from the event log: claim -> start
// returned (GPU check, drop-in, daemon-reload, start), start -> ready (server load + readiness lag),
// ready -> first level started, last level finished -> stop finished.
func printPhases(t testing.TB, dbPath string) {
	db := openDB(t, dbPath)
	q := func(expr string) time.Duration {
		rows, err := db.Query(`WITH ev AS (SELECT point_id, kind, max(at) AS at FROM event_log GROUP BY point_id, kind),
			cl AS (SELECT point_id, started_at AS at FROM point_summary WHERE state = 'done'),
			rn AS (SELECT point_id, min(started_at) AS first, max(finished_at) AS last FROM run_summary WHERE status = 'ok' GROUP BY point_id)
			SELECT ` + expr + ` FROM cl
			JOIN ev s ON s.point_id = cl.point_id AND s.kind = 'start'
			JOIN ev r ON r.point_id = cl.point_id AND r.kind = 'ready'
			JOIN ev x ON x.point_id = cl.point_id AND x.kind = 'stop'
			JOIN rn ON rn.point_id = cl.point_id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var d []time.Duration
		for rows.Next() {
			var ms float64
			if rows.Scan(&ms) == nil {
				d = append(d, time.Duration(ms*float64(time.Millisecond)))
			}
		}
		return median(d).Round(time.Millisecond)
	}
	fmt.Printf("  phases (median): claim->started %s, started->ready %s, ready->first level %s, levels %s, last level->stopped %s\n",
		q("s.at - cl.at"), q("r.at - s.at"), q("rn.first - r.at"), q("rn.last - rn.first"), q("x.at - rn.last"))
}

// rssKB reads a process's resident set size.
func rssKB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int
			fmt.Sscan(rest, &kb)
			return kb
		}
	}
	return 0
}

// BenchmarkDaemonSoak queues 200 small sweeps (one point each, spread over 4 real test hosts) to one
// daemon through its API and reports the daemon's RSS at the start, after every 50 sweeps, and at the
// end: memory must stay flat. Run: bench/daemon_soak.sh.
func BenchmarkDaemonSoak(b *testing.B) {
	hosts := testhost.Boot(b, 4, testhost.Options{})
	for b.Loop() {
		dir := b.TempDir()
		db := filepath.Join(dir, "soak.db")
		addr := freePort(b)
		// The test hosts' keys live in their scratch directories, outside ~/.ssh.
		cmd := specsweepCmd(context.Background(), b, "daemon", "--db", db, "--listen", addr, "--allow-any-key-path")
		var logs bytes.Buffer
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Get("http://" + addr + "/healthz")
			if err == nil {
				resp.Body.Close()
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("daemon did not start: %v\n%s", err, logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		token, err := os.ReadFile(db + ".token")
		if err != nil {
			b.Fatal(err)
		}
		const n = 200
		t0 := time.Now()
		for i := range n {
			spec := smallSoakSpec(fmt.Sprintf("soak-%03d", i), hosts[i%len(hosts)])
			req, _ := http.NewRequest("POST", "http://"+addr+"/api/sweeps", strings.NewReader(spec))
			req.Header.Set("Content-Type", "application/yaml")
			req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != http.StatusCreated {
				b.Fatalf("submit %d: %v %v", i, err, resp)
			}
			resp.Body.Close()
		}
		start := rssKB(cmd.Process.Pid)
		fmt.Printf("queued %d sweeps in %s; daemon RSS %d kB\n", n, time.Since(t0).Round(time.Millisecond), start)
		next := 50
		for {
			done := countRows(db, "SELECT count(*) FROM sweeps WHERE state IN ('done', 'failed')")
			if done >= next || done == n {
				fmt.Printf("  %3d sweeps finished after %s: daemon RSS %d kB\n", done, time.Since(t0).Round(time.Second), rssKB(cmd.Process.Pid))
				next += 50
			}
			if done == n {
				break
			}
			if time.Since(t0) > 20*time.Minute {
				b.Fatalf("soak did not finish: %d of %d\n%s", done, n, tail(logs.String(), 20))
			}
			time.Sleep(250 * time.Millisecond)
		}
		end := rssKB(cmd.Process.Pid)
		failed := countRows(db, "SELECT count(*) FROM sweeps WHERE state = 'failed'")
		fmt.Printf("%d sweeps (%d failed) in %s; daemon RSS start %d kB, end %d kB (%+.1f%%)\n", n, failed,
			time.Since(t0).Round(time.Second), start, end, 100*float64(end-start)/float64(start))
		b.ReportMetric(float64(start), "rss-start-kB")
		b.ReportMetric(float64(end), "rss-end-kB")
	}
}

func smallSoakSpec(name string, h *testhost.Host) string {
	return fmt.Sprintf(`version: 1
name: %s
%s
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.6-27B, --host, 0.0.0.0, --port, "30000"]
  env: {%s}
  port: 30000
  ready_timeout: 1m
  stop_timeout: 20s
methods: {baseline: []}
matrix: {method: [baseline], tp: [1]}
workload: {concurrency: [1], requests: 2, warmup_requests: 0, input_tokens: 16, output_tokens: 16}
`, name, hostsYAML([]*testhost.Host{h}, []int{1}), testhost.SimPath, fastEnv)
}
