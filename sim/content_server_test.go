package sim_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/sim"
)

// lcgWords are lowercase words as the random dataset sends them.
var lcgWords = strings.Fields("time year people way day man thing woman life child world school state family student group country problem hand part place case week company system program question work government number night point home water room mother area money story fact month lot right study book eye job word")

// lcgPrompt is n lowercase words drawn by a fixed LCG from seed.
func lcgPrompt(seed, n int) string {
	x := uint64(seed)*0x9E3779B97F4A7C15 + 1
	w := make([]string, n)
	for i := range w {
		x = x*6364136223846793005 + 1442695040888963407
		w[i] = lcgWords[(x>>33)%uint64(len(lcgWords))]
	}
	return strings.Join(w, " ")
}

// codePrompt and prosePrompt are distinct prompts of their kind, about 80 words.
func codePrompt(i int) string {
	return fmt.Sprintf(`func handler%d(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.URL.Query().Get("id"))
	if err != nil || id < %d {
		http.Error(w, "bad id", http.StatusBadRequest)
		return
	}
	for k := 0; k < len(items); k++ {
		if items[k].ID == id {
			json.NewEncoder(w).Encode(items[k])
			return
		}
	}
	http.NotFound(w, r)
}
// Write a test for handler%d.`, i, i, i)
}

func prosePrompt(i int) string {
	return fmt.Sprintf(`Chapter %d. The morning was cold, and the river had frozen along its edges. Anna walked to the bridge
and waited for her brother, who was late again. He had promised to bring the letters. When he finally
arrived, he said nothing about the delay. They crossed the town together, past the bakery and the old
church. Nobody else was awake. Continue the story in the same voice, and describe what they found at the
house on the hill.`, i)
}

// A server run: requests of every class and long neutral prompts, then the
// truth file against /metrics. Each request's line carries its prompt
// tokens, accepted tokens, verify steps, accept length, content and factors;
// the sums over the lines are exactly what /metrics' counters moved by
// (accepted = Δgeneration_tokens - Δrequests, the first token of each coming
// from prefill; verify = Δspec_verify_calls), and the classes accept in
// their order.
func TestContentAcceptanceOverHTTP(t *testing.T) {
	t.Parallel()
	p := startSim(t, map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}, append([]string{"--enable-metrics"}, spec3...)...)
	p.waitReady()
	counters := func() (gen, reqs, verify float64) {
		resp, err := client.Get(p.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text := string(b)
		return metricValue(t, text, "sglang:generation_tokens_total"), metricValue(t, text, "sglang:num_requests_total"),
			metricValue(t, text, "sglang:spec_verify_calls_total")
	}
	type sent struct {
		class  string
		prompt int
	}
	var sentReqs []sent
	gen0, req0, ver0 := counters()
	const out = 160
	for i := 0; i < 6; i++ {
		p.post("/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": codePrompt(i)}},
			"max_tokens": out, "ignore_eos": true, "temperature": 0, "seed": i})
		sentReqs = append(sentReqs, sent{"code", sim.CountTokens(codePrompt(i))})
		p.post("/v1/completions", map[string]any{"prompt": prosePrompt(i), "max_tokens": out, "ignore_eos": true, "temperature": 0, "seed": i})
		sentReqs = append(sentReqs, sent{"prose", sim.CountTokens(prosePrompt(i))})
		p.post("/generate", map[string]any{"text": lcgPrompt(i, 200), "sampling_params": map[string]any{"max_new_tokens": out,
			"ignore_eos": true, "temperature": 0, "sampling_seed": i}})
		sentReqs = append(sentReqs, sent{"neutral", 200})
	}
	const long = 16384 // past the knee: the context decay
	for i := 0; i < 4; i++ {
		p.post("/generate", map[string]any{"text": lcgPrompt(100+i, long), "sampling_params": map[string]any{"max_new_tokens": out,
			"ignore_eos": true, "temperature": 0, "sampling_seed": i}})
		sentReqs = append(sentReqs, sent{"neutral", long})
	}
	p.post("/generate", map[string]any{"input_ids": []int{101, 2023, 2003}, "sampling_params": map[string]any{"max_new_tokens": out, "ignore_eos": true}})
	sentReqs = append(sentReqs, sent{"neutral", 3})
	gen1, req1, ver1 := counters()

	var lines []truthLine
	for _, l := range p.truthLines() {
		if l.Event == "request" {
			lines = append(lines, l)
		}
	}
	if len(lines) != len(sentReqs) {
		t.Fatalf("%d request lines in the truth file, sent %d requests", len(lines), len(sentReqs))
	}
	prof := sim.Profiles[sim.DefaultProfile]
	type group struct{ accepted, verify int }
	groups := map[string]*group{}
	var accepted, verify int
	for i, l := range lines {
		s := sentReqs[i]
		wantCtx := prof.ContextFactor(s.prompt)
		wantContent := map[string]float64{"code": prof.ContentCode, "prose": prof.ContentProse, "neutral": 1}[s.class]
		if l.PromptTokens != s.prompt || l.ContentClass != s.class || l.ContentFactor != wantContent || l.ContextFactor != wantCtx ||
			l.CompletionTokens != out || l.AcceptedTokens != out-1 || l.VerifySteps < 1 ||
			math.Abs(l.AcceptLength-float64(l.AcceptedTokens)/float64(l.VerifySteps)) > 1e-9 {
			t.Errorf("request %d (%s, %d prompt tokens): truth %+v; want content factor %v, context factor %v", i, s.class, s.prompt, l, wantContent, wantCtx)
		}
		key := fmt.Sprintf("%s/%d", s.class, min(s.prompt, long))
		if s.class == "neutral" && s.prompt < long {
			key = "neutral/short"
		}
		if groups[key] == nil {
			groups[key] = &group{}
		}
		groups[key].accepted += l.AcceptedTokens
		groups[key].verify += l.VerifySteps
		accepted += l.AcceptedTokens
		verify += l.VerifySteps
	}
	if f := prof.ContextFactor(long); !(f < 1) {
		t.Errorf("context factor at %d prompt tokens: %v, want below 1", long, f)
	}
	if got := gen1 - gen0 - (req1 - req0); got != float64(accepted) {
		t.Errorf("/metrics: Δgeneration_tokens - Δrequests = %v, truth: %d accepted tokens", got, accepted)
	}
	if got := ver1 - ver0; got != float64(verify) {
		t.Errorf("/metrics: Δspec_verify_calls = %v, truth: %d verify steps", got, verify)
	}
	al := map[string]float64{}
	for k, g := range groups {
		al[k] = float64(g.accepted) / float64(g.verify)
	}
	t.Logf("accept length by group (truth): %v; /metrics over all: %.3f", al, (gen1-gen0-(req1-req0))/(ver1-ver0))
	shortCode, shortProse := al["code/"+fmt.Sprint(sim.CountTokens(codePrompt(0)))], al["prose/"+fmt.Sprint(sim.CountTokens(prosePrompt(0)))]
	if !(shortCode > al["neutral/short"] && al["neutral/short"] > shortProse+0.3) {
		t.Errorf("accept lengths %v: want code > neutral > prose", al)
	}
	if !(al[fmt.Sprintf("neutral/%d", long)] < al["neutral/short"]-0.3) {
		t.Errorf("accept lengths %v: want the %d-token prompts clearly below the short ones", al, long)
	}
}

