package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/sweep"
)

// fallingSpec is the stored spec of adaptiveDB's sweep: a baseline and an EAGLE-3 chain on a local
// host whose command is relative to the spec's folder.
const fallingSpec = `version: 1
name: falling
hosts: [{name: local, driver: local, gpus: 1}]
server:
  command: [../bin/sglangsim]
  args: [--model-path, /m]
  env: {SGLANGSIM_TIME_SCALE: "0.1"}
methods:
  baseline: []
  eagle3: {args: [--speculative-algorithm, EAGLE3], env: {X: "1"}}
matrix: {method: [baseline, eagle3], num_steps: [1, 3, 7], topk: [1]}
workload: {concurrency: [1, 16, 64], requests: 8, input_tokens: 64, output_tokens: 32, repeats: 2}
search: {strategy: grid}
schedule: {cron: "0 3 * * *"}
`

// TestVerifyWritesTheVerificationSpec: verify --no-run writes a spec of the baseline, the best fixed
// configuration of each phase level, the default and the fitted adaptive schedules (the fitted one
// a file of its method) and a schedule of the user's (starting where SGLang would: the middle of its
// candidates [0, 1, 3]), under the default phases; the source's
// search and schedule are dropped and its relative command made absolute.
func TestVerifyWritesTheVerificationSpec(t *testing.T) {
	db := adaptiveDBWith(t, fallingSpec)
	dir := t.TempDir()
	out := filepath.Join(dir, "v.yaml")
	given := filepath.Join(dir, "mine.json")
	if err := os.WriteFile(given, []byte(`{"1": {"candidate_steps": [1, 3]}, "32": {"candidate_steps": [0]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runMain(t, nil, "verify", "--db", db, "-o", out, "--spec-dir", "/srv/specs/x", "--schedule", given, "--no-run", "falling")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"sweep falling-verify, 5 point(s) under phases c=1:1m0s,c=64:1m0s,c=1:1m0s",
		"best-c1           eagle3 s=7 k=1 n=8, the sweep's best at concurrency 1",
		"note: the recommended configuration is the baseline", "Run it with: specsweep run " + out,
		"note: the adaptive servers run with --max-running-requests 64: SGLang caps a speculative server at 48"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	spec, err := sweep.Load(out)
	if err != nil {
		t.Fatalf("the written spec does not load: %v", err)
	}
	if info, err := os.Stat(out); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("spec mode %v (%v), want 0600: it holds the source's environment", info.Mode().Perm(), err)
	}
	if spec.Search != nil || spec.Schedule != nil || spec.Server.Command[0] != "/srv/specs/bin/sglangsim" {
		t.Errorf("search %v, schedule %v, command %q", spec.Search, spec.Schedule, spec.Server.Command[0])
	}
	var labels []string
	for _, p := range spec.Plan().Points {
		labels = append(labels, p.Label())
	}
	want := []string{"baseline tp=1", "best-c1 s=7 k=1 n=8 tp=1", "adaptive-default s=3 k=1 n=4 tp=1", "adaptive-fitted s=7 k=1 n=8 tp=1", "adaptive-given s=1 k=1 n=2 tp=1"}
	if strings.Join(labels, "; ") != strings.Join(want, "; ") {
		t.Errorf("points %v, want %v", labels, want)
	}
	fitted, mine := spec.Methods["adaptive-fitted"], spec.Methods["adaptive-given"]
	cfg := filepath.Join(dir, "falling-verify-adaptive.json")
	if len(fitted.Files) != 1 || fitted.Files[0].Path != cfg || !strings.Contains(fitted.Files[0].Content, `"32": {"candidate_steps": [0]`) {
		t.Errorf("fitted files %+v", fitted.Files)
	}
	if args := strings.Join(fitted.Args, " "); !strings.HasSuffix(args, "--speculative-adaptive --max-running-requests 64 --speculative-adaptive-config "+cfg) || fitted.Env["X"] != "1" {
		t.Errorf("fitted args %q env %v", args, fitted.Env)
	}
	if len(mine.Files) != 1 || !strings.Contains(mine.Files[0].Content, `[1, 3]`) {
		t.Errorf("given files %+v", mine.Files)
	}
	if len(spec.Workload.Phases) != 3 || spec.Workload.Requests != 0 || spec.Workload.Repeats != 2 {
		t.Errorf("workload %+v", spec.Workload)
	}
}

// TestVerifyBadInputs: bad flags and a sweep without what verify needs get clear errors.
func TestVerifyBadInputs(t *testing.T) {
	db := adaptiveDBWith(t, fallingSpec)
	dir := t.TempDir()
	notObject := filepath.Join(dir, "list.json")
	noSteps := filepath.Join(dir, "zero.json")
	os.WriteFile(notObject, []byte(`[1, 3]`), 0o644)
	os.WriteFile(noSteps, []byte(`{"1": {"candidate_steps": [0]}}`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--phases", "c=1:60s,c=64"}, `--phases c=1:60s,c=64: "c=64": want c=CONCURRENCY:DURATION`},
		{[]string{"--phases", "c=0:60s"}, "the concurrency must be an integer from 1 to 4096"},
		{[]string{"--phases", "c=1:2h"}, "the duration must be from 1s to 1h"},
		{[]string{"--config-path", "rel/a.json"}, "--config-path: file path \"rel/a.json\" is not absolute"},
		{[]string{"--schedule", notObject}, "not a JSON object"},
		{[]string{"--schedule", noSteps}, "no slot has a candidate step above 0"},
		{[]string{"--schedule", filepath.Join(dir, "missing.json")}, "no such file"},
	} {
		args := append(append([]string{"verify", "--db", db, "-o", filepath.Join(dir, "v.yaml"), "--no-run"}, c.args...), "falling")
		_, stderr, code := runMain(t, nil, args...)
		if code == ExitOK || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr, c.want)
		}
	}
}
