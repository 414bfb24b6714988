package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/store"
)

// testPhasesOnTheSimulator: a load of phases (issue 28) holds each concurrency for its time on one
// server, back to back, and records a run per phase, numbered by its concurrency's occurrence, with
// its output tok/s over time.
func testPhasesOnTheSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	f := writeSpec(t, fmt.Sprintf(`version: 1
name: e2e-phases
hosts: [{name: here, driver: local, gpus: 4}]
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.5-122B-A10B, --host, 127.0.0.1, --port, "31851", --enable-metrics]
  env: {%s}
  port: 31851
  ready_timeout: 1m
  stop_timeout: 20s
methods:
  baseline: []
matrix: {method: [baseline], tp: [4]}
workload:
  input_tokens: 64
  output_tokens: 32
  warmup_requests: 2
  output_check: false
  phases: [{concurrency: 1, for: 3s}, {concurrency: 8, for: 3s}, {concurrency: 1, for: 3s}]
`, testhost.SimBinary(t), fastEnv))
	r := specsweep(t, 3*time.Minute, "run", "--db", f.db, f.spec)
	if r.code != 0 {
		t.Fatalf("run failed:\n%s", r)
	}
	ctx := context.Background()
	db, err := store.Open(ctx, f.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := db.RunDetails(ctx, store.RunsQuery{OrderBy: "started_at"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, run := range runs {
		got = append(got, fmt.Sprintf("c=%d#%d %s", run.Concurrency, run.Repeat, run.Status))
		if d := deref(run.DurationS); !(d >= 2.5 && d < 6) {
			t.Errorf("c=%d#%d lasted %.2f s, its phase 3 s", run.Concurrency, run.Repeat, d)
		}
	}
	if fmt.Sprint(got) != "[c=1#1 ok c=8#1 ok c=1#2 ok]" {
		t.Errorf("runs %v", got)
	}
	evs, err := db.Events(ctx, runs[0].SweepID, "")
	if err != nil {
		t.Fatal(err)
	}
	var phases []store.PhaseSeries
	for _, e := range evs {
		if ph, ok := e.PhaseSeries(); ok {
			phases = append(phases, ph)
		}
	}
	if len(phases) != 3 {
		t.Fatalf("%d phase events", len(phases))
	}
	for i, ph := range phases {
		sum := 0.0
		for _, v := range ph.TokS {
			sum += v * float64(ph.WidthMS) / 1000
		}
		want := float64(deref2(runs[i].TotalOutputTokens))
		if ph.Phase != i+1 || ph.Of != 3 || len(ph.TokS) < 3 || sum < 0.999*want || sum > 1.001*want {
			t.Errorf("phase %d: %+v holds %.0f tokens, its run %.0f", i+1, ph, sum, want)
		}
	}
	// The report lists the phases in order, with their tok/s over the first and last quarter.
	rep := specsweep(t, time.Minute, "report", "--db", f.db, "--format", "md", "-o", filepath.Join(f.dir, "report"), "e2e-phases")
	if rep.code != 0 {
		t.Fatalf("report failed:\n%s", rep)
	}
	md, err := os.ReadFile(filepath.Join(f.dir, "report", "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Phases", "| baseline | 4 | 1 | 1 | 1 | 3s |", "| baseline | 4 | 1 | 2 | 8 | 3s |", "| baseline | 4 | 1 | 3 | 1 | 3s |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	// Eight streams make more tokens per second than one.
	if mean(phases[1].TokS[:2]) <= mean(phases[0].TokS[:2]) {
		t.Errorf("c=8 %v not above c=1 %v", phases[1].TokS, phases[0].TokS)
	}
}

func deref2(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
