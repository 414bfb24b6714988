package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// TestSweepOnEveryAcceptLengthSource runs a sweep on a real test host against SGLang release
// profiles of the simulator: the oldest, the three Decode-line shapes between, the last without the
// verify counter, and the newest. On
// each: every level ok, the effective speculative parameters and the engine version read back (from
// /get_server_info or /server_info), and a per-level accept length within 0.05 of the simulator's
// truth, from the source that exists there: the verify counter on the newest; the journal's
// Decode-batch lines on the release without the counter (its lifetime average would blend the
// levels); the tokens per streamed step on the oldest, whose log lines have no accept length.
// EAGLE is the algorithm every release knows.
func TestSweepOnEveryAcceptLengthSource(t *testing.T) {
	defer parallel(t)() // shares nothing: its own test hosts (docs/development.md, "Parallel end-to-end tests")
	eras := testhost.SimEras(t)
	// 0.4.4, 0.5.3.post2 and 0.5.4 are the Decode-line shapes between: "accept len" with
	// "largest-len" and no "cuda graph", "accept rate" while the line still starts "Decode batch.",
	// and "Decode batch [FORWARD_CT],". The other releases' lines (0.4.2, 0.4.7, 0.4.9.post1) start
	// "Decode batch." as 0.4.4's do and differ only after the accept length: sim's TestEraDecodeLine
	// parses them with the same parser.
	// One host for the six releases, one sweep after another: a host of each cost a fifth of the
	// test's CPU (docs/benchmarks.md, "The test suite"). Each release's runs are read from the truth
	// file (appended to by every simulator) by their own time windows.
	hosts := boot(t, 1, testhost.Options{})
	h := hosts[0]
	const truth = "/var/tmp/sglangsim-truth.jsonl"
	for _, c := range []struct{ era, source string }{{eras[0], "stream"}, {"0.4.4", "decode_log"}, {"0.5.3.post2", "decode_log"},
		{"0.5.4", "decode_log"}, {eras[len(eras)-2], "decode_log"}, {eras[len(eras)-1], "metrics"}} {
		t.Run(c.era, func(t *testing.T) {
			f := writeSpec(t, fmt.Sprintf(`version: 1
name: e2e-era
%s
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.5-122B-A10B, --host, 0.0.0.0, --port, "30000", --enable-metrics]
  env: {%s, SGLANGSIM_VERSION: %q, SGLANGSIM_TRUTH: %s}
  port: 30000
  ready_timeout: 1m
  stop_timeout: 20s
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE, --speculative-draft-model-path, /models/eagle]
matrix: {method: [baseline, eagle3], num_steps: [2, 4], topk: [1], tp: [4]}
workload: {concurrency: [1, 4], requests: 16, warmup_requests: 1, input_tokens: 32, output_tokens: 256}
`, hostsYAML(hosts, []int{4}), testhost.SimPath, fastEnv, c.era, truth))
			r := specsweep(t, 5*time.Minute, "run", "--db", f.db, f.spec)
			if r.code != 0 {
				t.Fatalf("run failed:\n%s", r)
			}
			db := openDB(t, f.db)
			if n := scalar[int](t, db, "SELECT count(*) FROM run_summary WHERE status = 'ok'"); n != 3*2 {
				t.Fatalf("%d ok runs, want 6\n%s", n, r)
			}
			if n := scalar[int](t, db, `SELECT count(*) FROM point_summary WHERE method = 'eagle3'
				AND effective_num_steps = num_steps AND effective_num_draft_tokens = num_steps + 1`); n != 2 {
				t.Errorf("%d of 2 eagle3 points have their effective parameters read back", n)
			}
			if v := scalar[string](t, db, `SELECT json_extract(provenance, '$.engine_version') FROM point_summary
				WHERE method = 'eagle3' LIMIT 1`); v != c.era {
				t.Errorf("engine version %q, want the release profile %q", v, c.era)
			}
			raw, err := h.ReadFile(truth)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := db.Query(`SELECT num_steps, concurrency, accept_length, accept_length_source, started_at, finished_at
				FROM run_summary WHERE method = 'eagle3' ORDER BY started_at`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				var steps, conc int
				var al float64
				var src string
				var from, to int64
				if err := rows.Scan(&steps, &conc, &al, &src, &from, &to); err != nil {
					t.Fatal(err)
				}
				n++
				want := truthAccept(t, raw, float64(from), float64(to))
				t.Logf("steps %d c=%d: accept length %.3f from %s, truth %.3f", steps, conc, al, src, want)
				if src != c.source || math.Abs(al-want) > 0.05 {
					t.Errorf("steps %d c=%d: accept length %.3f from %q, truth %.3f (want within 0.05, from %q)",
						steps, conc, al, src, want, c.source)
				}
			}
			if n != 4 {
				t.Errorf("%d eagle3 runs, want 4", n)
			}
		})
	}
}

