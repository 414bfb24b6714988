package sweep_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/sweep"
)

// spec builds a valid spec around the given methods and matrix blocks.
func spec(methods, matrix string) string {
	return `version: 1
name: t
hosts:
  - {name: small, address: small.example, gpus: 2}
  - {name: big, address: big.example, gpus: 8}
server:
  command: [/usr/bin/python3, -m, sglang.launch_server]
  args: [--model-path, /m]
  env: {SGL_FORCE_SHUTDOWN: "1", SHARED: server}
methods:
` + methods + `
matrix:
` + matrix + `
workload:
  concurrency: [1, 4]
  requests: 8
  input_tokens: 128
  output_tokens: 64
`
}

func mustParse(t *testing.T, src string) *sweep.Spec {
	t.Helper()
	s, err := sweep.Parse("spec.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse:\n%v\nspec:\n%s", err, src)
	}
	return s
}

func labels(p *sweep.Plan) []string {
	var l []string
	for _, pt := range p.Points {
		l = append(l, pt.Label())
	}
	return l
}

func TestDefaults(t *testing.T) {
	s := mustParse(t, `version: 1
name: d
hosts: [{name: h, address: h.example}]
server: {command: [/bin/sglang]}
methods: {baseline: }
matrix: {method: [baseline]}
workload: {concurrency: [1], requests: 1, input_tokens: 1, output_tokens: 1}
`)
	wantHost := sweep.Host{Name: "h", Address: "h.example", Unit: "sglang.service", Driver: "ssh", GPUs: 1}
	if !reflect.DeepEqual(s.Hosts, []sweep.Host{wantHost}) {
		t.Errorf("hosts = %+v", s.Hosts)
	}
	wantServer := sweep.Server{Command: []string{"/bin/sglang"}, Args: []string{}, Port: 30000,
		ReadyTimeout: 20 * time.Minute, StopTimeout: 90 * time.Second}
	if !reflect.DeepEqual(s.Server, wantServer) {
		t.Errorf("server = %+v", s.Server)
	}
	wantWorkload := sweep.Workload{API: "chat", Concurrency: []int{1}, Requests: 1, WarmupRequests: 4,
		InputTokens: 1, OutputTokens: 1, Dataset: "random", Repeats: 1, Seed: 1,
		OutputCheck: sweep.OutputCheck{Enabled: true, Prompts: 8, MaxTokens: 64}}
	if !reflect.DeepEqual(s.Workload, wantWorkload) {
		t.Errorf("workload = %+v", s.Workload)
	}
	if !reflect.DeepEqual(s.Matrix.TP, []int{1}) || len(s.Matrix.NumDraftTokens) != 1 || !s.Matrix.NumDraftTokens[0].Auto {
		t.Errorf("matrix = %+v", s.Matrix)
	}
	if s.Schedule != nil || s.Version != 1 || s.Name != "d" || s.File != "spec.yaml" || len(s.Source) == 0 {
		t.Errorf("spec = %+v", s)
	}
	if m := s.Methods["baseline"]; !m.Baseline() || m.Name != "baseline" {
		t.Errorf("method = %+v", m)
	}
}

func TestMethodForms(t *testing.T) {
	s := mustParse(t, spec(`  a: []
  b:
  c: [--speculative-algorithm, EAGLE3, --x]
  d: {args: ["--speculative-algorithm=NEXTN"], env: {V: tree}}
  e: {env: {V: "1"}}`, `  method: [a, b, c, d, e]
  num_steps: [1]
  topk: [1]`))
	for name, want := range map[string]string{"a": "", "b": "", "c": "EAGLE3", "d": "NEXTN", "e": ""} {
		m := s.Methods[name]
		if got := m.Algorithm(); got != want {
			t.Errorf("%s: Algorithm = %q, want %q", name, got, want)
		}
		if m.Baseline() != (want == "") {
			t.Errorf("%s: Baseline = %v", name, m.Baseline())
		}
	}
	if got := s.Methods["d"].Env; !reflect.DeepEqual(got, map[string]string{"V": "tree"}) {
		t.Errorf("d env = %v", got)
	}
}

