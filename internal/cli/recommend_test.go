package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// recommendSpec is the sweep recommendDB records: a baseline and eagle3 with 1 to 3 steps at tp 4,
// three levels, two repeats; the server's API key is given literally.
const recommendSpec = `version: 1
name: mix
hosts: [{name: here, driver: local, gpus: 4}]
server:
  command: [/opt/sglang/bin/python, -m, sglang.launch_server]
  args: [--model-path, /models/m, --port, "31000", --api-key, sk-do-not-print-42]
  env: {HF_TOKEN: hf_do_not_print_43, SGLANG_FLAG: "1"}
  port: 31000
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/e]
matrix: {method: [baseline, eagle3], num_steps: [1, 2, 3], topk: [1], tp: [4]}
workload: {concurrency: [1, 16, 64], requests: 8, input_tokens: 64, output_tokens: 32, repeats: 2}
`

// mixTok is recommendDB's median output tok/s: 100 per stream for the baseline; at 1 and 16
// streams each step adds 30%, at 64 each costs 5% (more steps win at low load, fewer at high);
// repeat r runs at x(1+0.01r).
func mixTok(steps, c int) float64 {
	per := float64(c) * 100
	if c == 64 {
		return per * (1 - 0.05*float64(steps))
	}
	return per * (1 + 0.3*float64(steps))
}

// mixTTFT is recommendDB's TTFT p99 in ms: 100 at 1 and 16; at 64, 1 s and 0.5 s more per step.
func mixTTFT(steps, c int) float64 {
	if c != 64 {
		return 100
	}
	return 1000 + 500*float64(steps)
}

