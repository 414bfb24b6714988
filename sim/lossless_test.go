package sim_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
)

// genQuery is one generation request of the lossless tests.
type genQuery struct {
	api       string // "chat", "completions", "generate"
	stream    bool
	prompt    any // a string, or token ids ([]int)
	maxTokens int
	ignoreEOS bool
	temp      any // nil: the API's default (1.0)
	seed      any // nil: none
	rid       string
}

type genResult struct {
	text   string
	tokens int
	finish string
	verify int // /generate's spec_verify_ct
}

func (q genQuery) path() string {
	switch q.api {
	case "chat":
		return "/v1/chat/completions"
	case "completions":
		return "/v1/completions"
	}
	return "/generate"
}

func (q genQuery) body() map[string]any {
	b := map[string]any{}
	if q.api == "generate" {
		sp := map[string]any{"max_new_tokens": q.maxTokens, "ignore_eos": q.ignoreEOS}
		if q.temp != nil {
			sp["temperature"] = q.temp
		}
		if q.seed != nil {
			sp["sampling_seed"] = q.seed
		}
		b["sampling_params"] = sp
		if s, ok := q.prompt.(string); ok {
			b["text"] = s
		} else {
			b["input_ids"] = q.prompt
		}
	} else {
		b["max_tokens"], b["ignore_eos"] = q.maxTokens, q.ignoreEOS
		if q.temp != nil {
			b["temperature"] = q.temp
		}
		if q.seed != nil {
			b["seed"] = q.seed
		}
		if q.api == "chat" {
			b["messages"] = []any{map[string]any{"role": "user", "content": q.prompt}}
		} else {
			b["prompt"] = q.prompt
		}
		if q.stream {
			b["stream_options"] = map[string]any{"include_usage": true}
		}
	}
	if q.stream {
		b["stream"] = true
	}
	if q.rid != "" {
		b["rid"] = q.rid
	}
	return b
}

