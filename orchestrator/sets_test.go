package orchestrator

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

func setsSpec(t *testing.T, api string) (*sweep.Spec, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "code.jsonl"), []byte(`{"prompt": "def f(x): return x"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "q.jsonl"), []byte(`{"question_id": 1, "category": "writing", "turns": ["Tell a story.", "Again."]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := sweep.Parse("s.yaml", []byte(`version: 1
name: sets
hosts: [{name: a, address: a.example}]
server: {command: [/opt/sglang/bin/python, -m, sglang.launch_server]}
methods: {baseline: []}
matrix: {method: [baseline]}
workload:
  api: `+api+`
  concurrency: [1]
  requests: 4
  output_tokens: 8
  datasets: [{name: code, path: code.jsonl, weight: 3}, {name: chat, path: q.jsonl}]
`))
	if err != nil {
		t.Fatal(err)
	}
	spec.ResolveSetPaths(dir)
	return spec, dir
}

// TestPromptSetsAreHashed: reading the sets puts their content in the spec hash; a file changed
// since is refused when the sweep starts, by its set's hash or by the stored sweep's.
func TestPromptSetsAreHashed(t *testing.T) {
	ctx := context.Background()
	spec, dir := setsSpec(t, "chat")
	before := spec.Hash()
	sets, err := ReadPromptSets(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 2 || spec.Workload.Datasets[0].ContentHash == "" || spec.Hash() == before {
		t.Fatalf("sets %d, hash %q, spec hash changed %v", len(sets), spec.Workload.Datasets[0].ContentHash, spec.Hash() != before)
	}
	planned := spec.Plan().SpecHash
	if _, err := checkPromptSets(ctx, spec, planned); err != nil {
		t.Fatalf("unchanged files refused: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "code.jsonl"), []byte(`{"prompt": "def g(y): return y"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := checkPromptSets(ctx, spec, planned); err == nil || !strings.Contains(err.Error(), "prompt set code") || !strings.Contains(err.Error(), "changed since the sweep was planned") {
		t.Errorf("a changed file: %v", err)
	}
	// The daemon parses the stored text again: no content hashes, the stored sweep's hash decides.
	again, _ := setsSpec(t, "chat")
	again.ResolveSetPaths(dir)
	if _, err := checkPromptSets(ctx, again, planned); err == nil || !strings.Contains(err.Error(), "changed since the sweep was planned") {
		t.Errorf("a changed file read by the daemon: %v", err)
	}
}

// TestMultiTurnSetNeedsChat: a set with conversations of several turns is refused for the
// completions API, which carries one prompt.
func TestMultiTurnSetNeedsChat(t *testing.T) {
	spec, _ := setsSpec(t, "completions")
	if _, err := ReadPromptSets(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "need workload.api chat") {
		t.Errorf("multi-turn over completions: %v", err)
	}
}

// TestSearchKnowledgeIsTheWeightedMix: the search reads a level as its prompt sources' weighted mix,
// and a level one of whose sources failed does not count.
func TestSearchKnowledgeIsTheWeightedMix(t *testing.T) {
	spec, _ := setsSpec(t, "chat")
	v := func(x float64) *float64 { return &x }
	p := store.SearchPoint{PointID: "p", State: store.PointDone, Runs: []store.SearchRun{
		{Concurrency: 1, Repeat: 1, Status: store.RunOK, Dataset: "code", OutputTokS: v(300), AcceptLength: v(4)},
		{Concurrency: 1, Repeat: 1, Status: store.RunOK, Dataset: "chat", OutputTokS: v(100), AcceptLength: v(2)},
		{Concurrency: 8, Repeat: 1, Status: store.RunOK, Dataset: "code", OutputTokS: v(900), AcceptLength: v(4)},
		{Concurrency: 8, Repeat: 1, Status: store.RunFailed, Dataset: "chat"},
	}}
	k := SearchKnowledge(p, spec.Workload.Sources())
	l, ok := k.Levels[1]
	// Three parts code at 300 tok/s, one part chat at 100: 1/(0.75/300 + 0.25/100) = 200.
	if !ok || len(l.OutputTokS) != 1 || l.OutputTokS[0] < 199.999 || l.OutputTokS[0] > 200.001 {
		t.Errorf("c=1: %+v, want the mix's 200 tok/s", l)
	}
	if _, ok := k.Levels[8]; ok {
		t.Errorf("c=8 counts although its chat source failed: %+v", k.Levels[8])
	}
}