// recommendDB records recommendSpec's plan through the store's API with mixTok and mixTTFT's
// figures, in a temp SQLite file.
func recommendDB(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	sp, err := sweep.Parse("mix.yaml", []byte(recommendSpec))
	if err != nil {
		t.Fatal(err)
	}
	plan := sp.Plan()
	path := filepath.Join(t.TempDir(), "mix.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pts []store.NewPoint
	for _, p := range plan.Points {
		pts = append(pts, store.NewPoint{ID: p.ID, Method: p.Method, Baseline: p.Baseline, NumSteps: p.NumSteps, TopK: p.TopK,
			NumDraftTokens: p.NumDraftTokens, TP: p.TP, Argv: p.Argv, Env: p.Env, Runs: 6})
	}
	id, err := db.CreateSweep(ctx, store.NewSweep{Name: sp.Name, SpecHash: plan.SpecHash, SpecText: recommendSpec},
		[]store.NewHost{{Name: "here", Driver: "local", GPUs: 4}}, pts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plan.Points {
		att, err := db.ClaimPoint(ctx, id, p.ID, "here")
		if err != nil {
			t.Fatal(err)
		}
		steps, n := 0, 0
		if p.NumSteps != nil {
			steps = *p.NumSteps
		}
		for _, c := range []int{1, 16, 64} {
			for rep := 1; rep <= 2; rep++ {
				n++
				m := &store.Metrics{Requests: 8, Completed: 8, OutputTokS: mixTok(steps, c) * (1 + 0.01*float64(rep)),
					TTFTP99Ms: mixTTFT(steps, c), TPOTMedianMs: 10, ITLMedianMs: 9}
				var fin *store.PointFinish
				if n == 6 {
					fin = &store.PointFinish{State: store.PointDone}
				}
				if err := db.RecordRunAndFinish(ctx, store.Run{SweepID: id, PointID: p.ID, Attempt: att, Concurrency: c, Repeat: rep,
					Status: store.RunOK, Metrics: m}, fin); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return path
}

// bestMix is the test's own recommendation of recommendDB for a mix, among the steps allowed (0:
// the baseline): the maximum of Σ share × mixTok (the median of the repeats: x1.015).
func bestMix(mix map[int]float64, allowed ...int) (steps int, tok float64) {
	tok = -1
	for _, s := range allowed {
		v := 0.0
		for c, share := range mix {
			v += share * mixTok(s, c) * 1.015
		}
		if v > tok {
			steps, tok = s, v
		}
	}
	return steps, tok
}

// TestRecommendCommand: recommend prints the brute-force maximum of the mix (for equal shares, a
// given mix, a mix from a file as observe writes it, and under an SLO that drops the fastest), how to
// deploy it with the API key and the env's secret redacted, its gains and standing per level, what
// did not compete and why, and, at the edge of the swept range, the next sweep as a spec fragment.
func TestRecommendCommand(t *testing.T) {
	path := recommendDB(t)
	env := map[string]string{"SPECSWEEP_DB": path}
	mixFile := filepath.Join(t.TempDir(), "mix.txt")
	if err := os.WriteFile(mixFile, []byte("# specsweep observe http://h:30000: 1800 sample(s) every 1s\n# 3 idle sample(s)\nc=1:0.1,c=16:0.1,c=64:0.8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		mix   map[int]float64
		steps []int // the configurations allowed to compete
	}{
		{nil, map[int]float64{1: 1.0 / 3, 16: 1.0 / 3, 64: 1.0 / 3}, []int{0, 1, 2, 3}},
		{[]string{"--traffic", "c=1:0.5,c=64:0.5"}, map[int]float64{1: 0.5, 64: 0.5}, []int{0, 1, 2, 3}},
		{[]string{"--traffic", "@" + mixFile}, map[int]float64{1: 0.1, 16: 0.1, 64: 0.8}, []int{0, 1, 2, 3}},
		{[]string{"--traffic", "c=1:0.5,c=16:0.5", "--slo", "ttft_p99=2s"}, map[int]float64{1: 0.5, 16: 0.5}, []int{0, 1, 2, 3}},
		{[]string{"--slo", "ttft_p99=2s"}, map[int]float64{1: 1.0 / 3, 16: 1.0 / 3, 64: 1.0 / 3}, []int{0, 1, 2}},
	} {
		args := append([]string{"recommend", "mix", "--format", "json"}, tc.args...)
		out, errs, code := runMain(t, env, args...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errs)
		}
		var r report.RecommendationJSON
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %v\n%s", tc.args, err, out)
		}
		steps, tok := bestMix(tc.mix, tc.steps...)
		want := "baseline tp=4"
		if steps > 0 {
			want = fmt.Sprintf("eagle3 s=%d k=1 n=%d tp=4", steps, steps+1)
		}
		if r.Winner == nil || r.Winner.Label != want || !near(r.Winner.TokS, tok) || r.Candidates != len(tc.steps) {
			t.Errorf("%v: winner %+v of %d, want %s %.3f of %d", tc.args, r.Winner, r.Candidates, want, tok, len(tc.steps))
		}
		if strings.Contains(out, "do-not-print") || strings.Contains(out, "do_not_print") {
			t.Errorf("%v: a secret is printed:\n%s", tc.args, out)
		}
	}

	// The table: winner, deploy args after the command, gains, levels, the next sweep.
	out, errs, code := runMain(t, env, "recommend", "mix", "--traffic", "c=1:0.5,c=16:0.5")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"Recommended for sweep mix (id 1), c=1 50%, c=16 50% of the time:\n  eagle3 s=3 k=1 n=4 tp=4 (point ",
		"Deploy with SGLang's arguments after the server command (the point's argv as planned; secrets <redacted>):\n" +
			"  --model-path /models/m --port 31000 --api-key '<redacted>' --speculative-algorithm EAGLE3 --speculative-draft-model-path /models/e " +
			"--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --tp-size 4\n" +
			"  command in the sweep: /opt/sglang/bin/python -m sglang.launch_server\n" +
			"  environment: HF_TOKEN='<redacted>' SGLANG_FLAG=1\n",
		"over the baseline (tp=4, ",
		"+90.0%  clear",
		"over the runner-up, eagle3 s=2 k=1 n=3 tp=4",
		"c=1    50.0%  ",
		"Next sweep: the recommendation sits at the edge of the swept range at c=1, 16: num_steps 3 is the largest swept (1, 2, 3): sweep 3..6 to see whether more steps help. As a spec fragment:",
		"    num_steps: [3, 4, 5, 6]\n    topk: [1]\n    num_draft_tokens: [auto]\n    tp: [4]\n  workload:\n    concurrency: [1, 16]\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("recommend's table lacks %q:\n%s", want, out)
		}
	}
	// Equal time: at 64 the winner is not the best, and the SLO's drop is worded.
	out, _, _ = runMain(t, env, "recommend", "mix", "--slo", "ttft_p99=2s")
	for _, want := range []string{"SLOs ttft_p99<=2s at every level", "eagle3 s=2 k=1 n=3 tp=4 (point ",
		"c=64   33.3%  ", "vs baseline tp=4", "Did not compete (1):\n  eagle3 s=3 k=1 n=4 tp=4 (", "ttft_p99 2.5s at c=64, above 2s"} {
		if !strings.Contains(out, want) {
			t.Errorf("recommend --slo lacks %q:\n%s", want, out)
		}
	}
}

// TestRecommendBadInputsCLI: each bad input is refused in words, with the exit code of its kind: a
// usage error (2) for what the command line got wrong, a failure (1) for what the sweep cannot
// answer.
func TestRecommendBadInputsCLI(t *testing.T) {
	path := recommendDB(t)
	env := map[string]string{"SPECSWEEP_DB": path}
	dir := t.TempDir()
	big := filepath.Join(dir, "big.txt")
	if err := os.WriteFile(big, []byte(strings.Repeat("# a comment line of the mix\n", report.MaxTrafficBytes/28+2)), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("# observed\nc=1:0.5\nc=16:half\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--traffic", "c=1:0.5,c=32:0.5"}, ExitFailure, "the mix names concurrency 32, which the sweep did not measure (measured levels: 1, 16, 64)"},
		{[]string{"--traffic", "c=1:0.5,c=16:0.4"}, ExitUsage, "--traffic c=1:0.5,c=16:0.4: the shares sum to 0.9, not 1 (within 1e-06)"},
		{[]string{"--traffic", "c=1:0.5,16:0.5"}, ExitUsage, `term 2 "16:0.5": want c=CONCURRENCY:SHARE`},
		{[]string{"--traffic", "@" + bad}, ExitUsage, `--traffic @` + bad + `: line 3: term "c=16:half": share "half" is not a number`},
		{[]string{"--traffic", "@" + big}, ExitUsage, "the file is larger than 256 KiB"},
		{[]string{"--traffic", "@" + filepath.Join(dir, "none.txt")}, ExitFailure, "reading the mix: open "},
		{[]string{"--slo", "p99=2s"}, ExitUsage, `unknown metric "p99" (known: ttft_p99, ttft_p50, tpot_p50, itl_p50)`},
		{[]string{"--slo", "ttft_p99=500ms"}, ExitFailure, "no configuration meets the SLOs ttft_p99<=500ms at every level of the mix (c=1, 16, 64); " +
			"the best seen, the lowest worst level among the 4 configuration(s) measured at every level: ttft_p99 (limit 500ms): 1s, baseline tp=4 at c=64"},
		{[]string{"--tp", "-1"}, ExitUsage, "--tp -1: want a tp from 1 to 128"},
		{[]string{"--tp", "8"}, ExitFailure, "the sweep has no point at tp 8 (its tp: 4)"},
		{[]string{"--format", "csv"}, ExitUsage, `unknown --format "csv" (want table, json)`},
	} {
		_, errs, code := runMain(t, env, append([]string{"recommend", "mix"}, tc.args...)...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", tc.args, code, tc.code, tc.want, errs)
		}
	}
	if _, errs, code := runMain(t, env, "recommend", "nosuch"); code != ExitFailure || !strings.Contains(errs, `no sweep has the id or name "nosuch"`) {
		t.Errorf("nosuch: exit %d: %s", code, errs)
	}
	if _, _, code := runMain(t, env, "recommend"); code != ExitUsage {
		t.Errorf("no SWEEP: exit %d", code)
	}
}

// near reports whether a and b agree to a relative 1e-9.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }
