package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/workload"
)

// The lossless output check (issue 15) on the real simulator: greedy answers that depend only on
// the prompt and the model, rare late divergences like BF16 batching, and a broken speculative path.

func outcheckSpec(sim string, port int) string {
	return fmt.Sprintf(`version: 1
name: e2e-outcheck
hosts: [{name: here, driver: local, gpus: 4}]
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.5-122B-A10B, --host, 127.0.0.1, --port, "%d", --enable-metrics]
  env: {%s, SGLANGSIM_NONDETERMINISM: "0.1"}
  port: %d
  ready_timeout: 1m
  stop_timeout: 20s
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/eagle3]
  broken:
    args: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/eagle3-ported]
    env: {SGLANGSIM_FAIL: "lossy:0.05"}
matrix: {method: [baseline, eagle3, broken], num_steps: [2, 4], topk: [1], tp: [4]}
workload: {concurrency: [1, 4], requests: 8, warmup_requests: 1, input_tokens: 64, output_tokens: 32}
`, sim, port, fastEnv, port)
}

type pointCheck struct {
	method, state, check string
	steps                int
	agreement            float64
	evidence             string
}

func pointChecks(t *testing.T, db *sql.DB) []pointCheck {
	t.Helper()
	rows, err := db.Query(`SELECT p.method, p.state, coalesce(p.num_steps, 0), coalesce(p.output_check, ''),
		coalesce(p.output_agreement, -1), coalesce(pt.output_evidence, '')
		FROM point_summary p JOIN points pt ON pt.sweep_id = p.sweep_id AND pt.point_id = p.point_id ORDER BY pt.plan_order`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []pointCheck
	for rows.Next() {
		var c pointCheck
		if err := rows.Scan(&c.method, &c.state, &c.steps, &c.check, &c.agreement, &c.evidence); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// checkVerdicts: the baseline is the reference, the lossless points pass, the broken ones are
// flagged (and still measured), and each threshold is the reference's self-agreement's.
func checkVerdicts(t *testing.T, db *sql.DB) {
	t.Helper()
	self := -1.0
	for _, c := range pointChecks(t, db) {
		want := map[string]string{"baseline": "reference", "eagle3": "ok", "broken": "mismatch"}[c.method]
		if c.check != want || c.state != "done" {
			t.Errorf("%s steps %d: %s, check %q (agreement %.2f), want done and %q", c.method, c.steps, c.state, c.check, c.agreement, want)
		}
		var ev struct {
			Reference float64 `json:"reference_agreement"`
			Threshold float64 `json:"threshold"`
		}
		if err := json.Unmarshal([]byte(c.evidence), &ev); err != nil {
			t.Errorf("%s steps %d: evidence %q: %v", c.method, c.steps, c.evidence, err)
			continue
		}
		if c.method == "baseline" {
			self = c.agreement
			continue
		}
		if ev.Reference != self || ev.Threshold != workload.MismatchThreshold(self) {
			t.Errorf("%s steps %d: threshold %.3f from reference %.3f, want from the reference's self-agreement %.3f",
				c.method, c.steps, ev.Threshold, ev.Reference, self)
		}
		t.Logf("%s steps %d: %s, agreement %.3f (reference %.3f, threshold %.3f)", c.method, c.steps, c.check, c.agreement, self, ev.Threshold)
	}
	if n := scalar[int](t, db, `SELECT count(*) FROM run_summary WHERE method = 'broken' AND status = 'ok'`); n != 2*2 {
		t.Errorf("%d ok runs of the broken method, want its 4: a mismatch does not stop the point", n)
	}
}

func TestOutputCheckOnTheSimulator(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	f := writeSpec(t, outcheckSpec(testhost.SimBinary(t), 31784))
	r := specsweep(t, 4*time.Minute, "run", "--db", f.db, f.spec)
	if r.code != 0 {
		t.Fatalf("run failed:\n%s", r)
	}
	db := openDB(t, f.db)
	checkVerdicts(t, db)
	// runs --best never names the broken method, though it measures as fast as eagle3.
	best := specsweep(t, time.Minute, "runs", "--db", f.db, "--best", "--format", "csv")
	if best.code != 0 || strings.Contains(best.stdout, "broken") || !strings.Contains(best.stdout, "eagle3") {
		t.Errorf("runs --best:\n%s", best)
	}
	if !strings.Contains(strings.ToLower(r.stdout), "mismatch") {
		t.Errorf("run's results do not show the mismatch:\n%s", r.stdout)
	}
	st := specsweep(t, time.Minute, "status", "--db", f.db, "e2e-outcheck")
	if !strings.Contains(strings.ToLower(st.stdout), "mismatch") {
		t.Errorf("status does not show the mismatch:\n%s", st)
	}
	out := filepath.Join(f.dir, "report")
	rep := specsweep(t, 2*time.Minute, "report", "--db", f.db, "e2e-outcheck", "--format", "md", "-o", out)
	if rep.code != 0 {
		t.Fatalf("report:\n%s", rep)
	}
	mds, _ := filepath.Glob(filepath.Join(out, "*.md"))
	var md string
	for _, m := range mds {
		md += mustRead(t, m)
	}
	if i, j := strings.Index(md, "Output check"), strings.Index(md, "broken"); i < 0 || j < 0 || !strings.Contains(md, "mismatch") {
		t.Errorf("the report has no output check section naming the broken method (files %v)", mds)
	}
}

// TestOutputCheckSurvivesAKill: kill -9 once the reference has answered and again later; the rerun
// keeps what was compared and compares the rest.
func TestOutputCheckSurvivesAKill(t *testing.T) {
	defer parallel(t)() // shares nothing (docs/development.md, "Parallel end-to-end tests")
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	f := writeSpec(t, outcheckSpec(testhost.SimBinary(t), 31785))
	killRuns(t, f, 0, 2*time.Second)
	r := specsweep(t, 4*time.Minute, "run", "--db", f.db, f.spec)
	if r.code != 0 {
		t.Fatalf("final run failed:\n%s", r)
	}
	db := openDB(t, f.db)
	checkVerdicts(t, db)
	if n := scalar[int](t, db, `SELECT count(*) FROM (SELECT point_id, concurrency, repeat FROM run_summary
		WHERE status = 'ok' GROUP BY 1, 2, 3 HAVING count(*) > 1)`); n != 0 {
		t.Errorf("%d runs recorded more than once", n)
	}
}
