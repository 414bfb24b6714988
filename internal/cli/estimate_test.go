package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// roughDuration reads plan's "rough duration D" and the line of its basis.
func roughDuration(t *testing.T, out string) (time.Duration, string) {
	t.Helper()
	m := regexp.MustCompile(`rough duration (\S+)\n  based on (.*)\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("plan prints no rough duration and basis:\n%s", out)
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatalf("rough duration %q: %v", m[1], err)
	}
	return d, m[2]
}

// TestPlanEstimatesFromMeasuredTimes: plan's rough duration comes from this model's load times and
// decode speeds measured in the store when there are any, else from the simulator's time scale when
// the server is sglangsim at one, else from the assumptions, and says which.
func TestPlanEstimatesFromMeasuredTimes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// plan checks that a local command can start here: a stand-in is enough, nothing runs.
	stub := writeFile(t, dir, "sglangsim", "#!/bin/sh\nexit 1\n")
	if err := os.Chmod(stub, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := writeFile(t, dir, "cell.yaml", stateSpec(stub, 31999))

	// The simulator at 0.01 with no load or warmup: well under a second, not minutes.
	out, errs, code := runMain(t, nil, "plan", spec)
	if code != ExitOK {
		t.Fatalf("plan: exit %d\n%s", code, errs)
	}
	d, basis := roughDuration(t, out)
	if d > time.Second || !strings.HasPrefix(basis, "the simulator's time scale (SGLANGSIM_TIME_SCALE 0.01: a 0s load and 10000 output tok/s per stream, 100x real time)") {
		t.Errorf("plan of a simulator at 0.01: %s, based on %q", d, basis)
	}

	// A store where this model at this scale got ready in 3 s and decoded 100 tok/s at c=1 and 2
	// (100 and 50 per stream), and another model took 100 s.
	s, err := sweep.Load(spec)
	if err != nil {
		t.Fatal(err)
	}
	dbFile := filepath.Join(dir, "m.db")
	db, err := store.Open(ctx, dbFile)
	if err != nil {
		t.Fatal(err)
	}
	measure := func(s *sweep.Spec, load time.Duration, tok float64) {
		sw, err := orchestrator.Submit(ctx, db, s, orchestrator.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		id, pid := sw.ID, s.Plan().Points[0].ID
		att, err := db.ClaimPoint(ctx, id, pid, "local")
		if err != nil {
			t.Fatal(err)
		}
		if err := db.SetPointInfo(ctx, id, pid, att, store.PointInfo{Load: load}); err != nil {
			t.Fatal(err)
		}
		for _, c := range s.Workload.Concurrency {
			if err := db.RecordRun(ctx, store.Run{SweepID: id, PointID: pid, Attempt: att, Concurrency: c, Repeat: 1, Status: store.RunOK,
				Metrics: &store.Metrics{Requests: 2, Completed: 2, OutputTokS: tok, RequestS: 1}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	measure(s, 3*time.Second, 100)
	other := writeFile(t, dir, "other.yaml", strings.Replace(stateSpec("/opt/sglangsim", 31999), "Qwen3.5-122B-A10B", "Other-122B", 1))
	o, err := sweep.Load(other)
	if err != nil {
		t.Fatal(err)
	}
	measure(o, 100*time.Second, 1)
	db.Close()

	out, errs, code = runMain(t, nil, "plan", "--db", dbFile, spec)
	if code != ExitOK {
		t.Fatalf("plan --db: exit %d\n%s", code, errs)
	}
	d, basis = roughDuration(t, out)
	// 3 s load + 0.05 s stop + the default 4 warmup requests: 2 waves of 8 tokens at c=2, 50 tok/s
	// per stream + c=1: 2 waves at 100 tok/s + c=2: 1 wave at 50 tok/s.
	want := 3*time.Second + 50*time.Millisecond + 320*time.Millisecond + 160*time.Millisecond + 160*time.Millisecond
	if d < want-100*time.Millisecond || d > want+100*time.Millisecond {
		t.Errorf("plan --db: %s, want about %s", d, want)
	}
	if basis != "the median load time of 1 measured point(s), 3s and the decode speed of 2 measured run(s) at 2 of the 2 concurrency levels "+
		"of model /models/Qwen3.5-122B-A10B at SGLANGSIM_TIME_SCALE 0.01 in "+dbFile {
		t.Errorf("plan --db: based on %q", basis)
	}

	// A real server without measurements: the assumptions, named.
	real := writeFile(t, dir, "real.yaml", `version: 1
name: real
hosts: [{name: h, address: h.example, gpus: 4}]
server: {command: [/opt/sglang/bin/python, -m, sglang.launch_server], args: [--model-path, /models/Qwen3.5-122B-A10B]}
methods: {baseline: []}
matrix: {method: [baseline], tp: [4]}
workload: {concurrency: [1], requests: 2, input_tokens: 16, output_tokens: 100}
`)
	out, _, _ = runMain(t, nil, "plan", "--db", dbFile, real)
	d, basis = roughDuration(t, out)
	// 90 s load + 5 s stop + 4 warmup waves and 2 measured ones of 100 tokens at 100 tok/s.
	if d != 101*time.Second || !strings.HasPrefix(basis, `the assumptions of docs/spec.md ("Estimate"): a 90s load and 100 output tok/s per stream`) {
		t.Errorf("plan of a real server: %s, based on %q", d, basis)
	}
}
