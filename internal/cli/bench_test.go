package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/workload"
)

// benchSim is a running sglangsim for the bench command's tests.
type benchSim struct{ URL string }

// startBenchSim starts the real simulator (EAGLE3 steps 3 when spec) with metrics, as startSim
// does.
func startBenchSim(t *testing.T, spec bool) *benchSim {
	t.Helper()
	args := []string{"--enable-metrics"}
	if spec {
		args = append(args, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/eagle3",
			"--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")
	}
	return &benchSim{URL: startSim(t, args)}
}

func runBench(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = Main(context.Background(), append([]string{"bench"}, args...),
		Env{Stdout: &o, Stderr: &e, Getenv: func(string) string { return "" }})
	return o.String(), e.String(), code
}

// jsonKeys returns an object's keys in their order.
func jsonKeys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %q", line)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func TestBenchCLIJSON(t *testing.T) {
	sim := startBenchSim(t, true)
	save := filepath.Join(t.TempDir(), "reqs.jsonl")
	out, errs, code := runBench(t, "--url", sim.URL, "--concurrency", "1,3", "--requests", "6", "--warmup", "1",
		"--input-tokens", "32", "--output-tokens", "20", "--json", "--save-requests", save, "--api", "completions")
	if code != ExitOK {
		t.Fatalf("code %d\n%s\n%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one JSON line per level:\n%s", out)
	}
	want := "max_concurrency completed failed duration total_input_tokens total_output_tokens request_throughput " +
		"input_throughput output_throughput mean_ttft_ms median_ttft_ms p99_ttft_ms mean_itl_ms median_itl_ms " +
		"p99_itl_ms mean_tpot_ms median_tpot_ms mean_e2e_latency_ms median_e2e_latency_ms accept_length"
	if strings.Join(workload.BenchServingFields, " ") != want {
		t.Errorf("BenchServingFields drifted: %v", workload.BenchServingFields)
	}
	for i, l := range lines {
		if got := strings.Join(jsonKeys(t, l), " "); got != want {
			t.Errorf("keys\n got %s\nwant %s", got, want)
		}
		var bs workload.BenchServing
		json.Unmarshal([]byte(l), &bs)
		if bs.MaxConcurrency != []int{1, 3}[i] || bs.Completed != 6 || bs.Failed != 0 || bs.TotalInputTokens != 6*32 ||
			bs.TotalOutputTokens != 6*20 || bs.AcceptLength == nil || bs.MedianTTFTMs == nil {
			t.Errorf("level %d: %s", i, l)
		}
	}
	b, err := os.ReadFile(save)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != 12 {
		t.Errorf("%d saved requests, want 12", n)
	}
	if errs != "" {
		t.Errorf("stderr is not a terminal, yet: %q", errs)
	}
}

func TestBenchCLITableAndFailures(t *testing.T) {
	sim := startBenchSim(t, false)
	out, errs, code := runBench(t, "--url", sim.URL, "--request-rate", "200", "--requests", "5", "--warmup", "0",
		"--input-tokens", "8", "--output-tokens", "8")
	if code != ExitOK {
		t.Fatalf("code %d\n%s\n%s", code, out, errs)
	}
	if !strings.HasPrefix(out, "request_rate  concurrency  completed") || !strings.Contains(out, "200") {
		t.Errorf("table:\n%s", out)
	}
	// A level of HTTP errors: exit 1, the causes on stderr.
	out, errs, code = runBench(t, "--url", sim.URL, "--requests", "3", "--warmup", "0", "--input-tokens", "8",
		"--output-tokens", "300000", "--json")
	if code != ExitFailure || !strings.Contains(errs, "HTTP 400") || !strings.Contains(out, `"completed":0`) {
		t.Errorf("code %d\n%s\n%s", code, out, errs)
	}
}

