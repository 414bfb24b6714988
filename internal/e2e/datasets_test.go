package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/sim"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// Prompt sets on the simulator (issue 27): a sweep measured on a code-like and a prose-like set at
// two context lengths reads each source's acceptance as the simulator's truth file has it, orders
// them as the model does, and reports each set's winner and the weighted one.

// writeCodeSet writes n generated code-like prompts as plain JSONL (a prompt field).
func writeCodeSet(t *testing.T, dir string, n int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(27, 1))
	names := []string{"total", "count", "size", "limit", "offset", "index", "buffer", "cursor"}
	var b strings.Builder
	for i := range n {
		a, c := names[rng.IntN(len(names))], names[rng.IntN(len(names))]
		code := fmt.Sprintf(`func handle%d(req *Request) (int, error) {
    if req == nil {
        return 0, errNil
    }
    %s := 0
    for i := 0; i < len(req.Items); i++ {
        %s += req.Items[i].Size * %d
        if %s > req.Limit {
            return %s, errLimit
        }
    }
    return %s + %s, nil
}
Complete the function handle%d_test(t *testing.T) {`, i, a, a, rng.IntN(9)+1, a, a, a, c, i)
		line, _ := json.Marshal(map[string]any{"prompt": code, "category": "coding"})
		b.Write(append(line, '\n'))
	}
	p := filepath.Join(dir, "code.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeProseSet writes n generated prose questions of two turns in MT-Bench's question.jsonl form.
func writeProseSet(t *testing.T, dir string, n int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(27, 2))
	who := []string{"Marta", "Jonas", "The old fisherman", "Her brother", "The teacher", "A stranger"}
	did := []string{"walked to the harbour in the rain", "read the letter twice", "waited by the window until dusk",
		"asked about the ferry", "remembered the summer they met", "closed the shop early"}
	why := []string{"Nobody knew why.", "It was the last day of autumn.", "The town was quiet.", "She did not answer.",
		"Everything felt smaller now.", "The bells rang at noon."}
	sentence := func() string {
		return fmt.Sprintf("%s %s. %s", who[rng.IntN(len(who))], did[rng.IntN(len(did))], why[rng.IntN(len(why))])
	}
	var b strings.Builder
	for i := range n {
		var first []string
		for range 5 {
			first = append(first, sentence())
		}
		turns := []string{"Write the next paragraph of this story. " + strings.Join(first, " "),
			"Now tell it again from another point of view. " + sentence() + " " + sentence() + " " + sentence()}
		line, _ := json.Marshal(map[string]any{"question_id": 100 + i, "category": "writing", "turns": turns})
		b.Write(append(line, '\n'))
	}
	p := filepath.Join(dir, "question.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// truthRequest is one request line of the simulator's truth file.
type truthRequest struct {
	Event        string  `json:"event"`
	Arrival      float64 `json:"arrival_unix_ms"`
	Finish       float64 `json:"finish_unix_ms"`
	PromptTokens int     `json:"prompt_tokens"`
	Accepted     int     `json:"accepted_tokens"`
	Verify       int     `json:"verify_steps"`
	Class        string  `json:"content_class"`
}

func readTruth(t *testing.T, path string) []truthRequest {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []truthRequest
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r truthRequest
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Event == "request" {
			out = append(out, r)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// testPromptSetsOnTheSimulator: the Done-when of issue 27 on the real simulator and the real binary.
func testPromptSetsOnTheSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	dir := t.TempDir()
	code, prose := writeCodeSet(t, dir, 12), writeProseSet(t, dir, 12)
	// Content classes far apart, so the best num_steps differs by set (checked on the model below).
	prof := profileFile(t, "example-8b", func(m map[string]any) { m["content_code"], m["content_prose"] = 3.0, 0.01 }, dir)
	truth := filepath.Join(dir, "truth.jsonl")
	f := writeSpec(t, fmt.Sprintf(`version: 1
name: e2e-sets
hosts: [{name: here, driver: local, gpus: 4}]
server:
  command: [%s]
  args: [--model-path, /models/synthetic, --host, 127.0.0.1, --port, "31811", --enable-metrics]
  env: {SGLANGSIM_TIME_SCALE: "0.5", SGLANGSIM_LOAD_SECONDS: "1", SGLANGSIM_WARMUP_SECONDS: "0.2", SGL_FORCE_SHUTDOWN: "1",
    SGLANGSIM_PROFILE: %q, SGLANGSIM_TRUTH: %q}
  port: 31811
  ready_timeout: 1m
  stop_timeout: 20s
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/eagle3]
matrix: {method: [baseline, eagle3], num_steps: [1, 7], topk: [1], tp: [1]}
workload:
  concurrency: [1]
  requests: 8
  warmup_requests: 0
  output_tokens: 64
  input_tokens: [512, 8192]
  datasets:
    - {name: code, path: %s, weight: 9}
    - {name: prose, path: %s, format: mtbench}
`, testhost.SimBinary(t), prof, truth, code, prose))

	// The model's answer first, so the checks below are not vacuous: code accepts more than prose,
	// long contexts less than short, and the best num_steps differs by set.
	p, err := sim.LoadProfile(prof)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := sweep.Load(f.spec)
	if err != nil {
		t.Fatal(err)
	}
	model := map[string]map[sweep.SourceKey]sim.SimResult{} // point label, source
	classOf := map[string]sim.ContentClass{"code": sim.ContentCode, "prose": sim.ContentProse}
	for _, pt := range spec.Plan().Points {
		a, _, err := sim.ParseArgs(pt.Argv[1:])
		if err != nil {
			t.Fatal(err)
		}
		model[pt.Label()] = map[sweep.SourceKey]sim.SimResult{}
		for _, src := range spec.Workload.Sources() {
			model[pt.Label()][src.Key()] = sim.SimulateContent(sim.NewModel(a, p, 96), classOf[src.Dataset], 1, 8, src.InputTokens, 64, 1)
		}
	}
	s7, s1 := "eagle3 s=7 k=1 n=8 tp=1", "eagle3 s=1 k=1 n=2 tp=1"
	for _, n := range []int{512, 8192} {
		c, pr := sweep.SourceKey{Dataset: "code", InputTokens: n}, sweep.SourceKey{Dataset: "prose", InputTokens: n}
		if !(model[s7][c].OutputTokS > 1.1*model[s1][c].OutputTokS && model[s1][pr].OutputTokS > 1.05*model[s7][pr].OutputTokS) {
			t.Fatalf("the model does not make the winners differ at %d tokens: code s=7 %.1f s=1 %.1f, prose s=7 %.1f s=1 %.1f",
				n, model[s7][c].OutputTokS, model[s1][c].OutputTokS, model[s7][pr].OutputTokS, model[s1][pr].OutputTokS)
		}
		if !(model[s7][c].AcceptLen > model[s7][pr].AcceptLen) {
			t.Fatalf("the model: code accepts %.2f, prose %.2f at %d tokens", model[s7][c].AcceptLen, model[s7][pr].AcceptLen, n)
		}
	}
	// The weighted mix's winner by the model (the traffic is nine parts code).
	weighted, wv, runnerUp := "", 0.0, 0.0
	for label, bySource := range model {
		runs := map[sweep.SourceKey]sweep.RepeatRun{}
		for k, r := range bySource {
			v := r.OutputTokS
			rr := sweep.RepeatRun{OK: true}
			rr.Figures[sweep.OutputTokS] = &v
			runs[k] = rr
		}
		v := *sweep.Mix(spec.Workload.Sources(), runs).Figures[sweep.OutputTokS]
		switch {
		case v > wv:
			weighted, wv, runnerUp = label, v, wv
		case v > runnerUp:
			runnerUp = v
		}
	}
	if weighted != s7 || wv < 1.1*runnerUp {
		t.Fatalf("the model's weighted winner is %s (%.1f tok/s, runner-up %.1f), want %s by 10%%", weighted, wv, runnerUp, s7)
	}
	for _, set := range []string{"code", "prose"} {
		short, long := model[s7][sweep.SourceKey{Dataset: set, InputTokens: 512}], model[s7][sweep.SourceKey{Dataset: set, InputTokens: 8192}]
		if !(short.AcceptLen > long.AcceptLen) {
			t.Fatalf("the model: %s accepts %.2f at 512 tokens, %.2f at 8192", set, short.AcceptLen, long.AcceptLen)
		}
	}

	r := specsweep(t, 8*time.Minute, "run", "--db", f.db, f.spec)
	if r.code != 0 {
		t.Fatalf("run failed:\n%s", r)
	}
	for _, want := range []string{"Best per prompt source", "code@512", "prose@8192", "the winner differs by prompt source"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run's output lacks %q:\n%s", want, r.stdout)
		}
	}

	// Every source's accept length, as measured, against the truth file's requests of that run.
	ctx := context.Background()
	db, err := store.Open(ctx, f.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := db.RunDetails(ctx, store.RunsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	reqs := readTruth(t, truth)
	measured := map[string]map[sweep.SourceKey]float64{}
	for _, run := range runs {
		if run.Status != store.RunOK {
			t.Errorf("run %d (%s, %s@%v) is %s: %s", run.RunID, run.Method, run.Dataset, run.InputTokens, run.Status, run.Error)
			continue
		}
		if run.InputTokens == nil || run.Dataset == "" {
			t.Errorf("run %d records no prompt source: dataset %q input_tokens %v", run.RunID, run.Dataset, run.InputTokens)
			continue
		}
		key := sweep.SourceKey{Dataset: run.Dataset, InputTokens: *run.InputTokens}
		if run.IsBaseline {
			continue
		}
		acc, ver := 0, 0
		from, to := float64(run.StartedAt.UnixMilli())-1, float64(run.FinishedAt.UnixMilli())+1
		for _, q := range reqs {
			if q.Arrival >= from && q.Finish <= to {
				acc, ver = acc+q.Accepted, ver+q.Verify
				if want := map[string]string{"code": "code", "prose": "prose"}[key.Dataset]; q.Verify > 0 && q.Class != want {
					t.Errorf("run %d (%v): a request of class %s", run.RunID, key, q.Class)
				}
			}
		}
		if ver == 0 || run.AcceptLength == nil {
			t.Errorf("run %d (%v): truth has %d verify steps, measured accept %v", run.RunID, key, ver, run.AcceptLength)
			continue
		}
		want := float64(acc) / float64(ver)
		if d := math.Abs(*run.AcceptLength - want); d > 0.05 {
			t.Errorf("%s on %s@%d: measured accept length %.3f, the truth file's %.3f", run.Method, key.Dataset, key.InputTokens, *run.AcceptLength, want)
		}
		label := fmt.Sprintf("%s s=%d k=1 n=%d tp=1", run.Method, *run.NumSteps, *run.NumDraftTokens)
		if measured[label] == nil {
			measured[label] = map[sweep.SourceKey]float64{}
		}
		measured[label][key] = *run.AcceptLength
		t.Logf("%s %s@%d: accept %.3f (truth %.3f, model %.3f), %.1f tok/s (model %.1f)", label, key.Dataset, key.InputTokens,
			*run.AcceptLength, want, model[label][key].AcceptLen, deref(run.OutputTokS), model[label][key].OutputTokS)
	}
	for _, label := range []string{s1, s7} {
		m := measured[label]
		for _, n := range []int{512, 8192} {
			if c, p := m[sweep.SourceKey{Dataset: "code", InputTokens: n}], m[sweep.SourceKey{Dataset: "prose", InputTokens: n}]; !(c > p) {
				t.Errorf("%s at %d tokens: code accepts %.3f, prose %.3f", label, n, c, p)
			}
		}
		for _, set := range []string{"code", "prose"} {
			if s, l := m[sweep.SourceKey{Dataset: set, InputTokens: 512}], m[sweep.SourceKey{Dataset: set, InputTokens: 8192}]; !(s > l) {
				t.Errorf("%s on %s: %.3f at 512 tokens, %.3f at 8192", label, set, s, l)
			}
		}
	}

	// Each set's winner and the weighted one, as the report has them.
	s, err := report.Load(ctx, db, "e2e-sets")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{512, 8192} {
		for set, want := range map[string]string{"code": "eagle3 s=7 k=1 n=8", "prose": ""} {
			bs := report.BestPerLevelOn(s, sweep.SourceKey{Dataset: set, InputTokens: n})
			if len(bs) != 1 {
				t.Fatalf("%s@%d: %d bests", set, n, len(bs))
			}
			got := bs[0].Best.Point.Label()
			switch {
			case want != "" && got != want:
				t.Errorf("%s@%d: the winner is %s, want %s", set, n, got, want)
			case want == "" && got == "eagle3 s=7 k=1 n=8":
				t.Errorf("%s@%d: the winner is %s, which the model says is slower here than s=1", set, n, got)
			}
		}
	}
	if w := report.BestPerLevel(s); len(w) != 1 || w[0].Best.Point.Label() != "eagle3 s=7 k=1 n=8" {
		t.Errorf("weighted winner %+v, want eagle3 s=7 k=1 n=8", w)
	}
	rep := specsweep(t, time.Minute, "report", "--db", f.db, "--format", "md", "-o", filepath.Join(dir, "report"), "e2e-sets")
	if rep.code != 0 {
		t.Fatalf("report failed:\n%s", rep)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report", "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Best configuration per prompt source", "Accept length by prompt source and concurrency",
		"Accept length by context length", "the winner differs by prompt source", "weighted: eagle3 s=7 k=1 n=8"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}

	// The dashboard, in a browser, shows the same tables under the sweep's card.
	bctx := browser(t)
	d := startDaemon(t, f.db)
	card := fmt.Sprintf(`article.sweep[data-sweep="%d"]`, s.ID)
	if err := chromedp.Do(within(t, bctx, time.Minute),
		chromedp.Navigate(loginURL(t, f.db, d.addr)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#finished tr a.open[href="#sweep=%d"]`, s.ID))),
		// A finished sweep's card opens from its link (#sweep=ID).
		chromedp.Navigate(fmt.Sprintf("http://%s/#sweep=%d", d.addr, s.ID)),
		chromedp.WaitVisible(chromedp.CSS(card+" .by-source .sources table")),
	); err != nil {
		t.Fatalf("the card's per-source tables: %v", err)
	}
	// The recommendation for equal time at each level names the weighted winner.
	if rec := pageText(t, bctx, card+" .recommend"); !strings.Contains(rec, "eagle3 s=7 k=1 n=8") {
		t.Errorf("the card's recommendation: %q", rec)
	}
	text := pageText(t, bctx, card+" .by-source")
	for _, want := range []string{"Per prompt source", "prose@8192", "Accept length by prompt source and concurrency (tp 1)",
		"Accept length by context length", "eagle3 s=7 k=1 n=8"} {
		if !strings.Contains(text, want) {
			t.Errorf("the card's per-source section lacks %q:\n%s", want, text)
		}
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}
