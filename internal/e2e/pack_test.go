package e2e

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// Packing (issue 16) on a local host with 8 simulated GPUs: TP 1, 2 and 4 points run side by side,
// each server on its own GPUs and port; the servers' own ready lines (their CUDA_VISIBLE_DEVICES as
// they read it) show that no two running at once ever share a GPU.

type packTruthLine struct {
	Event   string  `json:"event"`
	UnixMs  float64 `json:"unix_ms"`
	PID     int     `json:"pid"`
	Port    int     `json:"port"`
	Visible []int   `json:"visible_gpus"`
}

type serverSpan struct {
	pid        int
	port       int
	gpus       []int
	start, end float64
}

func serverSpans(t *testing.T, path string) []serverSpan {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	byPID := map[int]*serverSpan{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l packTruthLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch l.Event {
		case "ready":
			byPID[l.PID] = &serverSpan{pid: l.PID, port: l.Port, gpus: l.Visible, start: l.UnixMs, end: 1e18}
		case "exit":
			if s := byPID[l.PID]; s != nil {
				s.end = l.UnixMs
			}
		}
	}
	var out []serverSpan
	for _, s := range byPID {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// sideBySide checks servers that ran at once never shared a GPU or a port, and fails the test when
// no two ever ran at once (nothing was packed); it returns the pairs that did.
func sideBySide(t *testing.T, spans []serverSpan) int {
	t.Helper()
	overlapped := 0
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if b.start >= a.end || a.start >= b.end {
				continue
			}
			overlapped++
			for _, g := range a.gpus {
				if slices.Contains(b.gpus, g) {
					t.Errorf("servers %d (GPUs %v, port %d) and %d (GPUs %v, port %d) ran at once on GPU %d",
						a.pid, a.gpus, a.port, b.pid, b.gpus, b.port, g)
				}
			}
			if a.port == b.port {
				t.Errorf("servers %d and %d ran at once on port %d", a.pid, b.pid, a.port)
			}
		}
	}
	if overlapped == 0 {
		t.Error("no two servers ever ran at once: nothing was packed")
	}
	return overlapped
}

// since keeps the servers that became ready at or after from (unix ms).
func since(spans []serverSpan, from float64) []serverSpan {
	var out []serverSpan
	for _, s := range spans {
		if s.start >= from {
			out = append(out, s)
		}
	}
	return out
}

// checkRunsOnce fails the test when a run (point, level, repeat) is recorded ok more than once.
func checkRunsOnce(t testing.TB, db *sql.DB) {
	t.Helper()
	if n := scalar[int](t, db, `SELECT count(*) FROM (SELECT point_id, concurrency, repeat FROM run_summary
		WHERE status = 'ok' GROUP BY 1, 2, 3 HAVING count(*) > 1)`); n != 0 {
		t.Errorf("%d runs recorded more than once", n)
	}
}

// checkCrashBeside checks a packed sweep with a crashing method: sound points done with both levels
// measured, crashing ones crash_during_load, every run once.
func checkCrashBeside(t *testing.T, db *sql.DB, sound, crashing int) {
	t.Helper()
	if n := scalar[int](t, db, "SELECT count(*) FROM point_summary WHERE method <> 'crashy' AND state = 'done'"); n != sound {
		t.Errorf("%d of %d sound points done", n, sound)
	}
	if n := scalar[int](t, db, "SELECT count(*) FROM point_summary WHERE method = 'crashy' AND state = 'failed' AND failure_class = 'crash_during_load'"); n != crashing {
		t.Errorf("%d of %d crashing points failed as crash_during_load", n, crashing)
	}
	checkRunsOnce(t, db)
	// A sound point that ran beside a crashing one measured every level.
	if n := scalar[int](t, db, `SELECT count(*) FROM point_summary p WHERE p.method <> 'crashy' AND p.state = 'done'
		AND (SELECT count(*) FROM run_summary r WHERE r.point_id = p.point_id AND r.status = 'ok') <> 2`); n != 0 {
		t.Errorf("%d sound points lack a level", n)
	}
}

