package sweep_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/sweep"
)

// TestHostSpan: a tp within a node takes one node; above it, a whole number of nodes the host
// has; anything else none.
func TestHostSpan(t *testing.T) {
	group := sweep.Host{GPUs: 4, Nodes: make([]sweep.Node, 3)}
	cluster := sweep.Host{GPUs: 8, Slurm: &sweep.Slurm{MaxNodes: 2}}
	single := sweep.Host{GPUs: 8, Slurm: &sweep.Slurm{}}
	for _, c := range []struct {
		h        sweep.Host
		tp, want int
	}{
		{group, 1, 1}, {group, 4, 1}, {group, 8, 2}, {group, 12, 3}, {group, 16, 0}, {group, 6, 0}, {group, 0, 0},
		{cluster, 8, 1}, {cluster, 16, 2}, {cluster, 24, 0}, {cluster, 12, 0},
		{single, 8, 1}, {single, 16, 0},
	} {
		if got := c.h.Span(c.tp); got != c.want {
			t.Errorf("gpus %d nodes %d: Span(%d) = %d, want %d", c.h.GPUs, c.h.NodeCount(), c.tp, got, c.want)
		}
	}
	if group.Fits(8) {
		t.Error("Fits(8) on 4-GPU nodes: Fits is one node's")
	}
}

// TestGroupNodes: a group's nodes are named when unnamed and inherit the group's SSH settings
// unless they give their own; the plan lays out the tps that span nodes.
func TestGroupNodes(t *testing.T) {
	s, err := sweep.Load("testdata/nodes.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pair := s.Hosts[0]
	want := []sweep.Node{
		{Name: "gpu-a", Address: "10.231.250.1", User: "sglang", IdentityFile: "/home/op/.ssh/id_ed25519"},
		{Name: "pair-1", Address: "10.231.250.2:2222", User: "other", IdentityFile: "/home/op/.ssh/id_ed25519"},
	}
	if !slices.Equal(pair.Nodes, want) || pair.DistInitPort != 29500 || pair.Address != "" {
		t.Errorf("nodes = %+v (dist_init_port %d, address %q), want %+v", pair.Nodes, pair.DistInitPort, pair.Address, want)
	}
	if c := s.Hosts[1]; c.Slurm == nil || c.Slurm.MaxNodes != 2 {
		t.Errorf("cluster = %+v", c)
	}
	p := s.Plan()
	wantSpans := []sweep.Span{
		{Host: "pair", TP: 8, Nodes: 2, GPUsPerNode: 4, Ranks: []string{"gpu-a", "pair-1"}, DistInit: "10.231.250.1:29500"},
		{Host: "cluster", TP: 16, Nodes: 2, GPUsPerNode: 8, DistInit: "<first node of the job>:<free port>"},
	}
	got, _ := json.Marshal(p.Spans)
	w, _ := json.Marshal(wantSpans)
	if string(got) != string(w) {
		t.Errorf("spans = %s\nwant    %s", got, w)
	}
	// tp 16 fits no node of the group (4 nodes' worth) but runs on the cluster: planned.
	tps := map[int]int{}
	for _, pt := range p.Points {
		tps[pt.TP]++
		// The rank flags are the runner's, per rank: never in a point's argv.
		if slices.ContainsFunc(pt.Argv, func(a string) bool { return strings.HasPrefix(a, "--node-rank") || strings.HasPrefix(a, "--nnodes") }) {
			t.Errorf("point %s argv holds a rank flag: %q", pt.ID, pt.Argv)
		}
	}
	if tps[4] == 0 || tps[8] == 0 || tps[16] == 0 {
		t.Errorf("points per tp = %v, want each of 4, 8, 16", tps)
	}
	// Spans are outside the hash: a spec without groups hashes as before.
	b, _ := json.Marshal(sweep.Host{Name: "h", GPUs: 1})
	if strings.Contains(string(b), "nodes") || strings.Contains(string(b), "dist_init_port") {
		t.Errorf("a host without nodes marshals %s: the hash of every earlier spec would change", b)
	}
}

// TestRankArgs: each rank adds SGLang's three flags, the same --dist-init-addr on every rank.
func TestRankArgs(t *testing.T) {
	got := sweep.RankArgs(2, 1, "10.231.250.1:29500")
	want := []string{"--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.231.250.1:29500"}
	if !slices.Equal(got, want) {
		t.Errorf("RankArgs = %q, want %q", got, want)
	}
	for _, c := range [][2]string{{"10.231.250.1", "10.231.250.1"}, {"h:22", "h"}, {"[fd00::1]:22", "fd00::1"}, {"fd00::1", "fd00::1"}} {
		if got := sweep.AddressHost(c[0]); got != c[1] {
			t.Errorf("AddressHost(%q) = %q, want %q", c[0], got, c[1])
		}
	}
}