// Neutral prompts below the knee (the random dataset's form, and the short
// prose the other tests send) give the verify counts the simulator gave
// before content and context were modelled (recorded at commit 898075a
// with these requests: 96 tokens each, sampling_seed = the prompt's index).
func TestNeutralVerifyCountsUnchanged(t *testing.T) {
	t.Parallel()
	p := startSim(t, map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}, spec3...)
	p.waitReady()
	var prompts []string
	for i, n := range []int{40, 600, 1500, 3000, 4096} {
		prompts = append(prompts, lcgPrompt(i, n))
	}
	prompts = append(prompts, "Tell me about batching.", "Question number 3: why?",
		"Describe for a new engineer how a compiler turns source code into machine code. (Question 8.)")
	want := []int{24, 25, 25, 25, 25, 29, 27, 28, 25, 26, 26, 27, 24, 27, 25, 27}
	var got []int
	for i, pr := range prompts {
		for _, temp := range []float64{0, 0.7} {
			_, body := p.post("/generate", map[string]any{"text": pr, "sampling_params": map[string]any{"max_new_tokens": 96,
				"ignore_eos": true, "temperature": temp, "sampling_seed": i}})
			var g struct {
				MetaInfo struct {
					Verify int `json:"spec_verify_ct"`
				} `json:"meta_info"`
			}
			if err := json.Unmarshal(body, &g); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			got = append(got, g.MetaInfo.Verify)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("verify counts %v, before %v", got, want)
	}
	for _, l := range p.truthLines() {
		if l.Event == "request" && (l.ContentClass != "neutral" || l.ContentFactor != 1 || l.ContextFactor != 1) {
			t.Errorf("truth %+v: want neutral, factors 1", l)
		}
	}
}
