package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/internal/testhost"
)

// TestMain holds the default ports (testhost.GuardDefaultPorts): a command a test runs that starts a
// server or the daemon on a default port fails here every time, not only where another program holds it.
func TestMain(m *testing.M) {
	done := testhost.GuardDefaultPorts()
	os.Exit(done(m.Run()))
}

func runMain(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, Env{
		Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] },
	})
	return out.String(), errb.String(), code
}

func TestParseInterleaved(t *testing.T) {
	cases := []struct {
		args     []string
		wantPos  []string
		wantJSON bool
		wantDB   string
	}{
		{[]string{"spec.yaml", "--json"}, []string{"spec.yaml"}, true, ""},
		{[]string{"--json", "spec.yaml"}, []string{"spec.yaml"}, true, ""},
		{[]string{"a", "--db", "x.db", "b", "--json"}, []string{"a", "b"}, true, "x.db"},
		{[]string{"--db=x.db", "--", "--json"}, []string{"--json"}, false, "x.db"},
		{[]string{"a", "--", "--json"}, []string{"a", "--json"}, false, ""},
		{nil, nil, false, ""},
	}
	for _, c := range cases {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		js := fs.Bool("json", false, "")
		db := fs.String("db", "", "")
		pos, err := parseInterleaved(fs, c.args)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if !reflect.DeepEqual(pos, c.wantPos) || *js != c.wantJSON || *db != c.wantDB {
			t.Errorf("%q: got pos=%q json=%v db=%q, want %q %v %q", c.args, pos, *js, *db, c.wantPos, c.wantJSON, c.wantDB)
		}
	}
}

func TestUsageAndHelp(t *testing.T) {
	if _, errs, code := runMain(t, nil); code != ExitUsage || !strings.Contains(errs, "Usage: specsweep") {
		t.Errorf("no args: code %d, stderr %q", code, errs)
	}
	if _, errs, code := runMain(t, nil, "frobnicate"); code != ExitUsage || !strings.Contains(errs, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: code %d, stderr %q", code, errs)
	}
	for _, c := range commands() {
		out, _, code := runMain(t, nil, c.name, "--help")
		if code != ExitOK || !strings.Contains(out, "Usage: specsweep "+c.name) {
			t.Errorf("%s --help: code %d, out %q", c.name, code, out)
		}
	}
	if _, errs, code := runMain(t, nil, "plan", "--bogus", "x.yaml"); code != ExitUsage || !strings.Contains(errs, "bogus") {
		t.Errorf("bad flag: code %d, stderr %q", code, errs)
	}
	if _, errs, code := runMain(t, nil, "plan"); code != ExitUsage || !strings.Contains(errs, "missing SPEC") {
		t.Errorf("missing arg: code %d, stderr %q", code, errs)
	}
	if _, errs, code := runMain(t, nil, "plan", "a.yaml", "b.yaml"); code != ExitUsage || !strings.Contains(errs, "expected one SPEC") {
		t.Errorf("two args: code %d, stderr %q", code, errs)
	}
}

func exampleSpecs(t *testing.T) []string {
	t.Helper()
	var specs []string
	mine, _ := filepath.Glob("../../examples/*.yaml")
	for _, f := range mine {
		specs = append(specs, exampleCopy(t, filepath.Base(f)))
	}
	shared, _ := filepath.Glob("../../../shared/examples/*.yaml")
	specs = append(specs, shared...)
	if len(specs) == 0 {
		t.Fatal("no example specs found")
	}
	return specs
}

// exampleCopy is examples/NAME copied into a temporary tree beside a bin/sglangsim stand-in, as the
// example sits in a checkout after make build: its `../bin/sglangsim` (resolved against the spec's
// folder) exists without building anything, and no test depends on what bin/ holds.
func exampleCopy(t *testing.T, name string) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"examples", "bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "sglangsim"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("../../examples", name))
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(root, "examples", name)
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestValidateAndPlanExamples(t *testing.T) {
	for _, spec := range exampleSpecs(t) {
		t.Run(filepath.Base(spec), func(t *testing.T) {
			out, errs, code := runMain(t, nil, "validate", spec)
			if code != ExitOK || !strings.Contains(out, ": ok:") {
				t.Fatalf("validate: code %d\nstdout %s\nstderr %s", code, out, errs)
			}
			out, errs, code = runMain(t, nil, "plan", spec)
			if code != ExitOK || !strings.Contains(out, "runs; rough duration") {
				t.Fatalf("plan: code %d\nstdout %s\nstderr %s", code, out, errs)
			}
			out, errs, code = runMain(t, nil, "plan", spec, "--json")
			if code != ExitOK {
				t.Fatalf("plan --json: code %d, stderr %s", code, errs)
			}
			var p struct {
				Name     string            `json:"name"`
				SpecHash string            `json:"spec_hash"`
				Points   []map[string]any  `json:"points"`
				Skipped  []map[string]any  `json:"skipped"`
				Runs     int               `json:"runs"`
				Extra    map[string]string `json:"-"`
			}
			if err := json.Unmarshal([]byte(out), &p); err != nil {
				t.Fatalf("plan --json is not JSON: %v\n%s", err, out)
			}
			if p.Name == "" || len(p.SpecHash) < 16 || len(p.Points) == 0 || p.Runs == 0 {
				t.Fatalf("plan --json incomplete: %+v", p)
			}
			for _, pt := range p.Points {
				for _, k := range []string{"id", "method", "num_steps", "topk", "num_draft_tokens", "tp", "argv"} {
					if _, ok := pt[k]; !ok {
						t.Errorf("point lacks %q: %v", k, pt)
					}
				}
			}
			for _, s := range p.Skipped {
				if r, _ := s["reason"].(string); r == "" {
					t.Errorf("skipped entry without reason: %v", s)
				}
			}
		})
	}
}

func TestValidateReportsEveryErrorWithPosition(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "bad.yaml")
	text := `version: 1
name: bad
hosts:
  - name: a
    address: a.example
    gpus: 0
    colour: blue
server:
  command: [python, -m, sglang.launch_server]
  args: []
methods:
  base: []
matrix:
  method: [base, nosuch]
  tp: [1]
workload:
  concurrency: [1]
  requests: 8
  input_tokens: 16
  output_tokens: 16
`
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code := runMain(t, nil, "validate", spec)
	if code != ExitFailure {
		t.Fatalf("code %d, want %d; stderr %s", code, ExitFailure, errs)
	}
	for _, want := range []string{spec + ":6:", spec + ":7:", spec + ":9:", spec + ":14:"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks an error at %q:\n%s", want, errs)
		}
	}
	if _, _, code := runMain(t, nil, "validate", filepath.Join(dir, "missing.yaml")); code != ExitFailure {
		t.Errorf("missing file: code %d", code)
	}
}