func TestExpansion(t *testing.T) {
	tests := []struct {
		name    string
		methods string
		matrix  string
		points  []string
		skipped []string // "label-ish: reason substring"
	}{{
		name:    "topk=1 auto is num_steps+1",
		methods: "  e: [--speculative-algorithm, EAGLE3]",
		matrix:  "  method: [e]\n  num_steps: [1, 3]\n  topk: [1]\n  num_draft_tokens: [auto]",
		points:  []string{"e s=1 k=1 n=2 tp=1", "e s=3 k=1 n=4 tp=1"},
	}, {
		name:    "topk=1 forces num_steps+1",
		methods: "  e: [--speculative-algorithm, EAGLE3]",
		matrix:  "  method: [e]\n  num_steps: [3]\n  topk: [1]\n  num_draft_tokens: [4, 8]",
		points:  []string{"e s=3 k=1 n=4 tp=1"},
		skipped: []string{"e s=3 k=1 n=8: topk=1 forces num_draft_tokens=num_steps+1=4 (SGLang would silently run 4, not 8)"},
	}, {
		name:    "auto needs topk=1",
		methods: "  e: [--speculative-algorithm, EAGLE3]",
		matrix:  "  method: [e]\n  num_steps: [3]\n  topk: [2]\n  num_draft_tokens: [auto, 6]",
		points:  []string{"e s=3 k=2 n=6 tp=1"},
		skipped: []string{"e s=3 k=2 n=auto: num_draft_tokens auto needs topk=1"},
	}, {
		name:    "tree size bound is inclusive",
		methods: "  e: [--speculative-algorithm, EAGLE]",
		matrix:  "  method: [e]\n  num_steps: [3]\n  topk: [4]\n  num_draft_tokens: [13, 14]",
		points:  []string{"e s=3 k=4 n=13 tp=1"},
		skipped: []string{"e s=3 k=4 n=14: num_draft_tokens 14 exceeds num_steps*topk+1 = 13"},
	}, {
		name:    "duplicates merged",
		methods: "  e: [--speculative-algorithm, EAGLE3]\n  f: [--speculative-algorithm, EAGLE3]",
		matrix:  "  method: [e, f]\n  num_steps: [2, 2]\n  topk: [1]\n  num_draft_tokens: [auto, 3]",
		points:  []string{"e s=2 k=1 n=3 tp=1"},
		skipped: []string{
			"e s=2 k=1 n=3: duplicate of ", "e s=2 k=1 n=auto: duplicate of ", "e s=2 k=1 n=3: duplicate of ",
			"f s=2 k=1 n=auto: duplicate of ", "f s=2 k=1 n=3: duplicate of ", "f s=2 k=1 n=auto: duplicate of ", "f s=2 k=1 n=3: duplicate of ",
		},
	}, {
		name:    "baseline collapses to one point per tp",
		methods: "  base: []\n  e: [--speculative-algorithm, EAGLE3]",
		matrix:  "  method: [base, e]\n  num_steps: [1, 2]\n  topk: [1, 2]\n  num_draft_tokens: [auto, 3]\n  tp: [2, 1]",
		points: []string{"base tp=1", "base tp=2",
			"e s=1 k=1 n=2 tp=1", "e s=1 k=2 n=3 tp=1", "e s=2 k=1 n=3 tp=1", "e s=2 k=2 n=3 tp=1",
			"e s=1 k=1 n=2 tp=2", "e s=1 k=2 n=3 tp=2", "e s=2 k=1 n=3 tp=2", "e s=2 k=2 n=3 tp=2"},
		skipped: []string{
			"e s=1 k=1 n=3: topk=1 forces", "e s=1 k=2 n=auto: num_draft_tokens auto needs topk=1",
			"e s=2 k=1 n=3: duplicate of ", "e s=2 k=2 n=auto: num_draft_tokens auto needs topk=1",
			"e s=1 k=1 n=3: topk=1 forces", "e s=1 k=2 n=auto: num_draft_tokens auto needs topk=1",
			"e s=2 k=1 n=3: duplicate of ", "e s=2 k=2 n=auto: num_draft_tokens auto needs topk=1",
		},
	}, {
		name:    "identical baselines are duplicates",
		methods: "  a: []\n  b:",
		matrix:  "  method: [a, b]\n  tp: [1]",
		points:  []string{"a tp=1"},
		skipped: []string{"b: duplicate of "},
	}, {
		name:    "baselines differing by env are distinct",
		methods: "  a: []\n  b: {env: {X: '1'}}",
		matrix:  "  method: [a, b]",
		points:  []string{"a tp=1", "b tp=1"},
	}, {
		name:    "DFLASH: a point per block size, num_steps and topk not applied",
		methods: "  d: [--speculative-algorithm, DFLASH]",
		matrix:  "  method: [d]\n  num_steps: [1, 2]\n  topk: [1, 4]\n  num_draft_tokens: [16, auto, 8, 16]",
		points:  []string{"d block=auto tp=1", "d block=8 tp=1", "d block=16 tp=1"},
		skipped: []string{"d n=16: duplicate of "},
	}, {
		name:    "DSPARK: gamma is num_draft_tokens-1",
		methods: "  d: [--speculative-algorithm, DSPARK]",
		matrix:  "  method: [d]\n  num_draft_tokens: [auto, 1, 2, 6]",
		points:  []string{"d gamma=auto tp=1", "d gamma=1 tp=1", "d gamma=5 tp=1"},
		skipped: []string{"d n=1: num_draft_tokens 1 would be gamma 0: DSPARK verifies gamma+1 tokens and SGLang refuses --speculative-dspark-block-size below 1"},
	}, {
		name:    "NGRAM: topk is the BFS breadth, num_steps not applied, nothing forced",
		methods: "  n: [--speculative-algorithm, NGRAM]",
		matrix:  "  method: [n]\n  num_steps: [1, 5]\n  topk: [10, 1]\n  num_draft_tokens: [auto, 4]",
		points:  []string{"n k=1 n=4 tp=1", "n k=1 n=12 tp=1", "n k=10 n=4 tp=1", "n k=10 n=12 tp=1"},
	}, {
		name:    "NGRAM without topk",
		methods: "  n: [--speculative-algorithm, NGRAM]",
		matrix:  "  method: [n]\n  num_draft_tokens: [8]",
		points:  []string{"n k=10 n=8 tp=1"},
	}, {
		name:    "plugin: as written, nothing forced, lists left out not passed",
		methods: "  p: [--speculative-algorithm, MYTREE]",
		matrix:  "  method: [p]\n  topk: [1]\n  num_draft_tokens: [9, auto]",
		points:  []string{"p k=1 tp=1", "p k=1 n=9 tp=1"},
	}, {
		name:    "families side by side",
		methods: "  base: []\n  e: [--speculative-algorithm, EAGLE3]\n  d: [--speculative-algorithm, DFLASH]\n  n: [--speculative-algorithm, NGRAM]",
		matrix:  "  method: [base, e, d, n]\n  num_steps: [3]\n  topk: [1]\n  num_draft_tokens: [auto, 16]",
		points:  []string{"base tp=1", "e s=3 k=1 n=4 tp=1", "d block=auto tp=1", "d block=16 tp=1", "n k=1 n=12 tp=1", "n k=1 n=16 tp=1"},
		skipped: []string{"e s=3 k=1 n=16: topk=1 forces num_draft_tokens=num_steps+1=4"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, spec(tt.methods, tt.matrix)).Plan()
			if got := labels(p); !slices.Equal(got, tt.points) {
				t.Errorf("points:\n got %q\nwant %q", got, tt.points)
			}
			if len(p.Skipped) != len(tt.skipped) {
				t.Fatalf("skipped %d, want %d: %+v", len(p.Skipped), len(tt.skipped), p.Skipped)
			}
			for i, sk := range p.Skipped {
				got := sk.Method
				if sk.NumSteps != nil {
					got += " s=" + itoa(*sk.NumSteps)
				}
				if sk.TopK != nil {
					got += " k=" + itoa(*sk.TopK)
				}
				if sk.NumDraftTokens != "" {
					got += " n=" + sk.NumDraftTokens
				}
				got += ": " + sk.Reason
				if !strings.HasPrefix(got, tt.skipped[i]) {
					t.Errorf("skipped[%d] = %q, want prefix %q", i, got, tt.skipped[i])
				}
				if id, ok := strings.CutPrefix(sk.Reason, "duplicate of "); ok && !slices.ContainsFunc(p.Points, func(pt sweep.Point) bool { return pt.ID == id }) {
					t.Errorf("skipped[%d] is a duplicate of %s, which is not a point", i, id)
				}
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestArgvAndEnv(t *testing.T) {
	s := mustParse(t, spec("  base: []\n  e: {args: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /d], env: {SHARED: method, ONLY: m}}",
		"  method: [base, e]\n  num_steps: [3]\n  topk: [1]\n  tp: [2]"))
	p := s.Plan()
	if len(p.Points) != 2 {
		t.Fatalf("points = %v", labels(p))
	}
	base, e := p.Points[0], p.Points[1]
	wantBase := []string{"/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/m", "--tp-size", "2"}
	if !slices.Equal(base.Argv, wantBase) || !base.Baseline || base.NumSteps != nil {
		t.Errorf("baseline = %+v", base)
	}
	wantE := []string{"/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/m",
		"--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
		"--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
		"--tp-size", "2"}
	if !slices.Equal(e.Argv, wantE) || e.Baseline {
		t.Errorf("eagle3 argv = %q", e.Argv)
	}
	if want := map[string]string{"SGL_FORCE_SHUTDOWN": "1", "SHARED": "server"}; !reflect.DeepEqual(base.Env, want) {
		t.Errorf("baseline env = %v", base.Env)
	}
	if want := map[string]string{"SGL_FORCE_SHUTDOWN": "1", "SHARED": "method", "ONLY": "m"}; !reflect.DeepEqual(e.Env, want) {
		t.Errorf("eagle3 env = %v", e.Env)
	}
	// The spec's own env maps are not shared with the points.
	if s.Server.Env["SHARED"] != "server" {
		t.Error("plan modified server env")
	}
}

func TestPointIDStable(t *testing.T) {
	// A golden id: changing the encoding orphans every stored point.
	const golden = "ff01459e5d6c"
	s, err := sweep.Load("testdata/eagle3-steps.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := s.Plan()
	if p.Points[0].ID != golden {
		t.Errorf("baseline id = %s, want %s", p.Points[0].ID, golden)
	}
	// Reformatted, reordered, commented: same ids.
	src := `# reformatted
name: qwen122b-eagle3-steps
version: 1
workload: {api: chat, concurrency: [1, 4, 16, 32, 64], requests: 64, warmup_requests: 4,
  input_tokens: 1024, output_tokens: 512, dataset: random}
matrix: {tp: [4], num_draft_tokens: [auto], topk: [1], num_steps: [10, 5, 4, 3, 2, 1], method: [eagle3, baseline]}
methods:
  eagle3: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /root/models/Qwen3.5-122B-A10B-EAGLE3]
  baseline: []
server:
  env: {SGL_FORCE_SHUTDOWN: 1}
  stop_timeout: 1m
  command: [/opt/sglang/.venv/bin/python, -m, sglang.launch_server]
  args: [--model-path, /root/models/Qwen3.5-122B-A10B, --host, 0.0.0.0, --port, 30000,
         --mem-fraction-static, "0.85", --enable-metrics]
hosts: [{name: other, address: elsewhere.example, gpus: 8}]
`
	q := mustParse(t, src).Plan()
	ids := func(p *sweep.Plan) []string {
		var l []string
		for _, pt := range p.Points {
			l = append(l, pt.ID)
		}
		slices.Sort(l)
		return l
	}
	if !slices.Equal(ids(p), ids(q)) {
		t.Errorf("ids changed:\n%v\n%v", ids(p), ids(q))
	}
	if id := sweep.PointID([]string{"a"}, map[string]string{}, 1); id != sweep.PointID([]string{"a"}, nil, 1) {
		t.Error("empty and nil env differ")
	}
	if sweep.PointID([]string{"a"}, nil, 1) == sweep.PointID([]string{"a"}, nil, 2) ||
		sweep.PointID([]string{"a"}, nil, 1) == sweep.PointID([]string{"a"}, map[string]string{"X": ""}, 1) ||
		sweep.PointID([]string{"a", "b"}, nil, 1) == sweep.PointID([]string{"ab"}, nil, 1) {
		t.Error("distinct configs share an id")
	}
}

func TestOrdering(t *testing.T) {
	p := mustParse(t, spec("  z: [--speculative-algorithm, EAGLE3]\n  base: []\n  a: [--speculative-algorithm, NEXTN]",
		"  method: [z, base, a]\n  num_steps: [2, 1]\n  topk: [2, 1]\n  num_draft_tokens: [3, auto]\n  tp: [8, 1]")).Plan()
	want := []string{
		"base tp=1", "base tp=8",
		"z s=1 k=1 n=2 tp=1", "z s=1 k=2 n=3 tp=1", "z s=2 k=1 n=3 tp=1", "z s=2 k=2 n=3 tp=1",
		"a s=1 k=1 n=2 tp=1", "a s=1 k=2 n=3 tp=1", "a s=2 k=1 n=3 tp=1", "a s=2 k=2 n=3 tp=1",
		"z s=1 k=1 n=2 tp=8", "z s=1 k=2 n=3 tp=8", "z s=2 k=1 n=3 tp=8", "z s=2 k=2 n=3 tp=8",
		"a s=1 k=1 n=2 tp=8", "a s=1 k=2 n=3 tp=8", "a s=2 k=1 n=3 tp=8", "a s=2 k=2 n=3 tp=8",
	}
	if got := labels(p); !slices.Equal(got, want) {
		t.Errorf("order:\n got %q\nwant %q", got, want)
	}
}

func TestHash(t *testing.T) {
	a := mustParse(t, spec("  base: []", "  method: [base]"))
	// Comments, flow style, key order and explicit defaults do not matter.
	b := mustParse(t, `# a comment
workload: {output_tokens: 64, input_tokens: 128, requests: 8, concurrency: [1, 4], api: chat, repeats: 1}
matrix: {method: [base], tp: [1]}
methods: {base: }
server:
  env: {SHARED: server, SGL_FORCE_SHUTDOWN: 1}
  args: [--model-path, /m]
  command: [/usr/bin/python3, -m, sglang.launch_server]
  port: 30000
  ready_timeout: 20m
hosts:
  - {name: small, address: small.example, gpus: 2, unit: sglang.service}
  - {gpus: 8, name: big, address: big.example, driver: ssh}
name: t
version: 1
`)
	if a.Hash() != b.Hash() {
		t.Error("equivalent specs hash differently")
	}
	if len(a.Hash()) != 64 || a.Plan().SpecHash != a.Hash() {
		t.Errorf("hash = %q", a.Hash())
	}
	c := mustParse(t, strings.Replace(spec("  base: []", "  method: [base]"), "requests: 8", "requests: 9", 1))
	if a.Hash() == c.Hash() {
		t.Error("different specs hash alike")
	}
}

func TestPlanJSON(t *testing.T) {
	p := mustParse(t, spec("  base: []\n  e: [--speculative-algorithm, EAGLE3]",
		"  method: [base, e]\n  num_steps: [1]\n  topk: [1]\n  num_draft_tokens: [auto, 5]")).Plan()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var k []string
		for key := range m {
			k = append(k, key)
		}
		slices.Sort(k)
		return k
	}
	if k := keys(got); !slices.Equal(k, []string{"name", "notes", "points", "runs", "skipped", "spec_hash"}) {
		t.Errorf("plan keys = %v", k)
	}
	points := got["points"].([]any)
	base := points[0].(map[string]any)
	for _, k := range []string{"num_steps", "topk", "num_draft_tokens"} {
		if v, ok := base[k]; !ok || v != nil {
			t.Errorf("baseline %s = %v, %v; want null", k, v, ok)
		}
	}
	if k := keys(base); !slices.Equal(k, []string{"argv", "baseline", "env", "id", "method", "num_draft_tokens", "num_steps", "topk", "tp"}) {
		t.Errorf("point keys = %v", k)
	}
	e := points[1].(map[string]any)
	if e["num_draft_tokens"] != 2.0 || e["tp"] != 1.0 || e["algorithm"] != "EAGLE3" {
		t.Errorf("point = %v", e)
	}
	if k := keys(e); !slices.Equal(k, []string{"algorithm", "argv", "baseline", "env", "id", "method", "num_draft_tokens", "num_steps", "params", "topk", "tp"}) {
		t.Errorf("speculative point keys = %v", k)
	}
	param := e["params"].([]any)[2].(map[string]any)
	if want := map[string]any{"name": "speculative_num_draft_tokens", "flag": "--speculative-num-draft-tokens", "requested": 2.0, "expected": 2.0}; !reflect.DeepEqual(param, want) {
		t.Errorf("param = %v", param)
	}
	if n := got["notes"].([]any); len(n) != 0 {
		t.Errorf("notes = %v", n)
	}
	sk := got["skipped"].([]any)[0].(map[string]any)
	if k := keys(sk); !slices.Equal(k, []string{"method", "num_draft_tokens", "num_steps", "reason", "topk", "tp"}) {
		t.Errorf("skipped keys = %v", k)
	}
	if sk["num_draft_tokens"] != 5.0 || sk["num_steps"] != 1.0 {
		t.Errorf("skipped = %v", sk)
	}
	if got["runs"] != 4.0 {
		t.Errorf("runs = %v", got["runs"])
	}
	// Skipped round-trips, "auto" and baselines included.
	for _, s := range []sweep.Skipped{
		{Method: "e", NumSteps: new(int), TopK: new(int), NumDraftTokens: "auto", TP: 2, Reason: "r"},
		{Method: "b", TP: 1, Reason: "duplicate of x"},
	} {
		b, _ := json.Marshal(s)
		var back sweep.Skipped
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, s) {
			t.Errorf("round trip %s -> %+v, %v", b, back, err)
		}
	}
	// An empty plan still has lists, not nulls.
	if b, _ := json.Marshal(&sweep.Plan{Points: []sweep.Point{}, Skipped: []sweep.Skipped{}}); !strings.Contains(string(b), `"skipped":[]`) {
		t.Errorf("empty plan = %s", b)
	}
}

func TestEstimate(t *testing.T) {
	// One point: 90 s load + 5 s stop + warmup ceil(4/4) waves + ladder
	// (ceil(8/1) + ceil(8/4)) waves, a wave being 64 tokens / 100 tok/s.
	one := mustParse(t, spec("  base: []", "  method: [base]")).Plan()
	wave := 640 * time.Millisecond
	want := 95*time.Second + (1+8+2)*wave
	if one.Estimate != want {
		t.Errorf("estimate = %v, want %v", one.Estimate, want)
	}
	// Two tp=1 points run in parallel on the two hosts; a tp=8 point only on big.
	two := mustParse(t, spec("  base: []\n  x: {env: {X: '1'}}", "  method: [base, x]\n  tp: [1]")).Plan()
	if two.Estimate != want {
		t.Errorf("parallel estimate = %v, want %v", two.Estimate, want)
	}
	three := mustParse(t, spec("  base: []\n  x: {env: {X: '1'}}", "  method: [base, x]\n  tp: [8]")).Plan()
	if three.Estimate != 2*want {
		t.Errorf("tp=8 estimate = %v, want %v", three.Estimate, 2*want)
	}
}

func TestLabel(t *testing.T) {
	n := func(v int) *int { return &v }
	if got := (sweep.Point{Method: "eagle3", NumSteps: n(3), TopK: n(1), NumDraftTokens: n(4), TP: 4}).Label(); got != "eagle3 s=3 k=1 n=4 tp=4" {
		t.Errorf("label = %q", got)
	}
	if got := (sweep.Point{Method: "baseline", TP: 4, Baseline: true}).Label(); got != "baseline tp=4" {
		t.Errorf("label = %q", got)
	}
	for _, tt := range []struct {
		pt   sweep.Point
		want string
	}{
		{sweep.Point{Method: "e", Algorithm: "NEXTN", NumSteps: n(3), TopK: n(4), NumDraftTokens: n(8), TP: 1}, "e s=3 k=4 n=8 tp=1"},
		{sweep.Point{Method: "d", Algorithm: "DFLASH", NumSteps: n(1), TopK: n(1), NumDraftTokens: n(16), TP: 1}, "d block=16 tp=1"},
		{sweep.Point{Method: "d", Algorithm: "DFLASH", NumSteps: n(1), TopK: n(1), TP: 1}, "d block=auto tp=1"},
		{sweep.Point{Method: "ds", Algorithm: "DSPARK", NumDraftTokens: n(6), TP: 1}, "ds gamma=5 tp=1"},
		{sweep.Point{Method: "ng", Algorithm: "NGRAM", TopK: n(10), NumDraftTokens: n(12), TP: 2}, "ng k=10 n=12 tp=2"},
		{sweep.Point{Method: "p", Algorithm: "MYTREE", NumSteps: n(3), NumDraftTokens: n(8), TP: 1}, "p s=3 n=8 tp=1"},
		{sweep.Point{Method: "p", Algorithm: "MYTREE", TP: 1}, "p tp=1"},
	} {
		if got := tt.pt.Label(); got != tt.want {
			t.Errorf("label = %q, want %q", got, tt.want)
		}
	}
}

func TestErrors(t *testing.T) {
	e := &sweep.Error{File: "s.yaml", Line: 7, Col: 5, Msg: `unknown key "foo"`}
	if e.Error() != `s.yaml:7:5: unknown key "foo"` {
		t.Errorf("Error() = %q", e.Error())
	}
	if got := (&sweep.Error{Msg: "m"}).Error(); got != "m" {
		t.Errorf("no position: %q", got)
	}
	l := sweep.ErrorList{e, {File: "s.yaml", Line: 9, Col: 1, Msg: "x"}}
	if l.Error() != e.Error()+"\ns.yaml:9:1: x" {
		t.Errorf("list = %q", l.Error())
	}
	var target *sweep.Error
	if !errors.As(error(l), &target) || target != e {
		t.Error("errors.As does not reach an Error in the list")
	}

	_, err := sweep.Load("testdata/does-not-exist.yaml")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file: %v", err)
	}

	// Problems in several sections are all reported, in position order.
	_, err = sweep.Parse("s.yaml", []byte(strings.NewReplacer("requests: 8", "requests: 0", "gpus: 8", "gpus: x").Replace(spec("  b: []", "  method: [b, c]"))))
	var list sweep.ErrorList
	if !errors.As(err, &list) || len(list) != 3 {
		t.Fatalf("err = %v", err)
	}
	if !slices.IsSortedFunc(list, func(a, b *sweep.Error) int { return a.Line - b.Line }) {
		t.Errorf("not sorted: %v", list)
	}
}

func TestParams(t *testing.T) {
	n := func(v int) *int { return &v }
	p := mustParse(t, spec(`  e: [--speculative-algorithm, EAGLE]
  d: [--speculative-algorithm, DFLASH]
  ds: [--speculative-algorithm, DSPARK]
  ng: [--speculative-algorithm, NGRAM]
  pl: [--speculative-algorithm, MYTREE]`, "  method: [e, d, ds, ng, pl]\n  num_steps: [2]\n  topk: [1]\n  num_draft_tokens: [auto, 6]")).Plan()
	byLabel := map[string][]sweep.Param{}
	for _, pt := range p.Points {
		byLabel[pt.Label()] = pt.Params
		if pt.Algorithm == "" {
			t.Errorf("%s: no algorithm", pt.Label())
		}
	}
	tests := []struct {
		label string
		want  []sweep.Param
	}{
		{"e s=2 k=1 n=3 tp=1", []sweep.Param{
			{Name: "speculative_num_steps", Flag: "--speculative-num-steps", Requested: n(2), Expected: n(2)},
			{Name: "speculative_eagle_topk", Flag: "--speculative-eagle-topk", Requested: n(1), Expected: n(1)},
			{Name: "speculative_num_draft_tokens", Flag: "--speculative-num-draft-tokens", Requested: n(3), Expected: n(3)}}},
		{"d block=6 tp=1", []sweep.Param{
			{Name: "speculative_num_steps", Expected: n(1)}, {Name: "speculative_eagle_topk", Expected: n(1)},
			{Name: "speculative_num_draft_tokens", Expected: n(6)},
			{Name: "speculative_dflash_block_size", Flag: "--speculative-dflash-block-size", Requested: n(6), Expected: n(6)}}},
		{"d block=auto tp=1", []sweep.Param{
			{Name: "speculative_num_steps", Expected: n(1)}, {Name: "speculative_eagle_topk", Expected: n(1)},
			{Name: "speculative_num_draft_tokens"}, {Name: "speculative_dflash_block_size"}}},
		{"ds gamma=5 tp=1", []sweep.Param{
			{Name: "speculative_num_steps", Expected: n(1)}, {Name: "speculative_eagle_topk", Expected: n(1)},
			{Name: "speculative_num_draft_tokens", Expected: n(6)},
			{Name: "speculative_dspark_block_size", Flag: "--speculative-dspark-block-size", Requested: n(5), Expected: n(5)}}},
		{"ng k=1 n=12 tp=1", []sweep.Param{
			{Name: "speculative_num_steps"}, {Name: "speculative_eagle_topk", Expected: n(1)},
			{Name: "speculative_num_draft_tokens", Expected: n(12)},
			{Name: "speculative_ngram_max_bfs_breadth", Flag: "--speculative-ngram-max-bfs-breadth", Requested: n(1), Expected: n(1)}}},
		{"pl s=2 k=1 n=6 tp=1", []sweep.Param{
			{Name: "speculative_num_steps", Flag: "--speculative-num-steps", Requested: n(2)},
			{Name: "speculative_eagle_topk", Flag: "--speculative-eagle-topk", Requested: n(1)},
			{Name: "speculative_num_draft_tokens", Flag: "--speculative-num-draft-tokens", Requested: n(6)}}},
		{"pl s=2 k=1 tp=1", []sweep.Param{
			{Name: "speculative_num_steps", Flag: "--speculative-num-steps", Requested: n(2)},
			{Name: "speculative_eagle_topk", Flag: "--speculative-eagle-topk", Requested: n(1)},
			{Name: "speculative_num_draft_tokens"}}},
	}
	for _, tt := range tests {
		got, ok := byLabel[tt.label]
		if !ok {
			t.Errorf("no point %q in %q", tt.label, labels(p))
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			b, _ := json.Marshal(got)
			t.Errorf("%s: params %s", tt.label, b)
		}
		// Every flag a param names is on the command line with its value.
		for _, pt := range p.Points {
			if pt.Label() != tt.label {
				continue
			}
			for _, prm := range pt.Params {
				if prm.Flag == "" {
					continue
				}
				i := slices.Index(pt.Argv, prm.Flag)
				if i < 0 || pt.Argv[i+1] != itoa(*prm.Requested) {
					t.Errorf("%s: %s %d not in argv %q", tt.label, prm.Flag, *prm.Requested, pt.Argv)
				}
			}
		}
	}
	if pt := p.Points[0]; pt.Params == nil || pt.Baseline {
		t.Errorf("first point = %+v", pt)
	}
	base := mustParse(t, spec("  b: []", "  method: [b]")).Plan().Points[0]
	if base.Params != nil || base.Algorithm != "" {
		t.Errorf("baseline = %+v", base)
	}
}

func TestNotes(t *testing.T) {
	tests := []struct {
		name    string
		methods string
		matrix  string
		want    []string
	}{{
		name:    "EAGLE family and baselines need no note",
		methods: "  b: []\n  e: [--speculative-algorithm, EAGLE3]",
		matrix:  "  method: [b, e]\n  num_steps: [1]\n  topk: [1]",
	}, {
		name:    "DFLASH",
		methods: "  d: [--speculative-algorithm, DFLASH]",
		matrix:  "  method: [d, d]\n  num_steps: [2]\n  num_draft_tokens: [auto, 16]",
		want: []string{
			`method "d" (DFLASH): each num_draft_tokens value is passed as the block size (--speculative-dflash-block-size); num_steps and topk are not applied (DFLASH runs 1 and 1)`,
			`method "d" (DFLASH): num_draft_tokens auto leaves the block size to SGLang (the draft checkpoint's, else 16); the value it runs is read back`,
		},
	}, {
		name:    "DFLASH without other lists",
		methods: "  d: [--speculative-algorithm, dflash]",
		matrix:  "  method: [d]\n  num_draft_tokens: [16]",
		want:    []string{`method "d" (dflash): each num_draft_tokens value is passed as the block size (--speculative-dflash-block-size)`},
	}, {
		name:    "DSPARK",
		methods: "  d: [--speculative-algorithm, DSPARK]",
		matrix:  "  method: [d]\n  num_draft_tokens: [6]",
		want:    []string{`method "d" (DSPARK): each num_draft_tokens value N is passed as gamma N-1 (--speculative-dspark-block-size; DSPARK verifies gamma+1 tokens)`},
	}, {
		name:    "NGRAM with topk and num_steps",
		methods: "  n: [--speculative-algorithm, NGRAM]",
		matrix:  "  method: [n]\n  num_steps: [3]\n  topk: [4]\n  num_draft_tokens: [8]",
		want:    []string{`method "n" (NGRAM): each topk value is passed as --speculative-ngram-max-bfs-breadth (NGRAM's topk); num_steps is not applied (NGRAM does not use it)`},
	}, {
		name:    "NGRAM with SGLang's defaults",
		methods: "  n: [--speculative-algorithm, NGRAM]",
		matrix:  "  method: [n]",
		want:    []string{`method "n" (NGRAM): topk is left to SGLang (--speculative-ngram-max-bfs-breadth defaults to 10); num_draft_tokens auto leaves it to SGLang (12)`},
	}, {
		name:    "plugin",
		methods: "  t: [--speculative-algorithm, MYTREE]",
		matrix:  "  method: [t]\n  tp: [1, 2]",
		want:    []string{`method "t": algorithm "MYTREE" is not one specsweep knows (a plugin?): num_steps, topk and num_draft_tokens are passed as written, nothing is forced or skipped, and the values SGLang runs will be read back`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, spec(tt.methods, tt.matrix)).Plan()
			if !slices.Equal(p.Notes, tt.want) || p.Notes == nil {
				t.Errorf("notes:\n got %q\nwant %q", p.Notes, tt.want)
			}
		})
	}
}

// TestOutputCheckForms: false turns the check off, true and the defaults written out are the
// default (and keep the hash of a spec that says nothing), a mapping sets its keys.
func TestOutputCheckForms(t *testing.T) {
	base := `version: 1
name: t
hosts: [{name: h, address: h.example, gpus: 1}]
server: {command: [/bin/sglang]}
methods: {baseline: []}
matrix: {method: [baseline]}
workload: {concurrency: [1], requests: 1, input_tokens: 1, output_tokens: 1%s}
`
	parse := func(extra string) *sweep.Spec {
		t.Helper()
		s, err := sweep.Parse("t.yaml", []byte(fmt.Sprintf(base, extra)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	none := parse("")
	for _, same := range []string{", output_check: true", ", output_check: {prompts: 8, max_tokens: 64}", ", output_check: {}"} {
		if s := parse(same); s.Hash() != none.Hash() || s.Workload.OutputCheck != sweep.DefaultOutputCheck {
			t.Errorf("%q: check %+v, hash differs: %v", same, s.Workload.OutputCheck, s.Hash() != none.Hash())
		}
	}
	if s := parse(", output_check: false"); s.Workload.OutputCheck.Enabled || s.Hash() == none.Hash() {
		t.Errorf("false: %+v", s.Workload.OutputCheck)
	}
	s := parse(", output_check: {prompts: 4, max_tokens: 32, fail_on_mismatch: true}")
	if c := s.Workload.OutputCheck; !c.Enabled || c.Prompts != 4 || c.MaxTokens != 32 || !c.FailOnMismatch {
		t.Errorf("mapping: %+v", c)
	}
}
