package sweep_test

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/sweep"
)

const sourcesSpec = `version: 1
name: sources
hosts: [{name: h1, address: h1.example}]
server: {command: [/usr/bin/python3, -m, sglang.launch_server]}
methods: {baseline: []}
matrix: {method: [baseline]}
workload:
  concurrency: [1, 8]
  requests: 8
  output_tokens: 64
`

func parseCells(t *testing.T, workload string) *sweep.Spec {
	t.Helper()
	s, err := sweep.Parse("sources.yaml", []byte(sourcesSpec+workload))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCells: what every level is measured on, in order, with weights that sum to 1.
func TestCells(t *testing.T) {
	for _, tc := range []struct {
		workload string
		want     []string
		weights  []float64
	}{
		{"  input_tokens: 512\n", []string{"random@512"}, []float64{1}},
		{"  input_tokens: [1024, 8192]\n", []string{"random@1024", "random@8192"}, []float64{0.5, 0.5}},
		{"  dataset: sharegpt:/d/sg.json\n", []string{"sharegpt"}, []float64{1}},
		{"  datasets: [{name: code, path: c.jsonl, weight: 3}, {name: chat, path: p.jsonl}]\n",
			[]string{"code", "chat"}, []float64{0.75, 0.25}},
		{"  datasets: [{name: code, path: c.jsonl, weight: 3}, {name: chat, path: p.jsonl}]\n  input_tokens: [1024, 8192]\n",
			[]string{"code@1024", "code@8192", "chat@1024", "chat@8192"}, []float64{0.375, 0.375, 0.125, 0.125}},
	} {
		s := parseCells(t, tc.workload)
		sources := s.Workload.Sources()
		var got []string
		sum := 0.0
		for i, c := range sources {
			got = append(got, c.Label())
			sum += c.Weight
			if i < len(tc.weights) && math.Abs(c.Weight-tc.weights[i]) > 1e-12 {
				t.Errorf("%q: source %s weighs %g, want %g", tc.workload, c.Label(), c.Weight, tc.weights[i])
			}
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%q: sources %v, want %v", tc.workload, got, tc.want)
		}
		if math.Abs(sum-1) > 1e-12 {
			t.Errorf("%q: weights sum to %g", tc.workload, sum)
		}
		if runs := s.Plan().Runs; runs != len(s.Plan().Points)*2*len(tc.want) {
			t.Errorf("%q: plans %d runs", tc.workload, runs)
		}
	}
}

// TestSetHash: a set's content hash, name, path, format and weight are part of the spec hash (a
// changed file is a changed spec); where the file is resolved is not.
func TestSetHash(t *testing.T) {
	base := parseCells(t, "  datasets: [{name: code, path: c.jsonl}]\n")
	h0 := base.Hash()
	base.ResolveSetPaths("/somewhere")
	if base.Workload.Datasets[0].File != "/somewhere/c.jsonl" {
		t.Errorf("resolved to %q", base.Workload.Datasets[0].File)
	}
	if base.Hash() != h0 {
		t.Error("resolving the path changed the hash")
	}
	base.Workload.Datasets[0].ContentHash = "abc"
	if base.Hash() == h0 {
		t.Error("the content hash is not in the spec hash")
	}
	for _, w := range []string{
		"  datasets: [{name: code, path: c.jsonl, weight: 2}]\n",
		"  datasets: [{name: code, path: c.jsonl, format: jsonl}]\n",
		"  datasets: [{name: code2, path: c.jsonl}]\n",
		"  datasets: [{name: code, path: c.jsonl}]\n  input_tokens: [512]\n",
	} {
		if parseCells(t, w).Hash() == h0 {
			t.Errorf("%q hashes as the base", w)
		}
	}
	// A spec without sets keeps the hash it had before sets existed.
	old := parseCells(t, "  input_tokens: 512\n")
	if strings.Contains(string(mustJSON(t, old)), "datasets") || strings.Contains(string(mustJSON(t, old)), "input_lengths") {
		t.Errorf("a spec without sets or lengths encodes them: %s", mustJSON(t, old))
	}
}

func mustJSON(t *testing.T, s *sweep.Spec) []byte {
	t.Helper()
	b, err := json.Marshal(s.Workload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPhases: phases replace concurrency and requests, list their concurrencies as the levels, and
// number each phase's run by its concurrency's occurrence.
func TestPhases(t *testing.T) {
	s, err := sweep.Parse("p.yaml", []byte(`version: 1
name: phases
hosts: [{name: h1, address: h1.example}]
server: {command: [/usr/bin/python3, -m, sglang.launch_server]}
methods: {baseline: []}
matrix: {method: [baseline]}
workload:
  input_tokens: 64
  output_tokens: 32
  repeats: 2
  phases: [{concurrency: 1, for: 60s}, {concurrency: 64, for: 30s}, {concurrency: 1, for: 60s}]
`))
	if err != nil {
		t.Fatal(err)
	}
	w := s.Workload
	if len(w.Phases) != 3 || w.Phases[1] != (sweep.Phase{Concurrency: 64, For: 30 * time.Second}) || fmt.Sprint(w.Concurrency) != "[1 64]" {
		t.Errorf("phases %+v, levels %v", w.Phases, w.Concurrency)
	}
	if got := fmt.Sprint(w.Occurrences()); got != "[[1 1 2] [3 2 4]]" {
		t.Errorf("occurrences %s", got)
	}
	if p := s.Plan(); p.Runs != 6 {
		t.Errorf("runs %d, want 3 phases x 2 repeats", p.Runs)
	}
	for _, bad := range []struct{ workload, want string }{
		{"  input_tokens: 64\n  output_tokens: 32\n  concurrency: [1]\n  phases: [{concurrency: 1, for: 1s}]\n", "give phases, or concurrency and requests, not both"},
		{"  input_tokens: [64, 128]\n  output_tokens: 32\n  phases: [{concurrency: 1, for: 1s}]\n", "phases measure one prompt source"},
		{"  input_tokens: 64\n  output_tokens: 32\n", `missing required key "concurrency" in workload (or give phases)`},
		{"  input_tokens: 64\n  output_tokens: 32\n  phases: [{concurrency: 1, for: 2h}]\n", "workload.phases[0].for"},
		{"  input_tokens: 64\n  output_tokens: 32\n  phases: [{concurrency: 1}]\n", `missing required key "for"`},
	} {
		_, err := sweep.Parse("p.yaml", []byte(strings.Split(sourcesSpec, "workload:")[0]+"workload:\n"+bad.workload))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.workload, err, bad.want)
		}
	}
}
