package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 25: a method naming the algorithm twice validates with a warning at the ignored
// occurrence saying which one SGLang uses; the spec stays valid.
func TestValidateWarnsRepeatedFlag(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "twice.yaml")
	text := `version: 1
name: twice
hosts:
  - {name: a, address: a.example, gpus: 1}
server:
  command: [/usr/bin/python3, -m, sglang.launch_server]
  args: [--model-path, /m]
methods:
  base: []
  spec: [--speculative-algorithm, EAGLE3, --speculative-algo, NGRAM]
matrix:
  method: [base, spec]
  topk: [4]
workload:
  concurrency: [1]
  requests: 8
  input_tokens: 16
  output_tokens: 16
`
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := runMain(t, nil, "validate", spec)
	if code != ExitOK || !strings.Contains(out, ": ok:") {
		t.Fatalf("validate: code %d\nstdout %s\nstderr %s", code, out, errs)
	}
	want := spec + ":10:10: warning: methods.spec[0]: --speculative-algorithm is given twice; SGLang uses the last occurrence, methods.spec[2] (line 10): --speculative-algo NGRAM\n"
	if errs != want {
		t.Errorf("stderr %q, want %q", errs, want)
	}
	// It is planned as NGRAM: the topk is its BFS breadth, no num_steps is needed.
	if out, _, _ := runMain(t, nil, "plan", spec, "--json"); !strings.Contains(out, `"algorithm": "NGRAM"`) || strings.Contains(out, `"algorithm": "EAGLE3"`) {
		t.Errorf("plan --json does not run NGRAM:\n%s", out)
	}
}