func TestBenchCLIUsage(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte("not json"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, ExitUsage, "--url is required"},
		{[]string{"--url", "http://127.0.0.1:1", "--api", "grpc"}, ExitUsage, "unknown --api"},
		{[]string{"--url", "http://127.0.0.1:1", "--concurrency", "1,x"}, ExitUsage, "bad --concurrency"},
		{[]string{"--url", "http://127.0.0.1:1", "--requests", "3", "--duration", "1s"}, ExitUsage, "not both"},
		{[]string{"--url", "http://127.0.0.1:1", "--dataset", "alpaca"}, ExitUsage, "unknown --dataset"},
		{[]string{"--url", "http://127.0.0.1:1", "--dataset", "sharegpt:" + bad}, ExitFailure, "not JSON"},
		{[]string{"--url", "http://127.0.0.1:1"}, ExitFailure, "connection refused"},
	} {
		_, errs, code := runBench(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: code %d, stderr %q; want %d %q", c.args, code, errs, c.code, c.want)
		}
	}
}

// TestBenchCLIPromptSets: --dataset NAME=PATH measures each level on each prompt set file (at each
// --pad-to length), the rows and JSON lines naming the set; a bad line is refused with its number.
func TestBenchCLIPromptSets(t *testing.T) {
	sim := startBenchSim(t, true)
	dir := t.TempDir()
	code := filepath.Join(dir, "code.jsonl")
	var b strings.Builder
	for i := range 4 {
		fmt.Fprintf(&b, "{\"prompt\": \"func f%d(x int) int { if x > 0 { return x * %d }; return -x }\"}\n", i, i)
	}
	os.WriteFile(code, []byte(b.String()), 0o644)
	chat := filepath.Join(dir, "question.jsonl")
	os.WriteFile(chat, []byte(`{"question_id": 1, "category": "writing", "turns": ["Tell a short story.", "Shorter."]}`+"\n"), 0o644)
	out, errs, rc := runBench(t, "--url", sim.URL, "--concurrency", "1,2", "--requests", "4", "--warmup", "0",
		"--output-tokens", "8", "--dataset", "code="+code, "--dataset", "chat="+chat, "--pad-to", "64,128", "--json")
	if rc != ExitOK {
		t.Fatalf("code %d\n%s\n%s", rc, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var got []string
	for _, l := range lines {
		var v struct {
			MaxConcurrency int    `json:"max_concurrency"`
			Dataset        string `json:"dataset"`
			PadTo          int    `json:"pad_to"`
			Completed      int    `json:"completed"`
			Input          int    `json:"total_input_tokens"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("c=%d %s@%d", v.MaxConcurrency, v.Dataset, v.PadTo))
		// Every first turn is padded to the length; a chat's second turn carries the history.
		if v.Completed != 4 || v.Input < 2*v.PadTo {
			t.Errorf("%s: %d completed, %d input tokens", l, v.Completed, v.Input)
		}
	}
	want := "c=1 code@64 c=1 code@128 c=1 chat@64 c=1 chat@128 c=2 code@64 c=2 code@128 c=2 chat@64 c=2 chat@128"
	if strings.Join(got, " ") != want {
		t.Errorf("levels %q, want %q", strings.Join(got, " "), want)
	}
	out, errs, rc = runBench(t, "--url", sim.URL, "--requests", "2", "--warmup", "0", "--output-tokens", "8", "--dataset", "code="+code)
	if rc != ExitOK || !strings.HasPrefix(out, "dataset  concurrency") || !strings.Contains(out, "code ") {
		t.Errorf("table: code %d\n%s\n%s", rc, out, errs)
	}
	os.WriteFile(code, []byte("{\"prompt\": \"ok\"}\n{\"prompt\": \n"), 0o644)
	_, errs, rc = runBench(t, "--url", sim.URL, "--dataset", "code="+code)
	if rc != ExitFailure || !strings.Contains(errs, "code.jsonl:2") {
		t.Errorf("a bad line: code %d, stderr %q", rc, errs)
	}
}