func TestPackedPointsOnEightGPUs(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	dir := t.TempDir()
	truth := filepath.Join(dir, "truth.jsonl")
	f := writeSpec(t, fmt.Sprintf(`version: 1
name: e2e-pack
hosts: [{name: big, driver: local, gpus: 8, pack: true}]
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.6-27B, --host, 127.0.0.1, --port, "31800", --enable-metrics]
  env: {%s, SGLANGSIM_PROFILE: qwen3.6-27b, SGLANGSIM_GPUS: "8", SGLANGSIM_TRUTH: %q}
  port: 31800
  ready_timeout: 1m
  stop_timeout: 20s
  stop: drain # serverSpans: a drained server logs its exit in the truth file, a killed one cannot
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
matrix: {method: [baseline, eagle3], num_steps: [1, 2, 3], topk: [1], tp: [1, 2, 4]}
workload: {concurrency: [1, 4], requests: 8, warmup_requests: 1, input_tokens: 32, output_tokens: 48}
`, testhost.SimBinary(t), fastEnv, truth))
	r := specsweep(t, 4*time.Minute, "run", "--db", f.db, f.spec)
	if r.code != 0 {
		t.Fatalf("run failed:\n%s", r)
	}
	db := openDB(t, f.db)
	if n := scalar[int](t, db, "SELECT count(*) FROM point_summary WHERE state = 'done'"); n != 12 {
		t.Errorf("%d of 12 points done\n%s", n, r)
	}
	spans := serverSpans(t, truth)
	if len(spans) < 12 {
		t.Fatalf("%d servers in the truth file, want the 12 points'", len(spans))
	}
	overlapped := sideBySide(t, spans)
	for _, s := range spans {
		if len(s.gpus) == 0 || len(s.gpus) > 4 {
			t.Errorf("server %d saw GPUs %v", s.pid, s.gpus)
		}
	}
	if n := scalar[int](t, db, "SELECT count(*) FROM event_log WHERE kind = 'packed'"); n != 12 {
		t.Errorf("%d packed events, want one per point", n)
	}
	ev := scalar[string](t, db, "SELECT group_concat(detail, ' | ') FROM event_log WHERE kind = 'packed'")
	if !strings.Contains(ev, "beside") {
		t.Errorf("packed events: %s", ev)
	}
	t.Logf("%d servers, %d pairs ran side by side", len(spans), overlapped)
}

func packSpec(sim, truth string, port int, matrix, extraEnv string) string {
	return fmt.Sprintf(`version: 1
name: e2e-pack
hosts: [{name: big, driver: local, gpus: 8, pack: true}]
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.6-27B, --host, 127.0.0.1, --port, "%d", --enable-metrics]
  env: {%s, SGLANGSIM_PROFILE: qwen3.6-27b, SGLANGSIM_GPUS: "8", SGLANGSIM_TRUTH: %q}
  port: %d
  ready_timeout: 1m
  stop_timeout: 20s
  stop: drain # serverSpans: a drained server logs its exit in the truth file, a killed one cannot
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
  crashy:
    args: [--speculative-algorithm, EAGLE3]
    env: {SGLANGSIM_FAIL: "crash-during-load:3"%s}
matrix: %s
workload: {concurrency: [1, 4], requests: 8, warmup_requests: 1, input_tokens: 32, output_tokens: 48}
`, sim, port, fastEnv, truth, port, extraEnv, matrix)
}

// TestPackedCrashAndResume: one packed point crashes during its load and the points beside it go
// on; kill -9 of the run twice and a rerun finish the sweep with every run once and no GPU shared.
func TestPackedCrashAndResume(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	truth := filepath.Join(t.TempDir(), "truth.jsonl")
	f := writeSpec(t, packSpec(testhost.SimBinary(t), truth, 31820, "{method: [baseline, eagle3, crashy], num_steps: [1, 2, 3], topk: [1], tp: [1, 2]}", ""))
	killRuns(t, f, 1500*time.Millisecond, 0)
	// The killed runs' servers end with them (a local child gets SIGTERM when specsweep dies) but not
	// all write an exit line before they go: check the last run's servers.
	final := float64(time.Now().UnixNano()) / 1e6
	r := specsweep(t, 4*time.Minute, "run", "--db", f.db, f.spec)
	if r.code != 0 {
		t.Fatalf("final run failed:\n%s", r)
	}
	db := openDB(t, f.db)
	checkCrashBeside(t, db, 8, 6)
	sideBySide(t, since(serverSpans(t, truth), final))
}