// gen sends q to p and returns the output text, token count and finish
// reason, whatever the API and streaming; it never calls t.Fatal (goroutines
// call it).
func gen(p *proc, q genQuery) (genResult, error) {
	body, _ := json.Marshal(q.body())
	resp, err := client.Post(p.base+q.path(), "application/json", bytes.NewReader(body))
	if err != nil {
		return genResult{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return genResult{}, fmt.Errorf("%s: status %d", q.path(), resp.StatusCode)
	}
	type meta struct {
		FinishReason *struct {
			Type string `json:"type"`
		} `json:"finish_reason"`
		CompletionTokens int `json:"completion_tokens"`
		SpecVerifyCt     int `json:"spec_verify_ct"`
	}
	type openai struct {
		Choices []struct {
			Text    *string `json:"text"`
			Message *struct {
				Content string `json:"content"`
			} `json:"message"`
			Delta *struct {
				Content *string `json:"content"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
		Text     *string `json:"text"`
		MetaInfo *meta   `json:"meta_info"`
	}
	var r genResult
	take := func(o *openai) {
		if o.MetaInfo != nil { // /generate: cumulative text
			r.text, r.tokens, r.verify = *o.Text, o.MetaInfo.CompletionTokens, o.MetaInfo.SpecVerifyCt
			if o.MetaInfo.FinishReason != nil {
				r.finish = o.MetaInfo.FinishReason.Type
			}
			return
		}
		for _, c := range o.Choices {
			switch {
			case c.Message != nil:
				r.text += c.Message.Content
			case c.Delta != nil && c.Delta.Content != nil:
				r.text += *c.Delta.Content
			case c.Text != nil:
				r.text += *c.Text
			}
			if c.FinishReason != nil {
				r.finish = *c.FinishReason
			}
		}
		if o.Usage != nil {
			r.tokens = o.Usage.CompletionTokens
		}
	}
	if !q.stream {
		var o openai
		if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
			return r, err
		}
		take(&o)
		return r, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	done := false
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			break
		}
		var o openai
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			return r, fmt.Errorf("chunk %q: %v", line, err)
		}
		take(&o)
	}
	if !done {
		return r, fmt.Errorf("stream without [DONE]")
	}
	return r, nil
}

func mustGen(t *testing.T, p *proc, q genQuery) genResult {
	t.Helper()
	r, err := gen(p, q)
	if err != nil {
		t.Fatalf("%+v: %v", q, err)
	}
	return r
}

// genAll sends qs to p, conc at a time, and returns the results in qs's order.
func genAll(t *testing.T, p *proc, qs []genQuery, conc int) []genResult {
	t.Helper()
	out := make([]genResult, len(qs))
	errs := make([]error, len(qs))
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i, q := range qs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = gen(p, q)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%+v: %v", qs[i], err)
		}
	}
	return out
}

// firstDiff is the index of the first word where a and b differ (len when equal).
func firstDiff(a, b string) int {
	wa, wb := strings.Fields(a), strings.Fields(b)
	for i := range wa {
		if i >= len(wb) || wa[i] != wb[i] {
			return i
		}
	}
	return len(wa)
}

var losslessPrompts = []any{
	"Explain speculative decoding in one paragraph.",
	"Write a haiku about GPUs.",
	"Explain speculative decoding in one paragraph!",
	"List the first ten primes.",
	[]int{101, 2023, 2003, 1037, 3231, 102},
	"a",
}

// The same greedy request gives the same text (and length) on servers of
// different speculation, tp, seed, request order, concurrency and rid, on
// every API, streaming or not; other prompts and another model give others.
func TestGreedyLossless(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}
	base := startSim(t, env, "--tp", "4")
	eagle := startSim(t, env, append(spec3, "--tp", "8", "--random-seed", "7")...)
	tree := startSim(t, env, "--tp", "4", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/eagle3",
		"--speculative-num-steps", "5", "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "8", "--random-seed", "123")
	ngram := startSim(t, env, "--tp", "4", "--speculative-algorithm", "NGRAM")
	other := startSim(t, env, "--tp", "4", "--model-path", "/models/Qwen3.5-122B-A10B-FP8")
	for _, p := range []*proc{base, eagle, tree, ngram, other} {
		p.waitReady()
	}

	var qs []genQuery
	for _, api := range []string{"chat", "completions", "generate"} {
		for _, stream := range []bool{false, true} {
			for _, pr := range losslessPrompts {
				if _, ids := pr.([]int); ids && api == "chat" {
					continue
				}
				qs = append(qs, genQuery{api: api, stream: stream, prompt: pr, maxTokens: 64, ignoreEOS: true, temp: 0},
					genQuery{api: api, stream: stream, prompt: pr, maxTokens: 300, temp: 0})
			}
		}
	}
	// Reference: the baseline, one at a time, in order.
	ref := genAll(t, base, qs, 1)
	// The others: reversed, concurrent, with a seed, a rid and a greedy temperature below 1e-5.
	vary := func(seedBase int) []genQuery {
		out := make([]genQuery, len(qs))
		for i, q := range qs {
			q.seed = seedBase + i
			q.rid = fmt.Sprintf("rid-%d-%d", seedBase, i)
			if i%2 == 1 {
				q.temp = 1e-6
			}
			out[len(qs)-1-i] = q
		}
		return out
	}
	for _, c := range []struct {
		name string
		p    *proc
		conc int
	}{{"EAGLE3 steps 3 tp 8 seed 7", eagle, 16}, {"EAGLE3 tree 5/2/8", tree, 5}, {"NGRAM", ngram, 32}} {
		got := genAll(t, c.p, vary(1000), c.conc)
		for i := range qs {
			g, w := got[len(qs)-1-i], ref[i]
			if g.text != w.text || g.tokens != w.tokens || g.finish != w.finish {
				t.Errorf("%s: %s stream %v %v max %d ignore_eos %v: got %d tokens %q (%s), baseline %d tokens %q (%s)",
					c.name, qs[i].api, qs[i].stream, qs[i].prompt, qs[i].maxTokens, qs[i].ignoreEOS, g.tokens, head(g.text), g.finish, w.tokens, head(w.text), w.finish)
			}
		}
	}
	// Lengths: ignore_eos gives max_tokens; without it the model's own EOS, the same everywhere.
	stops := 0
	for i, r := range ref {
		if n := len(strings.Fields(r.text)); n != r.tokens {
			t.Errorf("%+v: %d words, %d tokens", qs[i], n, r.tokens)
		}
		if qs[i].ignoreEOS && r.tokens != 64 {
			t.Errorf("%+v: %d tokens", qs[i], r.tokens)
		}
		if r.finish == "stop" {
			stops++
		}
	}
	if stops == 0 {
		t.Errorf("no request stopped by itself: the natural length is not exercised")
	}
	// Streaming or not, and a longer max_tokens, only extend the same text.
	byKey := map[string]string{}
	for i, q := range qs {
		k := fmt.Sprintf("%s %v", q.api, q.prompt)
		long, short := ref[i].text, byKey[k]
		if len(short) > len(long) {
			long, short = short, long
		}
		if !strings.HasPrefix(long, short) {
			t.Errorf("%s: texts of one prompt are not prefixes of each other: %q / %q", k, head(short), head(long))
		}
		if len(ref[i].text) > len(byKey[k]) {
			byKey[k] = ref[i].text
		}
	}
	// Different prompts, different texts; completions' prompt and /generate's
	// text are the same prompt; chat's template makes another.
	texts := map[string]string{}
	for i, q := range qs {
		if q.maxTokens != 64 || q.stream || q.api == "generate" {
			continue
		}
		k := fmt.Sprintf("%s %v", q.api, q.prompt)
		for k2, t2 := range texts {
			if t2 == ref[i].text {
				t.Errorf("%s and %s share their text", k, k2)
			}
		}
		texts[k] = ref[i].text
	}
	for i, q := range qs {
		if q.api == "generate" && q.ignoreEOS && !q.stream {
			if w := texts[fmt.Sprintf("completions %v", q.prompt)]; ref[i].text != w {
				t.Errorf("/generate %v: %q, /v1/completions: %q", q.prompt, head(ref[i].text), head(w))
			}
		}
	}
	// Another model: other texts.
	oq := genQuery{api: "completions", prompt: losslessPrompts[0], maxTokens: 64, ignoreEOS: true, temp: 0}
	if mustGen(t, other, oq).text == mustGen(t, base, oq).text {
		t.Errorf("another --model-path gives the same text")
	}
}

func head(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// Sampled requests keep their seed's words: the same seed the same text,
// another seed another, greedy or not is another text again.
func TestSampledTextsBySeed(t *testing.T) {
	t.Parallel()
	p := startSim(t, map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}, spec3...)
	p.waitReady()
	for _, api := range []string{"chat", "generate"} {
		q := genQuery{api: api, prompt: "Same prompt.", maxTokens: 48, ignoreEOS: true}
		q1, q2 := q, q
		q1.seed, q2.seed = 1, 2
		a, b, a2 := mustGen(t, p, q1), mustGen(t, p, q2), mustGen(t, p, q1)
		if a.text == b.text || a.text != a2.text {
			t.Errorf("%s: seed 1 %q, seed 2 %q, seed 1 again %q", api, head(a.text), head(b.text), head(a2.text))
		}
		// Without a seed, two requests of one prompt differ (each its arrival number).
		if x, y := mustGen(t, p, q), mustGen(t, p, q); x.text == y.text {
			t.Errorf("%s: sampled requests without a seed share their text", api)
		}
		g := q1
		g.temp = 0
		if mustGen(t, p, g).text == a.text {
			t.Errorf("%s: greedy text is the sampled one", api)
		}
	}
}

// SGLANGSIM_NONDETERMINISM=0.5: about half of 40 repeated greedy requests
// diverge, each only in its last quarter, with and without speculation; a
// server run with the same flags repeats its texts; sampled requests are
// untouched.
func TestNondeterminism(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}
	nd := map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0", "SGLANGSIM_NONDETERMINISM": "0.5"}
	clean := startSim(t, env)
	base := startSim(t, nd)
	again := startSim(t, nd)
	spec := startSim(t, nd, spec3...)
	for _, p := range []*proc{clean, base, again, spec} {
		p.waitReady()
	}
	q := genQuery{api: "chat", prompt: "Tell me about batching.", maxTokens: 64, ignoreEOS: true, temp: 0}
	want := mustGen(t, clean, q).text
	qs := make([]genQuery, 40)
	for i := range qs {
		qs[i] = q
		qs[i].stream = i%3 == 0
	}
	runs := map[string][]genResult{
		"baseline":           genAll(t, base, qs, 1),
		"baseline restarted": genAll(t, again, qs, 1),
		"EAGLE3":             genAll(t, spec, qs, 8),
	}
	for name, rs := range runs {
		diverged := 0
		for i, r := range rs {
			if r.text == want {
				continue
			}
			diverged++
			d := firstDiff(r.text, want)
			gw, ww := strings.Fields(r.text), strings.Fields(want)
			if len(gw) != 64 || d < 48 {
				t.Errorf("%s request %d: %d words, diverges at word %d; want 64, from 48 on", name, i, len(gw), d)
				continue
			}
			for j := d; j < 64; j++ {
				if gw[j] == ww[j] {
					t.Errorf("%s request %d: word %d after the divergence at %d is the deterministic one", name, i, j, d)
				}
			}
		}
		t.Logf("%s: %d of 40 diverged", name, diverged)
		if diverged < 5 || diverged > 35 {
			t.Errorf("%s: %d of 40 diverged, want about 20", name, diverged)
		}
	}
	for i := range qs {
		if runs["baseline"][i].text != runs["baseline restarted"][i].text {
			t.Errorf("request %d: a restarted server with the same flags gives another text", i)
		}
	}
	// Sampled requests: the clean server's words.
	for i := 0; i < 10; i++ {
		s := genQuery{api: "completions", prompt: "x y", maxTokens: 40, ignoreEOS: true, seed: i}
		if a, b := mustGen(t, base, s), mustGen(t, clean, s); a.text != b.text {
			t.Errorf("sampled seed %d: %q under nondeterminism, %q without", i, head(a.text), head(b.text))
		}
	}
}

// SGLANGSIM_FAIL=lossy:0.05 on EAGLE3: most 64-token greedy outputs differ
// from the baseline's, early; the acceptance is the clean server's; on a
// baseline server lossy changes nothing.
func TestFailLossy(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0"}
	lossy := map[string]string{"SGLANGSIM_WARMUP_SECONDS": "0", "SGLANGSIM_FAIL": "lossy:0.05"}
	ref := startSim(t, env)
	cleanSpec := startSim(t, env, spec3...)
	lossySpec := startSim(t, lossy, spec3...)
	lossyBase := startSim(t, lossy)
	for _, p := range []*proc{ref, cleanSpec, lossySpec, lossyBase} {
		p.waitReady()
	}
	var qs []genQuery
	for i := 0; i < 40; i++ {
		qs = append(qs, genQuery{api: "generate", prompt: fmt.Sprintf("Question number %d: why?", i), maxTokens: 64, ignoreEOS: true, temp: 0, seed: i})
	}
	want := genAll(t, ref, qs, 8)
	clean := genAll(t, cleanSpec, qs, 8)
	got := genAll(t, lossySpec, qs, 8)
	var firsts []int
	for i := range qs {
		if clean[i].text != want[i].text {
			t.Errorf("request %d: clean EAGLE3 differs from the baseline", i)
		}
		if got[i].verify != clean[i].verify || got[i].tokens != 64 {
			t.Errorf("request %d: lossy %d tokens in %d verify steps, clean %d", i, got[i].tokens, got[i].verify, clean[i].verify)
		}
		d := firstDiff(got[i].text, want[i].text)
		if d == 0 {
			t.Errorf("request %d: the first token (prefill) is wrong", i)
		}
		firsts = append(firsts, d)
	}
	sort.Ints(firsts)
	t.Logf("first divergence per output (64: none): %v", firsts)
	if n := sort.SearchInts(firsts, 64); n <= len(qs)/2 {
		t.Errorf("%d of %d outputs differ from the baseline, want most", n, len(qs))
	}
	if med := firsts[len(firsts)/2]; med >= 40 {
		t.Errorf("median first divergence %d, want before token 40", med)
	}
	// Streamed, the same seed gives the same draws and so the same text.
	for i := 0; i < 8; i++ {
		s := qs[i]
		s.stream = true
		if r := mustGen(t, lossySpec, s); r.text != got[i].text {
			t.Errorf("request %d streamed: %q, not streamed: %q", i, head(r.text), head(got[i].text))
		}
	}
	// A baseline server verifies nothing: lossy has no effect.
	for i, r := range genAll(t, lossyBase, qs, 8) {
		if r.text != want[i].text {
			t.Errorf("request %d: lossy baseline differs from the clean one", i)
		}
	}
}

func TestLosslessBadEnv(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ env, want string }{
		{"SGLANGSIM_NONDETERMINISM=1.5", `sglangsim: invalid SGLANGSIM_NONDETERMINISM="1.5": want a probability in [0, 1]`},
		{"SGLANGSIM_NONDETERMINISM=-0.1", `sglangsim: invalid SGLANGSIM_NONDETERMINISM="-0.1": want a probability in [0, 1]`},
		{"SGLANGSIM_NONDETERMINISM=half", `sglangsim: invalid SGLANGSIM_NONDETERMINISM="half": want a probability in [0, 1]`},
		{"SGLANGSIM_FAIL=lossy", "sglangsim: SGLANGSIM_FAIL=lossy needs the probability that an accepted draft token is wrong, in (0, 1], e.g. lossy:0.05 (got no probability)"},
		{"SGLANGSIM_FAIL=lossy:0", `sglangsim: SGLANGSIM_FAIL=lossy needs the probability that an accepted draft token is wrong, in (0, 1], e.g. lossy:0.05 (got "0")`},
		{"SGLANGSIM_FAIL=lossy:1.5", `(got "1.5")`},
		{"SGLANGSIM_FAIL=lossy:x", `(got "x")`},
	} {
		cmd := exec.Command(simBin, "--model-path", "m")
		cmd.Env = []string{c.env}
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: %v %q; want exit 1 with %q", c.env, err, out, c.want)
		}
	}
}
