package workload_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/workload"
)

func readRecords(t *testing.T, s string) []workload.RequestRecord {
	t.Helper()
	var recs []workload.RequestRecord
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var r workload.RequestRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

func checkClean(t *testing.T, res *workload.Result, n int) {
	t.Helper()
	if res.Completed != n || res.Failed != 0 || res.Sent != n || res.Aborted != "" {
		t.Fatalf("completed %d failed %d sent %d aborted %q errors %+v; want %d completed", res.Completed, res.Failed,
			res.Sent, res.Aborted, res.Errors, n)
	}
	if res.TTFT.Count != int64(n) || res.E2E.Count != int64(n) || res.TPOT.Count != int64(n) || res.ITL.Count == 0 {
		t.Fatalf("sample counts ttft %d e2e %d tpot %d itl %d", res.TTFT.Count, res.E2E.Count, res.TPOT.Count, res.ITL.Count)
	}
	for name, d := range map[string]workload.Dist{"ttft": res.TTFT, "itl": res.ITL, "tpot": res.TPOT, "e2e": res.E2E} {
		if !(d.Min <= d.Median && d.Median <= d.P90 && d.P90 <= d.P99 && d.P99 <= d.Max) || d.Mean < d.Min || d.Mean > d.Max {
			t.Errorf("%s: inconsistent %+v", name, d)
		}
	}
	if res.TTFT.Median <= 0 || res.E2E.Median < res.TTFT.Median {
		t.Errorf("ttft %+v e2e %+v", res.TTFT, res.E2E)
	}
	if res.Duration <= 0 || res.OutputThroughput <= 0 || res.RequestThroughput <= 0 {
		t.Errorf("duration %v throughput %v %v", res.Duration, res.OutputThroughput, res.RequestThroughput)
	}
	if res.UsageMissing != 0 {
		t.Errorf("usage missing on %d requests", res.UsageMissing)
	}
}

// Chat, closed loop, speculative server: usage accounting, warmup exclusion (checked against the
// simulator's own record of every request), accept length from /metrics.
func TestChatClosedLoopWarmupAndUsage(t *testing.T) {
	sim := startSim(t, simOpts{spec: true})
	var saved syncBuffer
	const n, warm, in, out = 24, 3, 50, 40
	res, err := workload.Run(t.Context(), workload.Config{URL: sim.URL, API: "chat", Concurrency: 4, Requests: n,
		Warmup: warm, InputTokens: in, OutputTokens: out, Seed: 7, SaveRequests: &saved,
		StallTimeout: 5 * time.Second, RequestTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, res, n)
	if res.Model != "/models/Qwen3.5-122B-A10B" {
		t.Errorf("model %q (want the first /v1/models id)", res.Model)
	}
	if res.WarmupCompleted != warm || res.WarmupFailed != 0 {
		t.Errorf("warmup %d/%d", res.WarmupCompleted, res.WarmupFailed)
	}
	// sglangsim counts one prompt token per word: random prompts are exactly `in` tokens.
	if res.TotalInputTokens != n*in || res.TotalOutputTokens != n*out {
		t.Errorf("tokens in %d out %d, want %d %d", res.TotalInputTokens, res.TotalOutputTokens, n*in, n*out)
	}
	if res.AcceptLength == nil || res.AcceptLengthSource != "metrics" || *res.AcceptLength < 1 || *res.AcceptLength > 4 {
		t.Errorf("accept length %v from %q", res.AcceptLength, res.AcceptLengthSource)
	}
	// Warmup exclusion: the server saw n+warm requests; the records are exactly the n measured ones,
	// and every warmup request ended before the measured window started.
	recs := readRecords(t, saved.String())
	if len(recs) != n {
		t.Fatalf("%d records, want %d", len(recs), n)
	}
	truth := waitTruth(t, sim, n+warm)
	measured := map[string]bool{}
	var sumOut int64
	for _, r := range recs {
		tr, ok := truth[r.ID]
		if !ok || !r.OK {
			t.Fatalf("record %+v not in the simulator's truth or failed", r)
		}
		if int64(tr.Tokens) != r.CompletionTokens {
			t.Errorf("request %s: %d tokens, truth %d", r.ID, r.CompletionTokens, tr.Tokens)
		}
		measured[r.ID] = true
		sumOut += r.CompletionTokens
	}
	if sumOut != res.TotalOutputTokens {
		t.Errorf("records sum %d tokens, result %d", sumOut, res.TotalOutputTokens)
	}
	startMs := float64(res.Start.UnixNano()) / 1e6
	warmSeen := 0
	for rid, tr := range truth {
		if !measured[rid] {
			warmSeen++
			if tr.Finish > startMs+0.5 {
				t.Errorf("warmup request %s finished at %.3f, after the window started at %.3f", rid, tr.Finish, startMs)
			}
		}
	}
	if warmSeen != warm {
		t.Errorf("%d unmeasured requests at the server, want %d warmups", warmSeen, warm)
	}
	bs := res.BenchServing()
	if bs.MaxConcurrency != 4 || bs.Completed != n || bs.AcceptLength == nil || bs.MedianTTFTMs == nil {
		t.Errorf("bench_serving form %+v", bs)
	}
}

// waitTruth waits until the truth file holds n requests (the simulator writes a line after the
// response is flushed, a moment after the client saw [DONE]).
func waitTruth(t *testing.T, sim *simProc, n int) map[string]truthRequest {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tr := sim.truthRequests(t)
		if len(tr) >= n || time.Now().After(deadline) {
			if len(tr) != n {
				t.Fatalf("truth holds %d requests, want %d", len(tr), n)
			}
			return tr
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Completions API, open loop (Poisson), baseline server: no accept length.
func TestCompletionsOpenLoopBaseline(t *testing.T) {
	sim := startSim(t, simOpts{})
	const n = 30
	res, err := workload.Run(t.Context(), workload.Config{URL: sim.URL + "/v1/", API: "completions", RequestRate: 150,
		Requests: n, Warmup: 1, InputTokens: 20, OutputTokens: 16, Seed: 3, StallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, res, n)
	if res.TotalInputTokens != n*20 || res.TotalOutputTokens != n*16 {
		t.Errorf("tokens %d %d", res.TotalInputTokens, res.TotalOutputTokens)
	}
	if res.AcceptLength != nil {
		t.Errorf("baseline accept length %v (%s), want nil", *res.AcceptLength, res.AcceptLengthSource)
	}
	// 29 exponential gaps at 150/s average 193 ms: far from zero, far from seconds.
	if res.Duration < 40*time.Millisecond || res.Duration > 5*time.Second {
		t.Errorf("open-loop duration %v", res.Duration)
	}
	b, _ := json.Marshal(res.BenchServing())
	if !strings.Contains(string(b), `"accept_length":null`) {
		t.Errorf("json %s", b)
	}
}

// Both loops with --duration; chat on the open loop with a concurrency cap, completions closed.
func TestDurationMode(t *testing.T) {
	sim := startSim(t, simOpts{spec: true})
	for _, cfg := range []workload.Config{
		{API: "completions", Concurrency: 3, Duration: 300 * time.Millisecond},
		{API: "chat", Concurrency: 2, RequestRate: 60, Duration: 300 * time.Millisecond},
	} {
		cfg.URL, cfg.InputTokens, cfg.OutputTokens, cfg.StallTimeout = sim.URL, 16, 24, 5*time.Second
		t0 := time.Now()
		res, err := workload.Run(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Completed == 0 || res.Failed != 0 || res.Completed != res.Sent {
			t.Errorf("%+v: completed %d failed %d sent %d (%+v)", cfg, res.Completed, res.Failed, res.Sent, res.Errors)
		}
		if el := time.Since(t0); el > 5*time.Second {
			t.Errorf("a 300 ms level took %v", el)
		}
		if res.AcceptLength == nil {
			t.Errorf("no accept length")
		}
	}
}

// A server that crashes mid-level: the level ends quickly with the failures and their cause.
func TestServerCrashMidLevel(t *testing.T) {
	sim := startSim(t, simOpts{env: map[string]string{"SGLANGSIM_FAIL": "crash-during-load:10"}})
	t0 := time.Now()
	res, err := workload.Run(t.Context(), workload.Config{URL: sim.URL, Concurrency: 4, Requests: 200, InputTokens: 16,
		OutputTokens: 64, StallTimeout: 2 * time.Second, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(t0)
	t.Logf("crash: %v, completed %d failed %d aborted %q errors %+v", el, res.Completed, res.Failed, res.Aborted, res.Errors)
	if !sim.exited() {
		time.Sleep(200 * time.Millisecond)
		if !sim.exited() {
			t.Error("the simulator did not crash")
		}
	}
	if res.Failed == 0 || res.Completed >= 200 || res.Aborted == "" || len(res.Errors) == 0 {
		t.Fatalf("completed %d failed %d aborted %q", res.Completed, res.Failed, res.Aborted)
	}
	if res.Completed+res.Failed != res.Sent {
		t.Errorf("completed %d + failed %d != sent %d", res.Completed, res.Failed, res.Sent)
	}
	if el > 10*time.Second {
		t.Errorf("took %v", el)
	}
	if !strings.Contains(res.Aborted, "in a row") {
		t.Errorf("aborted %q", res.Aborted)
	}
}

// A server that hangs: in-flight streams stall, new requests get no headers; the stall timeout
// ends the level in bounded time.
func TestServerHang(t *testing.T) {
	sim := startSim(t, simOpts{spec: true, env: map[string]string{"SGLANGSIM_FAIL": "hang-after:6"}})
	t0 := time.Now()
	res, err := workload.Run(t.Context(), workload.Config{URL: sim.URL, Concurrency: 3, Requests: 100, InputTokens: 16,
		OutputTokens: 400, StallTimeout: 400 * time.Millisecond, RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(t0)
	t.Logf("hang: %v, completed %d failed %d aborted %q errors %+v", el, res.Completed, res.Failed, res.Aborted, res.Errors)
	if res.Failed == 0 || res.Aborted == "" || !strings.Contains(res.Aborted, "stall timeout") {
		t.Fatalf("completed %d failed %d aborted %q", res.Completed, res.Failed, res.Aborted)
	}
	if el > 10*time.Second { // bounded: about two stall timeouts
		t.Errorf("hung server: level took %v", el)
	}
}

// HTTP errors are failures with the server's message; a level of nothing but errors stops early.
func TestHTTPErrors(t *testing.T) {
	sim := startSim(t, simOpts{args: []string{"--api-key", "sesame"}})
	// Without the key: 401 on every request.
	res, err := workload.Run(t.Context(), workload.Config{URL: sim.URL, Model: "m", Concurrency: 2, Requests: 50,
		InputTokens: 8, OutputTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed != 0 || res.Failed == 0 || res.Failed >= 50 || res.Aborted == "" ||
		!strings.HasPrefix(res.Errors[0].Message, "HTTP 401") {
		t.Fatalf("completed %d failed %d aborted %q errors %+v", res.Completed, res.Failed, res.Aborted, res.Errors)
	}
	// With the key, but asking for more tokens than the context holds: HTTP 400 with SGLang's message.
	res, err = workload.Run(t.Context(), workload.Config{URL: sim.URL, APIKey: "sesame", Concurrency: 2, Requests: 6,
		InputTokens: 8, OutputTokens: 300000, MaxConsecutiveFailures: -1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 6 || res.Aborted != "" || len(res.Errors) != 1 || res.Errors[0].Count != 6 ||
		!strings.Contains(res.Errors[0].Message, "HTTP 400: Requested token count exceeds") {
		t.Fatalf("failed %d aborted %q errors %+v", res.Failed, res.Aborted, res.Errors)
	}
	if bs := res.BenchServing(); bs.MeanTTFTMs != nil || bs.Completed != 0 {
		t.Errorf("bench form without samples %+v", bs)
	}
	// All warmups failing: the level is not measured.
	res, err = workload.Run(t.Context(), workload.Config{URL: sim.URL, Model: "m", Concurrency: 2, Requests: 10,
		Warmup: 2, InputTokens: 8, OutputTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 0 || res.WarmupFailed != 2 || !strings.Contains(res.Aborted, "warmup") {
		t.Fatalf("sent %d warmup failed %d aborted %q", res.Sent, res.WarmupFailed, res.Aborted)
	}
}

func TestBadURL(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	dead := "http://127.0.0.1:" + itoa(testhost.FreePort(t))
	for _, u := range []string{"", "ftp://127.0.0.1:1", "127.0.0.1:30000", "http://"} {
		if _, err := workload.Run(t.Context(), workload.Config{URL: u, Concurrency: 1, Requests: 1, InputTokens: 1,
			OutputTokens: 1}); err == nil || !strings.Contains(err.Error(), "bad server URL") {
			t.Errorf("URL %q: err %v", u, err)
		}
	}
	// Nothing listening: model discovery fails with the cause.
	t0 := time.Now()
	_, err := workload.Run(t.Context(), workload.Config{URL: dead, Concurrency: 1, Requests: 1, InputTokens: 1, OutputTokens: 1})
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("dead server: %v", err)
	}
	// With a model given: every request fails fast and the level stops.
	res, err := workload.Run(t.Context(), workload.Config{URL: dead, Model: "m", Concurrency: 4, Requests: 1000,
		InputTokens: 1, OutputTokens: 1})
	if err != nil || res.Completed != 0 || res.Aborted == "" || !strings.Contains(res.Errors[0].Message, "connection refused") {
		t.Errorf("dead server with model: %v %+v", err, res)
	}
	if time.Since(t0) > 5*time.Second {
		t.Errorf("took %v", time.Since(t0))
	}
}

func TestBadDataset(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"not": "an array"}`), 0o644)
	for spec, want := range map[string]string{
		"sharegpt:" + bad:                        "want a JSON array",
		"sharegpt:" + filepath.Join(dir, "nope"): "no such file",
		"sharegpt:":                              "needs a file path",
		"alpaca":                                 "unknown dataset",
	} {
		_, err := workload.Run(t.Context(), workload.Config{URL: "http://127.0.0.1:1", Model: "m", Concurrency: 1,
			Requests: 1, InputTokens: 4, OutputTokens: 4, Dataset: spec})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", spec, err, want)
		}
	}
}

// A ShareGPT file drives the server with its first human turns; prompt tokens are the server's.
func TestShareGPTDataset(t *testing.T) {
	sim := startSim(t, simOpts{})
	path := filepath.Join(t.TempDir(), "sg.json")
	os.WriteFile(path, []byte(`[
 {"id": "a", "conversations": [{"from": "human", "value": "one two three"}, {"from": "gpt", "value": "x"}]},
 {"id": "b", "conversations": [{"from": "system", "value": "sys"}, {"from": "human", "value": "four five six"}]},
 {"id": "c", "conversations": []}
]`), 0o644)
	res, err := workload.Run(t.Context(), workload.Config{URL: sim.URL, Concurrency: 2, Requests: 6, OutputTokens: 5,
		Dataset: "sharegpt:" + path})
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, res, 6)
	if res.TotalInputTokens != 18 || res.Dataset != "sharegpt:"+path {
		t.Errorf("input tokens %d (want 6 prompts x 3 words), dataset %q", res.TotalInputTokens, res.Dataset)
	}
}

// Cancelling the context stops a long level promptly.
func TestCancel(t *testing.T) {
	sim := startSim(t, simOpts{spec: true, scale: "0.5"})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	t0 := time.Now()
	res, err := workload.Run(ctx, workload.Config{URL: sim.URL, Concurrency: 8, Requests: 1000, Warmup: 0,
		InputTokens: 16, OutputTokens: 2000})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if el := time.Since(t0); el > 5*time.Second {
		t.Errorf("cancel took %v", el)
	}
	if res == nil || res.Sent == 0 || res.Completed != 0 {
		t.Errorf("partial result %+v", res)
	}
}

// TestTemperatureAndAcceptSources: the level's temperature reaches the server (sampling accepts
// fewer draft tokens than greedy), and each release's accept-length source gives the level's own
// figure, checked against the simulator's truth: the counters (2026 main), the tokens per streamed
// step (0.4, whose log has no accept length and no verify counter); a level at temperature 1
// follows one at temperature 0 on the same server, with no warmup between them.
func TestTemperatureAndAcceptSources(t *testing.T) {
	for _, c := range []struct{ era, source string }{{"main", workload.AcceptMetrics}, {"0.4.1", workload.AcceptStream}} {
		t.Run(c.era, func(t *testing.T) {
			sim := startSim(t, simOpts{env: map[string]string{"SGLANGSIM_VERSION": c.era}, args: []string{
				"--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "/models/eagle",
				"--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"}})
			var got [2]float64
			for i, temp := range []float64{0, 1} {
				res, err := workload.Run(t.Context(), workload.Config{URL: sim.URL, Concurrency: 2, Requests: 12,
					InputTokens: 32, OutputTokens: 96, Temperature: temp, Seed: 3})
				if err != nil {
					t.Fatal(err)
				}
				checkClean(t, res, 12)
				if res.AcceptLength == nil || res.AcceptLengthSource != c.source {
					t.Fatalf("T=%g: accept length %v from %q, want from %q", temp, res.AcceptLength, res.AcceptLengthSource, c.source)
				}
				got[i] = *res.AcceptLength
				var tokens, verify int
				for _, r := range waitTruth(t, sim, 12*(i+1)) {
					if r.Arrival >= float64(res.Start.UnixMicro())/1000-1 && r.Verify > 0 {
						tokens, verify = tokens+r.Tokens-1, verify+r.Verify
					}
				}
				if truth := float64(tokens) / float64(verify); math.Abs(got[i]-truth) > 0.05 {
					t.Errorf("T=%g: accept length %.3f, truth %.3f", temp, got[i], truth)
				}
			}
			if got[1] >= got[0] {
				t.Errorf("accept length at temperature 1 (%.3f) not below greedy (%.3f)", got[1], got[0])
			}
		})
	}
}
