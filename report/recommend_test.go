package report_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// bruteForce is the test's own recommendation, computed from the database with SQL and plain Go,
// independently of the report package: every point's ok runs at each level (a level with a failed
// repeat left out, as docs/report.md says), the median per level, and for each point measured at
// every level of the mix and whose output check did not fail, the mix Σ share × median; the
// maximum wins.
type bruteForce struct {
	id      string
	tp      int
	base    bool
	mix     float64
	repeats []float64 // the mix of each repeat
}

func bruteForceMixes(t *testing.T, db *sql.DB, sweepName string, mix map[int]float64) []bruteForce {
	t.Helper()
	rows, err := db.Query(`SELECT r.point_id, r.tp, p.baseline, r.concurrency, r.repeat, r.output_tok_s, ifnull(p.output_check, '')
		FROM run_summary r JOIN point_summary p ON p.sweep_id = r.sweep_id AND p.point_id = r.point_id
		WHERE r.sweep = ? AND r.status = 'ok' AND NOT EXISTS (SELECT 1 FROM run_summary f
			WHERE f.sweep_id = r.sweep_id AND f.point_id = r.point_id AND f.concurrency = r.concurrency AND f.status = 'failed')
		ORDER BY r.point_id, r.concurrency, r.repeat`, sweepName)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type pt struct {
		tp       int
		base     bool
		mismatch bool
		vals     map[int][]float64 // by level, in repeat order
	}
	pts := map[string]*pt{}
	for rows.Next() {
		var id, check string
		var tp, c, rep int
		var base bool
		var tok float64
		if err := rows.Scan(&id, &tp, &base, &c, &rep, &tok, &check); err != nil {
			t.Fatal(err)
		}
		if pts[id] == nil {
			pts[id] = &pt{tp: tp, base: base, mismatch: check == "mismatch", vals: map[int][]float64{}}
		}
		pts[id].vals[c] = append(pts[id].vals[c], tok)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	med := func(v []float64) float64 {
		s := slices.Clone(v)
		sort.Float64s(s)
		if len(s)%2 == 1 {
			return s[len(s)/2]
		}
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	var out []bruteForce
	for id, p := range pts {
		if p.mismatch {
			continue
		}
		b := bruteForce{id: id, tp: p.tp, base: p.base}
		n, all := math.MaxInt, true
		for c, share := range mix {
			v := p.vals[c]
			if len(v) == 0 {
				all = false
				break
			}
			b.mix += share * med(v)
			n = min(n, len(v))
		}
		if !all {
			continue
		}
		for i := 0; i < n; i++ {
			x := 0.0
			for c, share := range mix {
				x += share * p.vals[c][i]
			}
			b.repeats = append(b.repeats, x)
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].mix > out[j].mix })
	return out
}

// noiseOf is the test's own noise verdict: unknown with fewer than two repeats, clear when the
// slowest of a beats the fastest of b.
func noiseOf(a, b []float64) string {
	if len(a) < 2 || len(b) < 2 {
		return "unknown"
	}
	if slices.Min(a) > slices.Max(b) {
		return "clear"
	}
	return "within noise"
}

// TestRecommendIsTheBruteForceMaximum: on the two real sweeps of sglangsim, for several traffic
// mixes, the recommendation is the configuration whose weighted mix of the recorded runs is the
// largest, computed by the test from the database; its mix, its gains over the runner-up and the
// baseline, and their noise verdicts on the repeats' mixes are the test's own.
func TestRecommendIsTheBruteForceMaximum(t *testing.T) {
	st, raw := recorded(t)
	for _, name := range []string{"rep-a", "rep-b"} {
		s := load(t, st, name)
		for _, text := range []string{"", "c=1:0.7,c=16:0.3", "c=4:1", "c=1:0.1,c=4:0.1,c=16:0.8", "c=1:0.25 c=4:0.25 # a comment\nc=16:0.5"} {
			opt := report.RecommendOptions{}
			mix := map[int]float64{}
			if text == "" {
				for _, c := range s.Levels {
					mix[c] = 1 / float64(len(s.Levels))
				}
			} else {
				tr, err := report.ParseTraffic(text)
				if err != nil {
					t.Fatalf("%q: %v", text, err)
				}
				opt.Traffic = tr
				for _, sh := range tr {
					mix[sh.Concurrency] = sh.Share
				}
			}
			what := fmt.Sprintf("%s %q", name, text)
			want := bruteForceMixes(t, raw, name, mix)
			if len(want) < 2 {
				t.Fatalf("%s: %d configurations measured at every level", what, len(want))
			}
			r, err := report.Recommend(s, opt)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if r.Winner.Point.ID != want[0].id || !near(r.Winner.TokS, want[0].mix) {
				t.Errorf("%s: winner %s (%.3f), the brute-force maximum is %s (%.3f)", what, r.Winner.Point.ID, r.Winner.TokS, want[0].id, want[0].mix)
			}
			if r.Candidates != len(want) || r.RunnerUp == nil || r.RunnerUp.Point.ID != want[1].id {
				t.Errorf("%s: %d candidates, runner-up %v; want %d, %s", what, r.Candidates, r.RunnerUp, len(want), want[1].id)
				continue
			}
			if g := 100 * (want[0].mix/want[1].mix - 1); !near(r.OverRunnerUp.Pct, g) || string(r.OverRunnerUp.Noise) != noiseOf(want[0].repeats, want[1].repeats) {
				t.Errorf("%s: over the runner-up %+v, want %.4f%% %s", what, *r.OverRunnerUp, g, noiseOf(want[0].repeats, want[1].repeats))
			}
			for i, v := range want[0].repeats {
				if i >= len(r.Winner.Repeats) || !near(r.Winner.Repeats[i], v) {
					t.Errorf("%s: the winner's repeats' mixes %v, want %v", what, r.Winner.Repeats, want[0].repeats)
					break
				}
			}
			for _, b := range want {
				if b.base && b.tp == r.Winner.Point.TP && !r.Winner.Point.Baseline {
					if r.Baseline == nil || r.Baseline.Point.ID != b.id || !near(r.OverBaseline.Pct, 100*(want[0].mix/b.mix-1)) ||
						string(r.OverBaseline.Noise) != noiseOf(want[0].repeats, b.repeats) {
						t.Errorf("%s: baseline %v gain %v, want %s %.4f%% %s", what, r.Baseline, r.OverBaseline, b.id, 100*(want[0].mix/b.mix-1), noiseOf(want[0].repeats, b.repeats))
					}
					break
				}
			}
			// Each level: the winner against the level's best among the configurations that competed.
			for _, st := range r.Levels {
				best := ""
				bestTok := -1.0
				for _, p := range s.Points {
					if c := p.Cells[st.Concurrency]; c != nil && slices.ContainsFunc(want, func(b bruteForce) bool { return b.id == p.ID }) && c.TokS.Median > bestTok {
						best, bestTok = p.ID, c.TokS.Median
					}
				}
				if st.Best.Point.ID != best || st.IsBest() != (best == r.Winner.Point.ID) {
					t.Errorf("%s: at c=%d the best is %s, want %s", what, st.Concurrency, st.Best.Point.ID, best)
				}
			}
		}
	}
}

// sloDB records through the store's API a sweep at levels 1, 16 and 64, two repeats, tp 4: a
// baseline; eagle3 steps 1, 2 and 3, the more steps the faster and the slower to first token at
// 64 (steps 3 breaks a 2 s TTFT p99 there); a point faster still whose output check failed; and
// one that failed its level 64. Its spec is real, so the deploy args start after the command.
func sloDB(t *testing.T) *store.DB {
	t.Helper()
	ctx := context.Background()
	const spec = `version: 1
name: slo
hosts: [{name: here, driver: local, gpus: 4}]
server:
  command: [/opt/sglang/bin/python, -m, sglang.launch_server]
  args: [--model-path, /models/m, --port, "31000", --api-key, sk-live-0123456789]
  env: {SGLANG_SECRET: tok-abcdefgh, SGLANG_FLAG: "1"}
  port: 31000
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/e]
  wrong: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/wrong]
  flaky: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/flaky]
matrix: {method: [baseline, eagle3, wrong, flaky], num_steps: [1, 2, 3], topk: [1], tp: [4]}
workload: {concurrency: [1, 16, 64], requests: 8, input_tokens: 64, output_tokens: 32, repeats: 2}
`
	sp, err := sweep.Parse("slo.yaml", []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	plan := sp.Plan()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "slo.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var pts []store.NewPoint
	for _, p := range plan.Points {
		if (p.Method == "wrong" || p.Method == "flaky") && *p.NumSteps != 1 {
			continue
		}
		pts = append(pts, store.NewPoint{ID: p.ID, Method: p.Method, Baseline: p.Baseline, NumSteps: p.NumSteps, TopK: p.TopK,
			NumDraftTokens: p.NumDraftTokens, TP: p.TP, Argv: p.Argv, Env: p.Env, Runs: 6})
	}
	id, err := db.CreateSweep(ctx, store.NewSweep{Name: "slo", SpecHash: plan.SpecHash, SpecText: spec},
		[]store.NewHost{{Name: "here", Driver: "local", GPUs: 4}}, pts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pts {
		att, err := db.ClaimPoint(ctx, id, p.ID, "here")
		if err != nil {
			t.Fatal(err)
		}
		if err := db.SetPointOutputs(ctx, id, p.ID, att, json.RawMessage(`{"prompts":["p"],"runs":[["a"]]}`)); err != nil {
			t.Fatal(err)
		}
		steps := deref(p.NumSteps)
		n := 0
		for _, c := range []int{1, 16, 64} {
			for rep := 1; rep <= 2; rep++ {
				n++
				tok := sloTok(p.Method, steps, c) * (1 + 0.02*float64(rep))
				m := &store.Metrics{Requests: 8, Completed: 8, OutputTokS: tok, TTFTP99Ms: sloTTFT(p.Method, steps, c),
					TTFTMedianMs: 100, TPOTMedianMs: 10, ITLMedianMs: 8 + float64(steps)}
				status := store.RunOK
				if p.Method == "flaky" && c == 64 && rep == 2 {
					status, m = store.RunFailed, nil
				}
				var fin *store.PointFinish
				if n == 6 {
					fin = &store.PointFinish{State: store.PointDone}
				}
				if err := db.RecordRunAndFinish(ctx, store.Run{SweepID: id, PointID: p.ID, Attempt: att, Concurrency: c, Repeat: rep,
					Status: status, Metrics: m}, fin); err != nil {
					t.Fatal(err)
				}
			}
		}
		if p.Method == "wrong" {
			if err := db.SetOutputCheck(ctx, id, p.ID, store.OutputCheck{Result: store.OutputCheckMismatch}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return db
}

// sloTok is sloDB's output tok/s: the baseline 100 per stream, each step +20% (the wrong draft
// +100%, flaky +90%), 16 and 64 streams 10 and 30 times one.
func sloTok(method string, steps, c int) float64 {
	per := map[int]float64{1: 1, 16: 10, 64: 30}[c] * 100
	switch method {
	case "wrong":
		return per * 2
	case "flaky":
		return per * 1.9
	}
	return per * (1 + 0.2*float64(steps))
}

// sloTTFT is sloDB's TTFT p99 (ms): 200 ms at 1 and 16 streams; at 64, 1 s for the baseline and
// 0.5 s more per step (steps 3: 2.5 s).
func sloTTFT(method string, steps, c int) float64 {
	if c != 64 {
		return 200
	}
	return 1000 + 500*float64(steps)
}

// TestRecommendSLOsDropConfigurations: an SLO drops every configuration that breaks it at some
// level of the mix and says why; the one left with the best mix wins (the test's own maximum of
// sloDB's figures); a point that mismatches or lacks a level never competes; an SLO none meets is
// an error naming the best value seen.
func TestRecommendSLOsDropConfigurations(t *testing.T) {
	db := sloDB(t)
	s, err := report.Load(context.Background(), db, "slo")
	if err != nil {
		t.Fatal(err)
	}
	label := func(p *report.Point) string { return fmt.Sprintf("%s s=%d", p.Method, p.NumSteps) }
	// Without SLOs: eagle3 s=3 has the best mix; the mismatching and the flaky points do not compete.
	r, err := report.Recommend(s, report.RecommendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if label(r.Winner.Point) != "eagle3 s=3" || r.Candidates != 4 {
		t.Errorf("without SLOs: winner %s of %d", label(r.Winner.Point), r.Candidates)
	}
	reasons := map[string]string{}
	for _, d := range r.Dropped {
		reasons[label(d.Point)] = d.Reason
	}
	if !strings.Contains(reasons["wrong s=1"], "output check MISMATCH") || reasons["flaky s=1"] != "no figure at c=64 (a repeat failed there, or it has not run)" || len(reasons) != 2 {
		t.Errorf("dropped without SLOs: %q", reasons)
	}

	slos, err := report.ParseSLOs("ttft_p99=2s,itl_p50=12ms")
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := report.ParseTraffic("c=1:0.2,c=16:0.3,c=64:0.5")
	r, err = report.Recommend(s, report.RecommendOptions{Traffic: tr, SLOs: slos})
	if err != nil {
		t.Fatal(err)
	}
	// The test's own maximum over the configurations that meet both SLOs at every level.
	var bestID string
	bestMix := -1.0
	for _, p := range s.Points {
		steps := p.NumSteps
		if p.Method != "baseline" && p.Method != "eagle3" || sloTTFT(p.Method, steps, 64) > 2000 || 8+float64(steps) > 12 {
			continue
		}
		mix := 0.0
		for _, sh := range tr {
			mix += sh.Share * sloTok(p.Method, steps, sh.Concurrency) * 1.03 // the median of x1.02 and x1.04
		}
		if mix > bestMix {
			bestID, bestMix = p.ID, mix
		}
	}
	if r.Winner.Point.ID != bestID || !near(r.Winner.TokS, bestMix) || label(r.Winner.Point) != "eagle3 s=2" {
		t.Errorf("with SLOs: winner %s %.2f, want %s %.2f", label(r.Winner.Point), r.Winner.TokS, bestID, bestMix)
	}
	reasons = map[string]string{}
	for _, d := range r.Dropped {
		reasons[label(d.Point)] = d.Reason
	}
	if reasons["eagle3 s=3"] != "ttft_p99 2.5s at c=64, above 2s" {
		t.Errorf("eagle3 s=3 dropped for %q", reasons["eagle3 s=3"])
	}
	if len(reasons) != 3 || r.Candidates != 3 {
		t.Errorf("with SLOs: %d candidates, dropped %q", r.Candidates, reasons)
	}
	if r.RunnerUp == nil || label(r.RunnerUp.Point) != "eagle3 s=1" || r.Baseline == nil || !r.Baseline.Point.Baseline || r.OverBaseline.Noise != report.NoiseClear {
		t.Errorf("runner-up %v, baseline %v %v", r.RunnerUp, r.Baseline, r.OverBaseline)
	}
	// The mix's levels, in its order, the winner the best among those left at each.
	if len(r.Levels) != 3 || r.Levels[2].Concurrency != 64 || r.Levels[2].Share != 0.5 || !r.Levels[2].IsBest() {
		t.Errorf("levels %+v", r.Levels)
	}

	// SLOs none meets: the error names each SLO's best value seen.
	slos, _ = report.ParseSLOs("ttft_p99=900ms,itl_p50=5ms")
	_, err = report.Recommend(s, report.RecommendOptions{SLOs: slos})
	want := "no configuration meets the SLOs ttft_p99<=900ms, itl_p50<=5ms at every level of the mix (c=1, 16, 64); " +
		"the best seen, the lowest worst level among the 4 configuration(s) measured at every level: " +
		"ttft_p99 (limit 900ms): 1s, baseline tp=4 at c=64; itl_p50 (limit 5ms): 8ms, baseline tp=4 at c=1"
	if err == nil || err.Error() != want {
		t.Errorf("SLOs none meets:\n got %v\nwant %s", err, want)
	}

	// Only tp 8 competes: the sweep has none.
	if _, err := report.Recommend(s, report.RecommendOptions{TP: 8}); err == nil || err.Error() != "the sweep has no point at tp 8 (its tp: 4)" {
		t.Errorf("tp 8: %v", err)
	}

	// The deploy args: after the command, the API key and the env's secret redacted, the setting kept.
	d := r.Deploy
	if strings.Join(d.Command, " ") != "/opt/sglang/bin/python -m sglang.launch_server" || d.Args[0] != "--model-path" ||
		!strings.Contains(d.ArgsLine(), "--api-key '<redacted>'") || !strings.HasSuffix(d.ArgsLine(), "--speculative-num-draft-tokens 3 --tp-size 4") ||
		d.Env["SGLANG_SECRET"] != report.Redacted || d.Env["SGLANG_FLAG"] != "1" {
		t.Errorf("deploy %+v\n%s", d, d.ArgsLine())
	}
	b, _ := json.Marshal(r.JSON())
	for _, secret := range []string{"sk-live-0123456789", "tok-abcdefgh"} {
		if strings.Contains(string(b), secret) || strings.Contains(strings.Join(report.LiveTables(s).Summary, " "), secret) {
			t.Errorf("the secret %s is shown", secret)
		}
	}
}

// TestRecommendEdgeNextSweep: a recommendation at the edge of the swept range prints the next
// sweep as a spec fragment that, merged into the sweep's spec, validates and plans the suggested
// steps; one inside the range has none, and says where it is not the best.
func TestRecommendEdgeNextSweep(t *testing.T) {
	db := measuredDB(t)
	s, err := report.Load(context.Background(), db, "measured")
	if err != nil {
		t.Fatal(err)
	}
	// Mostly concurrency 1, where eagle3 at 3 steps, the largest swept, wins.
	tr, _ := report.ParseTraffic("c=1:0.95,c=16:0.05")
	r, err := report.Recommend(s, report.RecommendOptions{Traffic: tr})
	if err != nil {
		t.Fatal(err)
	}
	if r.Winner.Point.Label() != "eagle3 s=3 k=1 n=4" || r.Next == nil {
		t.Fatalf("winner %s, next %v", r.Winner.Point.Label(), r.Next)
	}
	if !slices.Equal(r.Next.Levels, []int{1, 16}) || len(r.Next.Why) != 1 ||
		r.Next.Why[0] != "num_steps 3 is the largest swept (1, 2, 3): sweep 3..6 to see whether more steps help" {
		t.Errorf("next: %v %q", r.Next.Levels, r.Next.Why)
	}
	// The fragment replaces the matrix and the levels of the sweep's spec, and plans steps 3 to 6.
	spec := measuredSpec[:strings.Index(measuredSpec, "matrix:")] + r.Next.Spec + "  requests: 8\n  input_tokens: 256\n  output_tokens: 96\n"
	sp, err := sweep.Parse("next.yaml", []byte(spec))
	if err != nil {
		t.Fatalf("the next sweep does not validate: %v\n%s", err, spec)
	}
	var steps []int
	for _, p := range sp.Plan().Points {
		if !p.Baseline {
			steps = append(steps, *p.NumSteps)
			if p.Method != "eagle3" || *p.TopK != 1 || *p.NumDraftTokens != *p.NumSteps+1 || p.TP != 4 {
				t.Errorf("next sweep's point %s", p.Label())
			}
		}
	}
	if !slices.Equal(steps, []int{3, 4, 5, 6}) || !slices.Equal(sp.Workload.Concurrency, []int{1, 16}) || !slices.Contains(sp.Matrix.Methods, "baseline") {
		t.Errorf("next sweep plans steps %v at %v, methods %v", steps, sp.Workload.Concurrency, sp.Matrix.Methods)
	}

	// Equal time: eagle3 at 1 step (the best at 16; 1 is the smallest valid value, no edge) wins,
	// not the best at concurrency 1.
	r, err = report.Recommend(s, report.RecommendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Winner.Point.Label() != "eagle3 s=1 k=1 n=2" || r.Next != nil || r.Levels[0].IsBest() || r.Levels[0].Best.Point.Label() != "eagle3 s=3 k=1 n=4" ||
		!near(r.Levels[0].Pct, 100*(150.225/210.315-1)) || r.Levels[0].Noise != report.NoiseClear || !r.Levels[1].IsBest() {
		t.Errorf("equal time: winner %s, next %v, levels %+v", r.Winner.Point.Label(), r.Next, r.Levels)
	}
}

// TestReportShowsTheRecommendation: every format's summary and the live view carry the
// recommendation for equal time at each level, the same as Recommend's, with the deploy args (two
// hyphens kept in LaTeX), and the live JSON reads back equal.
func TestReportShowsTheRecommendation(t *testing.T) {
	db := measuredDB(t)
	s, err := report.Load(context.Background(), db, "measured")
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.Recommend(s, report.RecommendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := fmt.Sprintf("Recommended for equal time at each measured concurrency (c=1, 16): eagle3 s=1 k=1 n=2 tp=4 (point %s), %.1f tok/s over the mix", r.Winner.Point.ID, r.Winner.TokS)
	behind := "not the best at c=1 (-28.6% vs eagle3 s=3 k=1 n=4 tp=4, clear)"
	args := "Deploy it with these SGLang arguments after the server command: --model-path /models/Qwen3.5-122B-A10B --host 127.0.0.1 --port 31000 --speculative-algorithm EAGLE3"
	for f, doc := range writeAll(t, db, "measured") {
		plain := plainText(f, doc)
		if f == "tex" {
			if !strings.Contains(doc, "-{}-model-path /models/Qwen3.5-122B-A10B -{}-host") {
				t.Errorf("tex: the flags' two hyphens are not kept")
			}
			plain = strings.ReplaceAll(plain, "-{}-", "--")
		}
		for _, want := range []string{first, behind, args} {
			if !strings.Contains(plain, want) {
				t.Errorf("%s: the summary lacks %q", f, want)
			}
		}
	}
	l := report.LiveTables(s)
	if !reflect.DeepEqual(l.Recommendation, r.JSON()) {
		t.Errorf("live recommendation %+v\nwant %+v", l.Recommendation, r.JSON())
	}
	if w := l.Recommendation.Winner; w == nil || w.Label != "eagle3 s=1 k=1 n=2 tp=4" || !l.Recommendation.DefaultMix || l.Recommendation.Mix != "c=1:0.5,c=16:0.5" {
		t.Errorf("live recommendation %+v", l.Recommendation)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var back report.Live
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, l) {
		t.Errorf("the live view with a recommendation does not read back equal (%v)", err)
	}
	// A sweep with nothing measured says why there is none, in the JSON only.
	e := report.LiveTables(emptySweep(t))
	if e.Recommendation.Winner != nil || !strings.HasPrefix(e.Recommendation.None, "no level of the sweep is measured yet") ||
		strings.Contains(strings.Join(e.Summary, " "), "ecommend") {
		t.Errorf("empty sweep: %+v, summary %q", e.Recommendation, e.Summary)
	}
}

// TestRecommendBadInputs: every bad mix, SLO and sweep is refused in words saying where and what.
func TestRecommendBadInputs(t *testing.T) {
	long := strings.Repeat("c=1:0.5 ", report.MaxTrafficBytes/8+1)
	var many []string
	for c := 1; c <= report.MaxTrafficTerms+1; c++ {
		many = append(many, fmt.Sprintf("c=%d:0.0001", c))
	}
	for text, want := range map[string]string{
		"":                         "no term: want c=CONCURRENCY:SHARE terms",
		"# only a comment\n":       "no term",
		"c=1:0.5,c=16:0.4":         "the shares sum to 0.9, not 1 (within 1e-06)",
		"c=1:0.5,c=16:0.5000011":   "the shares sum to 1.0000011, not 1",
		"c=1:0.5,c16:0.5":          `term 2 "c16:0.5": want c=CONCURRENCY:SHARE, e.g. c=16:0.5`,
		"c=1:0.5,c=16":             `term 2 "c=16": no share after the concurrency`,
		"c=0:1":                    `term 1 "c=0:1": concurrency "0" is not an integer from 1 to 4096`,
		"c=5000:1":                 `concurrency "5000" is not an integer from 1 to 4096`,
		"c=1:half":                 `term 1 "c=1:half": share "half" is not a number above 0 and at most 1`,
		"c=1:0,c=2:1":              `share "0" is not a number above 0`,
		"c=1:NaN":                  `share "NaN" is not a number`,
		"c=1:0.5,c=1:0.5":          `term 2 "c=1:0.5": concurrency 1 is given twice`,
		"c=1:0.5\nc=16:x # a note": `line 2: term "c=16:x": share "x"`,
		long:                       "bytes, above the limit of 262144",
		strings.Join(many, ","):    "term 4097 \"c=4097:0.0001\": more than 4096 terms",
	} {
		_, err := report.ParseTraffic(text)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTraffic(%.40q): %v, want %q", text, err, want)
		}
	}
	for text, want := range map[string]string{
		"ttft_p90=2s":             `term 1 "ttft_p90=2s": unknown metric "ttft_p90" (known: ttft_p99, ttft_p50, tpot_p50, itl_p50)`,
		"ttft_p99=2":              `"2" is not a duration with its unit (e.g. 2s, 30ms)`,
		"ttft_p99":                "want METRIC=DURATION, e.g. ttft_p99=2s",
		"ttft_p99=2s,ttft_p99=3s": "term 2 \"ttft_p99=3s\": ttft_p99 is given twice",
		"ttft_p99=-1s":            "-1s is not above 0 and at most 1h0m0s",
		"ttft_p99=2h":             "2h is not above 0 and at most 1h0m0s",
		",":                       "no term",
		strings.Repeat("x", 1025): "1025 bytes, above the limit of 1024",
	} {
		_, err := report.ParseSLOs(text)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSLOs(%.40q): %v, want %q", text, err, want)
		}
	}
	db := measuredDB(t)
	s, err := report.Load(context.Background(), db, "measured")
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := report.ParseTraffic("c=1:0.2,c=4:0.3,c=64:0.5")
	if _, err := report.Recommend(s, report.RecommendOptions{Traffic: tr}); err == nil ||
		err.Error() != "the mix names concurrency 4, 64, which the sweep did not measure (measured levels: 1, 16)" {
		t.Errorf("unmeasured levels: %v", err)
	}
	if _, err := report.Recommend(emptySweep(t), report.RecommendOptions{}); err == nil || !strings.Contains(err.Error(), "no level of the sweep is measured yet") {
		t.Errorf("a sweep without a measured level: %v", err)
	}
	// Every configuration measured at both levels mismatches: none competes, and the error says so.
	cdb, _ := checkDB(t)
	cs, err := report.Load(context.Background(), cdb, "checked")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := report.Recommend(cs, report.RecommendOptions{}); err != nil || r.Winner.Point.ID == "e2" || r.Winner.Point.ID != "e3" {
		t.Errorf("checked sweep: %v %v (the mismatching e2 must never win)", r, err)
	}
}

// TestObservedTraffic: each sample holds for its time at the nearest level (a tie to the larger),
// idle samples are left out, and the shares, rounded to 0.0001, sum to exactly 1 and read back.
func TestObservedTraffic(t *testing.T) {
	s := func(n int, ms int) report.ObservedSample {
		return report.ObservedSample{InFlight: n, Held: time.Duration(ms) * time.Millisecond}
	}
	ob, err := report.ObservedTraffic([]report.ObservedSample{s(0, 500), s(3, 100), s(4, 200), s(10, 100), s(16, 250), s(200, 350), s(0, 500)}, []int{4, 16})
	if err != nil {
		t.Fatal(err)
	}
	// c=4: 3 and 4 (300 ms); c=16: 10 (the tie), 16 and 200 (700 ms); 1000 ms idle of 2000.
	if got := ob.Traffic.String(); got != "c=4:0.3,c=16:0.7" || ob.Samples != 7 || ob.Idle != 2 || ob.IdleShare != 0.5 {
		t.Errorf("observed %s, %d samples, %d idle (%.2f)", got, ob.Samples, ob.Idle, ob.IdleShare)
	}
	// Thirds round to 0.3334, 0.3333, 0.3333; without levels each count is its own level.
	ob, err = report.ObservedTraffic([]report.ObservedSample{s(1, 1), s(2, 1), s(3, 1), s(5000, 0)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := ob.Traffic.String(); got != "c=1:0.3334,c=2:0.3333,c=3:0.3333" || ob.Clamped != 1 {
		t.Errorf("thirds: %s (clamped %d)", got, ob.Clamped)
	}
	back, err := report.ParseTraffic("# observed\n" + ob.Traffic.String() + "\n")
	if err != nil || !reflect.DeepEqual(back, ob.Traffic) {
		t.Errorf("read back %v (%v), want %v", back, err, ob.Traffic)
	}
	// A level whose share rounds to 0 is left out, named.
	ob, err = report.ObservedTraffic([]report.ObservedSample{s(1, 1), s(2, 100000)}, nil)
	if err != nil || ob.Traffic.String() != "c=2:1" || !slices.Equal(ob.Tiny, []int{1}) {
		t.Errorf("tiny: %v %v %v", ob.Traffic, ob.Tiny, err)
	}
	if _, err := report.ObservedTraffic([]report.ObservedSample{s(0, 10), s(0, 10)}, nil); err == nil ||
		err.Error() != "the server had nothing in flight in any of the 2 sample(s): no traffic to weigh" {
		t.Errorf("idle throughout: %v", err)
	}
}
