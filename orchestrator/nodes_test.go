package orchestrator

import (
	"slices"
	"testing"

	"github.com/specsweep/specsweep/sweep"
)

// TestSpansOf: a host that spans nodes runs the plan's tps it takes on one node or whole nodes; a
// host of one machine is left to its GPUs (nil).
func TestSpansOf(t *testing.T) {
	spec, err := sweep.Parse("s.yaml", []byte(`version: 1
name: s
hosts:
  - {name: pair, gpus: 4, nodes: [{address: a}, {address: b}]}
  - {name: cl, driver: slurm, gpus: 2, slurm: {max_nodes: 3}}
  - {name: one, address: c, gpus: 8}
server: {command: [/opt/sglang/bin/python, -m, sglang.launch_server]}
methods: {baseline: []}
matrix: {method: [baseline], tp: [2, 4, 6, 8]}
workload: {concurrency: [1], requests: 2, input_tokens: 8, output_tokens: 8}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := spansOf(spec, spec.Plan().Points)
	for host, want := range map[string][]int{"pair": {2, 4, 8}, "cl": {2, 4, 6}} {
		if !slices.Equal(got[host], want) {
			t.Errorf("%s runs tps %v, want %v", host, got[host], want)
		}
	}
	if _, ok := got["one"]; ok {
		t.Errorf("a host of one machine has span tps: %v", got["one"])
	}
}
