package orchestrator

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// TestPrepareRefusesWhatSpansNodes: a point that spans a cluster's nodes plans and validates but is
// refused before anything is stored (the job script does not start ranks yet): never a sweep whose
// spanning points would stay pending. A group's points are stored.
func TestPrepareRefusesWhatSpansNodes(t *testing.T) {
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	const tail = `
server: {command: [/opt/sglang/bin/python, -m, sglang.launch_server]}
methods: {baseline: []}
matrix: {method: [baseline], tp: [TP]}
workload: {concurrency: [1], requests: 2, input_tokens: 8, output_tokens: 8}
`
	for _, c := range []struct{ name, hosts, tp, want string }{
		{"cluster", "hosts: [{name: cl, driver: slurm, gpus: 4, slurm: {max_nodes: 2}}]", "8", `points of tp 8 span 2 nodes of host "cl"`},
	} {
		spec, err := sweep.Parse(c.name+".yaml", []byte("version: 1\nname: "+c.name+"\n"+c.hosts+strings.Replace(tail, "TP", c.tp, 1)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Prepare(t.Context(), db, spec, false)
		if !errors.Is(err, ErrSpansNodes) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrSpansNodes saying %q", c.name, err, c.want)
		}
		if _, err = Submit(t.Context(), db, spec, SubmitOptions{}); !errors.Is(err, ErrSpansNodes) {
			t.Errorf("%s: submit: %v, want ErrSpansNodes", c.name, err)
		}
		if _, err := db.LatestSweepByName(t.Context(), c.name); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: a sweep was stored: %v", c.name, err)
		}
	}
	// A group runs its spanning points; a cluster that may span nodes runs the points that fit one.
	group, err := sweep.Parse("group.yaml", []byte("version: 1\nname: group\nhosts: [{name: pair, gpus: 4, nodes: [{address: a}, {address: b}]}]"+strings.Replace(tail, "TP", "8", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(t.Context(), db, group, false); err != nil {
		t.Errorf("tp 8 on a group of two 4-GPU nodes: %v", err)
	}
	spec, err := sweep.Parse("one.yaml", []byte("version: 1\nname: one\nhosts: [{name: cl, driver: slurm, gpus: 4, slurm: {max_nodes: 2}}]"+strings.Replace(tail, "TP", "4", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(t.Context(), db, spec, false); err != nil {
		t.Errorf("tp 4 on 4-GPU nodes: %v", err)
	}
}
