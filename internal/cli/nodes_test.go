package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const groupSpec = `version: 1
name: two-nodes
hosts:
  - name: pair
    gpus: 4
    nodes: [{name: gpu-a, address: 10.231.250.1}, {address: 10.231.250.2}]
server: {command: [/opt/sglang/bin/python, -m, sglang.launch_server]}
methods: {baseline: []}
matrix: {method: [baseline], tp: [4, 8]}
workload: {concurrency: [1], requests: 2, input_tokens: 8, output_tokens: 8}
`

// TestPlanShowsTheRanks: plan lists the points that span nodes with their ranks and rendezvous.
func TestPlanShowsTheRanks(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "two-nodes.yaml")
	if err := os.WriteFile(spec, []byte(groupSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := runMain(t, nil, "plan", spec)
	if code != ExitOK {
		t.Fatalf("plan: exit %d\n%s", code, errs)
	}
	want := []string{"points that span nodes", "pair  8   2 x 4 GPUs  gpu-a, pair-1  10.231.250.1:<free port>"}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("plan lacks %q:\n%s", w, out)
		}
	}
}