// truthAccept is the simulator's accept length over the requests that arrived in [from, to] (unix
// ms): sum(completion_tokens - 1) / sum(verify_steps), the first token coming from prefill.
func truthAccept(t *testing.T, raw []byte, from, to float64) float64 {
	t.Helper()
	var tokens, verify int
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var r struct {
			Event   string  `json:"event"`
			Arrival float64 `json:"arrival_unix_ms"`
			Tokens  int     `json:"completion_tokens"`
			Verify  int     `json:"verify_steps"`
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Event != "request" || r.Arrival < from || r.Arrival > to || r.Verify == 0 {
			continue
		}
		tokens, verify = tokens+r.Tokens-1, verify+r.Verify
	}
	if verify == 0 {
		t.Fatalf("no request of the window [%.0f, %.0f] in the truth file:\n%s", from, to, strings.TrimSpace(string(raw[:min(len(raw), 500)])))
	}
	return float64(tokens) / float64(verify)
}

// testHungServerIsNamedQuickly is the reproduction as a user would try it: the local
// driver, a server whose scheduler hangs after 3 requests (SGLANGSIM_FAIL=hang-after:3; on 2026 main
// /health still answers while /health_generate does not), 12 requests at c=1. Before, the sweep took
// minutes and recorded the point done with an ok run of 2 completed and 4 failed requests; now the
// point fails as crash_during_load saying the server hung, and no run of it is ok.
func testHungServerIsNamedQuickly(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	sim := testhost.SimBinary(t)
	f := writeSpec(t, fmt.Sprintf(`version: 1
name: e2e-hang
hosts: [{name: here, driver: local, gpus: 4}]
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.5-122B-A10B, --host, 127.0.0.1, --port, "31779", --enable-metrics]
  env: {%s}
  port: 31779
  ready_timeout: 1m
  stop_timeout: 20s
methods:
  baseline: []
  hangs: {args: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/eagle3], env: {SGLANGSIM_FAIL: "hang-after:3"}}
matrix: {method: [baseline, hangs], num_steps: [2], topk: [1], tp: [4]}
workload: {concurrency: [1], requests: 12, warmup_requests: 0, input_tokens: 32, output_tokens: 64}
`, sim, fastEnv))
	r := specsweep(t, 3*time.Minute, "run", "--db", f.db, f.spec)
	db := openDB(t, f.db)
	class := scalar[string](t, db, "SELECT coalesce(failure_class, '') FROM point_summary WHERE method = 'hangs'")
	detail := scalar[string](t, db, "SELECT coalesce(failure_detail, '') FROM point_summary WHERE method = 'hangs'")
	if class != "crash_during_load" || !strings.Contains(detail, "hung") || !strings.Contains(detail, "/health_generate") {
		t.Fatalf("the hung point: %q %q\n%s", class, detail, r)
	}
	if n := scalar[int](t, db, "SELECT count(*) FROM run_summary WHERE method = 'hangs' AND status = 'ok'"); n != 0 {
		t.Errorf("%d ok runs of the hung point", n)
	}
	// The hang comes during the output check (on by default: 8 prompts after the readiness
	// generation): the check is watched as the levels are, so the point fails there, by the
	// liveness rule, not after the check's answers time out (136 s) and then again in the first level.
	events := func(kind string) []int64 {
		rows, err := db.Query(`SELECT e.at FROM events e JOIN points p ON p.id = e.point_ref
			WHERE p.method = 'hangs' AND e.kind = ? ORDER BY e.id`, kind)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var at []int64
		for rows.Next() {
			var v int64
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			at = append(at, v)
		}
		return at
	}
	if n := len(events("output_check_failed")); n != 0 {
		t.Errorf("the check's answers timed out (%d output_check_failed events) before the hang was named", n)
	}
	if n := scalar[int](t, db, "SELECT count(*) FROM run_summary WHERE method = 'hangs'"); n != 0 {
		t.Errorf("the hung point ran %d level(s): it should fail in the output check", n)
	}
	ready, failed := events("ready"), events("failure")
	if len(ready) != 1 || len(failed) != 1 {
		t.Fatalf("ready %v, failure %v events", ready, failed)
	}
	t.Logf("the hung point failed %.1f s after it was ready", float64(failed[0]-ready[0])/1000)
	if d := time.Duration(failed[0]-ready[0]) * time.Millisecond; d >= time.Minute {
		t.Errorf("the hang was named %s after the server was ready: the output check was not watched", d)
	}
	if n := scalar[int](t, db, "SELECT count(*) FROM run_summary WHERE method = 'baseline' AND status = 'ok'"); n != 1 {
		t.Errorf("the baseline: %d ok runs, want 1", n)
	}
}
