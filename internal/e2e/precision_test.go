package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// testPrecisionSweepOnTheSimulator: workload.precision on real sglangsim processes. Every level
// ends before its cap with its interval within the target, the interval and the target are stored
// with the run, the results table shows them, and `runs` can select them.
func testPrecisionSweepOnTheSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	sim := testhost.SimBinary(t)
	const cap = 4000
	f := writeSpec(t, fmt.Sprintf(`version: 1
name: e2e-precision
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
  eagle3: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/eagle3]
matrix: {method: [baseline, eagle3], num_steps: [3], topk: [1], tp: [4]}
workload:
  concurrency: [1, 8]
  warmup_requests: 2
  input_tokens: 64
  output_tokens: 64
  precision: {output_tok_s: 10%%, confidence: 0.9, min_requests: 16, max_requests: %d}
`, sim, fastEnv, cap))
	r := specsweep(t, 4*time.Minute, "run", "--db", f.db, f.spec)
	if r.code != 0 {
		t.Fatalf("run failed:\n%s", r)
	}
	db := openDB(t, f.db)
	if n := scalar[int](t, db, "SELECT count(*) FROM run_summary WHERE status = 'ok'"); n != 2*2 {
		t.Fatalf("%d ok runs, want 4\n%s", n, r)
	}
	// Each level ended on its interval, not at the cap, and says so.
	if n := scalar[int](t, db, `SELECT count(*) FROM run_detail WHERE ci_metric = 'output_tok_s'
		AND precision_reached = 1 AND precision_target = 0.1 AND ci_confidence = 0.9 AND ci_batches >= 2
		AND ci_low < ci_mean AND ci_mean < ci_high AND (ci_high - ci_low) / 2 <= 0.1 * ci_mean * 1.000001
		AND requests >= 16 AND requests < ?`, cap); n != 4 {
		t.Errorf("%d of 4 runs ended on their interval (reached, within 10%%, 16 <= requests < %d)\n%s", n, cap, r)
	}
	// The results table shows each level's interval.
	if !regexp.MustCompile(`\d+\.\d ±\d+\.\d%`).MatchString(r.stdout) ||
		!strings.Contains(r.stdout, "levels end when output tok/s is known to ±10% (90% confidence), after at least 16 requests, at most 4000 requests") {
		t.Errorf("the results do not show the intervals and the rule:\n%s", r.stdout)
	}
	q := specsweep(t, time.Minute, "runs", "--db", f.db, "--where", "precision_reached = 1", "--columns", "method,concurrency,ci_low,ci_high")
	if q.code != 0 || strings.Count(q.stdout, "\n") != 1+4 {
		t.Errorf("runs --where precision_reached = 1:\n%s", q)
	}
}
