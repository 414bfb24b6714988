package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// lowerWords are lowercase common words, as the random dataset draws them.
var lowerWords = strings.Fields(`time year people way day man thing woman life child world school state family
student group country problem hand part place case week company system program question work government
draft verify speed batch cache token graph server queue accept length tensor kernel memory layer weight`)

// neutralText is n lowercase words drawn from seed, one space between
// them: the random dataset's form (workload.RandomDataset).
func neutralText(seed uint64, n int) string {
	rng := rand.New(rand.NewPCG(seed, 7))
	w := make([]string, n)
	for i := range w {
		w[i] = lowerWords[rng.IntN(len(lowerWords))]
	}
	return strings.Join(w, " ")
}

const codeSample = `package cache

// Get returns the value stored under key, or false.
func (c *Cache) Get(key string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok || e.expired(c.now()) {
		return 0, false
	}
	c.hits++
	return e.value, true
}

func (c *Cache) Put(key string, value int) {
	c.mu.Lock()
	c.items[key] = &entry{value: value, at: c.now()}
	c.mu.Unlock()
}
`

const pythonSample = `def merge_sort(xs):
    if len(xs) <= 1:
        return xs
    mid = len(xs) // 2
    left, right = merge_sort(xs[:mid]), merge_sort(xs[mid:])
    out = []
    i = j = 0
    while i < len(left) and j < len(right):
        if left[i] <= right[j]:
            out.append(left[i]); i += 1
        else:
            out.append(right[j]); j += 1
    return out + left[i:] + right[j:]
`

const jsonSample = `{"users": [{"id": 1, "name": "ada", "roles": ["admin", "dev"], "active": true},
 {"id": 2, "name": "bob", "roles": ["dev"], "active": false},
 {"id": 3, "name": "eve", "roles": [], "active": true},
 {"id": 4, "name": "kim", "roles": ["ops", "dev"], "active": true}]}`

const proseSample = `The harbour was quiet when Marta reached it, and the boats lay still under a grey sky. She had
walked from the station in the rain, thinking about her brother and the letter he had never sent. Nobody
waited for her on the pier. An old man mending nets looked up, nodded, and went back to his work. Was this
the place her mother had described, the town of bright shutters and loud markets? It seemed smaller now,
and older. Still, she set down her bag, took a breath, and asked the man whether the ferry ran on Sundays.`

const proseSample2 = `Dear committee, I am writing to ask for an extension of the deadline for my thesis. During the
spring my research group moved to a new building, and the equipment I depend on was unavailable for almost
two months. My supervisor, Dr. Okafor, supports this request. I expect to submit the final draft by the end
of September. Thank you for considering it. Yours sincerely, Jonas Weber.`

// Lowercase words alone (the random dataset), short prompts, the prompts the
// other tests send and token ids are neutral; code, JSON and prose of some
// length get their classes; the word count is the simulator's token count.
func TestContentScoreClasses(t *testing.T) {
	neutral := []string{"", "a", "a b c", "hi there", "one two three", strings.Repeat("word ", 100),
		"Same prompt.", "Tell me about batching.", "Question number 7: why?", "Write a haiku about GPUs.",
		"Explain speculative decoding in one paragraph!", "List the first ten primes.",
		"Describe for a new engineer how a compiler turns source code into machine code. (Question 8.)",
		"lower words\n    with indentation\n\tand tabs but nothing else at all in them so it stays neutral by rule one two three four five six seven",
		"x = 1;", // code, but short
	}
	for _, n := range []int{1, 5, 31, 32, 33, 64, 512, 1024, 4096, 20000} {
		for seed := uint64(0); seed < 4; seed++ {
			neutral = append(neutral, neutralText(seed, n))
		}
	}
	for _, s := range neutral {
		c := ContentScore(s)
		if c.Class != ContentNeutral || c.Words != CountTokens(s) {
			t.Errorf("%.60q: %+v, want neutral with %d words", s, c, CountTokens(s))
		}
		other := strings.ContainsFunc(s, func(r rune) bool { return r != ' ' && r != '\n' && r != '\t' && (r < 'a' || r > 'z') })
		if !other && (c.Score != 0 || c.Code != 0 || c.Prose != 0) {
			t.Errorf("%.60q: lowercase words only, score %+v, want 0", s, c)
		}
	}
	for _, s := range []string{codeSample, pythonSample, jsonSample, codeSample + "\n" + jsonSample} {
		if c := ContentScore(s); c.Class != ContentCode || c.Score < ContentThreshold || c.Score > 1 {
			t.Errorf("%.40q: %+v, want code", s, c)
		} else {
			t.Logf("code %.30q: %+v", s, c)
		}
	}
	for _, s := range []string{proseSample, proseSample2, proseSample + "\n\n" + proseSample2} {
		if c := ContentScore(s); c.Class != ContentProse || c.Score > -ContentThreshold || c.Score < -1 {
			t.Errorf("%.40q: %+v, want prose", s, c)
		} else {
			t.Logf("prose %.30q: %+v", s, c)
		}
	}
	// Code and prose half and half: both signals, a score between.
	if c := ContentScore(codeSample + "\n" + proseSample); !(c.Code > 0.5 && c.Prose > 0.5 && c.Score > -1 && c.Score < 1) {
		t.Errorf("code and prose: %+v, want both signals", c)
	} else {
		t.Logf("code and prose: %+v", c)
	}
}

// TestContentScorePadded: a prompt padded to a long context by lowercase filler before it (the
// shared document specsweep's prompt sets are padded with, workload.SharedDocument, then a blank
// line) keeps its class and its score; only its word count grows.
func TestContentScorePadded(t *testing.T) {
	for _, s := range []string{codeSample, pythonSample, jsonSample, proseSample, proseSample2} {
		want := ContentScore(s)
		for _, n := range []int{100, 4096, 30000} {
			padded := neutralText(9, n) + "\n\n" + s
			got := ContentScore(padded)
			if got.Class != want.Class || got.Score != want.Score || got.Words != want.Words+n {
				t.Errorf("%.30q padded with %d words: %+v, want %+v and %d words", s, n, got, want, want.Words+n)
			}
		}
	}
}

// A prompt in pieces (a chat's messages, text parts) scores as its pieces
// joined by newlines; token ids add nothing.
func TestContentScorePieces(t *testing.T) {
	pieces := []string{"You are a helpful assistant.", proseSample, "", codeSample}
	var s contentScorer
	for _, p := range pieces {
		s.add(p)
	}
	if got, want := s.result(), ContentScore(strings.Join(pieces, "\n")); got != want {
		t.Errorf("pieces %+v, joined %+v", got, want)
	}
	var v contentScorer
	scoreContent(&v, []any{map[string]any{"type": "text", "text": proseSample}, "x", 12.0})
	if got, want := v.result(), ContentScore(proseSample+"\nx"); got != want {
		t.Errorf("parts %+v, want %+v", got, want)
	}
	var ids contentScorer
	scoreContent(&ids, []any{101.0, 2023.0})
	if c := ids.result(); c != (Content{}) {
		t.Errorf("token ids: %+v, want the zero (neutral) content", c)
	}
}

// The context factor is exactly 1 up to the knee (every prompt the other
// tests send is shorter), below 1 past it, never rising, and the floor from
// ctx_full on; its value between is floor^x, x the log-position.
func TestContextFactor(t *testing.T) {
	def := profileDefaults()
	for _, p := range []*Profile{Profiles["qwen3.5-122b-a10b"], Profiles["qwen3.6-27b"], &def} {
		for _, n := range []int{0, 1, 64, 1024, 2048, p.CtxKnee} {
			if f := p.ContextFactor(n); f != 1 {
				t.Errorf("%s: %d prompt tokens: factor %v, want 1", p.Name, n, f)
			}
		}
		if f := p.ContextFactor(p.CtxKnee + 1); !(f < 1) {
			t.Errorf("%s: just past the knee: %v, want below 1", p.Name, f)
		}
		prev := 1.0
		for n := p.CtxKnee; n <= 4*p.CtxFull; n += 97 {
			f := p.ContextFactor(n)
			if f > prev || f < p.CtxFloor {
				t.Errorf("%s: %d tokens: factor %v after %v (floor %v): want non-increasing, at least the floor", p.Name, n, f, prev, p.CtxFloor)
				break
			}
			prev = f
		}
		if f := p.ContextFactor(p.CtxFull); f != p.CtxFloor {
			t.Errorf("%s: at ctx_full %v, want the floor %v", p.Name, f, p.CtxFloor)
		}
		mid := int(math.Sqrt(float64(p.CtxKnee) * float64(p.CtxFull))) // halfway in log
		if f, want := p.ContextFactor(mid), math.Sqrt(p.CtxFloor); math.Abs(f-want) > 1e-3 {
			t.Errorf("%s: at %d tokens %v, want sqrt(floor) %v", p.Name, mid, f, want)
		}
	}
}

// Code accepts more than neutral text, neutral more than prose, on every
// algorithm, greedy or sampled, short or long prompts; a neutral request
// below the knee gets the model's acceptance itself (the same slice when
// greedy).
func TestContentOrdersAcceptance(t *testing.T) {
	cfgs := map[string][]string{
		"EAGLE3 3x1": eagle3(3), "EAGLE3 tree": {"--tp", "4", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "4",
			"--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "12"},
		"NEXTN": {"--tp", "4", "--speculative-algorithm", "NEXTN"}, "NGRAM": {"--tp", "4", "--speculative-algorithm", "NGRAM"},
		"DFLASH": {"--tp", "4", "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/d", "--speculative-num-draft-tokens", "16"},
	}
	for _, pn := range ProfileNames() {
		for name, argv := range cfgs {
			m := mustModel(t, pn, argv...)
			for _, temp := range []float64{0, 0.7} {
				for _, prompt := range []int{16, 1024, m.Profile.CtxKnee, 8192, 65536} {
					code := m.ExpectedAcceptFor(ContentCode, prompt, temp)
					neutral := m.ExpectedAcceptFor(ContentNeutral, prompt, temp)
					prose := m.ExpectedAcceptFor(ContentProse, prompt, temp)
					if !(code > neutral && neutral > prose && prose > 1) {
						t.Errorf("%s %s T=%v prompt %d: accept length code %.3f, neutral %.3f, prose %.3f", pn, name, temp, prompt, code, neutral, prose)
					}
				}
				got, want := m.AcceptFor(ContentNeutral, m.Profile.CtxKnee, temp), m.AcceptAt(temp)
				if fmt.Sprint(got) != fmt.Sprint(want) || (temp == 0 && &got[0] != &m.accept[0]) {
					t.Errorf("%s %s T=%v: neutral below the knee %v, want AcceptAt's %v", pn, name, temp, got, want)
				}
			}
		}
	}
	if a := mustModel(t, DefaultProfile, "--tp", "4").AcceptFor(ContentCode, 65536, 1); len(a) != 0 {
		t.Errorf("no speculation: %v, want no draft positions", a)
	}
}

// neutralGolden holds Simulate's results before content and context were
// modelled (commit 898075a): profile, configuration, concurrency, requests,
// input tokens (300 out, seed 11), accept length, output tok/s, completion
// tokens, makespan in ns.
var neutralGolden = []struct {
	profile, cfg               string
	conc, requests, input      int
	acceptLen, outputTokS      float64
	completionToks, makespanNs int64
}{
	{"qwen3.5-122b-a10b", "eagle3Steps3", 1, 8, 1024, 3.7562808438712136, 222.0763311093865, 2400, 10807094966},
	{"qwen3.5-122b-a10b", "eagle3Steps3", 8, 24, 64, 3.74424532158824, 1165.5853013787864, 7200, 6177154080},
	{"qwen3.5-122b-a10b", "eagle3Steps6", 1, 8, 1024, 5.147625462929511, 279.33366252774425, 2400, 8591875316},
	{"qwen3.5-122b-a10b", "eagle3Steps6", 8, 24, 64, 5.157397872409598, 1215.608568605788, 7200, 5922959237},
	{"qwen3.5-122b-a10b", "eagle3Tree", 1, 8, 1024, 4.775350327338982, 240.1908583221413, 2400, 9992053889},
	{"qwen3.5-122b-a10b", "eagle3Tree", 8, 24, 64, 4.759692156910065, 812.4662548135823, 7200, 8861906519},
	{"qwen3.5-122b-a10b", "nextn", 1, 8, 1024, 3.131189666126117, 107.09742162590626, 2400, 22409503082},
	{"qwen3.5-122b-a10b", "nextn", 8, 24, 64, 3.1788473284286525, 111.79180755601077, 7200, 64405435044},
	{"qwen3.5-122b-a10b", "ngram", 1, 8, 1024, 1.8921643577424025, 141.61063097317972, 2400, 16947880138},
	{"qwen3.5-122b-a10b", "ngram", 8, 24, 64, 1.9360798209713685, 441.75689554172476, 7200, 16298557131},
	{"qwen3.5-122b-a10b", "dflash", 1, 8, 1024, 4.690155604648609, 228.29078903034113, 2400, 10512907727},
	{"qwen3.5-122b-a10b", "dflash", 8, 24, 64, 4.8793139307273465, 707.2277538990512, 7200, 10180595940},
	{"qwen3.5-122b-a10b", "standalone", 1, 8, 1024, 2.753642163591911, 152.6633754381747, 2400, 15720862932},
	{"qwen3.5-122b-a10b", "standalone", 8, 24, 64, 2.818651278975215, 751.7036232716944, 7200, 9578243043},
	{"qwen3.5-122b-a10b", "baseline", 1, 8, 1024, 1, 101.06861844704801, 2400, 23746243264},
	{"qwen3.5-122b-a10b", "baseline", 8, 24, 64, 1, 690.7930654104903, 7200, 10422802950},
	{"qwen3.6-27b", "eagle3Steps3", 1, 8, 1024, 2.524732928272427, 108.54693753063854, 2400, 22110250686},
	{"qwen3.6-27b", "eagle3Steps3", 8, 24, 64, 2.5830357400100312, 685.6461217153482, 7200, 10501043865},
	{"qwen3.6-27b", "eagle3Steps6", 1, 8, 1024, 2.7448540129265586, 103.46909878628621, 2400, 23195331052},
	{"qwen3.6-27b", "eagle3Steps6", 8, 24, 64, 2.8214951308321425, 587.502267059052, 7200, 12255271858},
	{"qwen3.6-27b", "eagle3Tree", 1, 8, 1024, 3.601067731390416, 135.08177643394785, 2400, 17767015384},
	{"qwen3.6-27b", "eagle3Tree", 8, 24, 64, 3.646023215552163, 592.6183820276486, 7200, 12149471259},
	{"qwen3.6-27b", "nextn", 1, 8, 1024, 2.2566174608965786, 57.869144647411154, 2400, 41472878416},
	{"qwen3.6-27b", "nextn", 8, 24, 64, 2.280589934106098, 360.64108198872236, 7200, 19964447645},
	{"qwen3.6-27b", "ngram", 1, 8, 1024, 1.769316840521197, 85.86768008452613, 2400, 27949980687},
	{"qwen3.6-27b", "ngram", 8, 24, 64, 1.793756554940887, 398.73713251349153, 7200, 18057009024},
	{"qwen3.6-27b", "dflash", 1, 8, 1024, 3.7514243672190033, 151.18773249902665, 2400, 15874303823},
	{"qwen3.6-27b", "dflash", 8, 24, 64, 3.872543098315814, 595.6557764945728, 7200, 12087518134},
	{"qwen3.6-27b", "standalone", 1, 8, 1024, 2.293962136741317, 73.49183417178472, 2400, 32656689373},
	{"qwen3.6-27b", "standalone", 8, 24, 64, 2.329992440073511, 441.4438246570149, 7200, 16310116028},
	{"qwen3.6-27b", "baseline", 1, 8, 1024, 1, 55.311938761338325, 2400, 43390270776},
	{"qwen3.6-27b", "baseline", 8, 24, 64, 1, 416.1267629980149, 7200, 17302419936},
}

var goldenCfgs = map[string][]string{
	"eagle3Steps3": {"--tp", "4", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"},
	"eagle3Steps6": {"--tp", "4", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d", "--speculative-num-steps", "6", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "7"},
	"eagle3Tree":   {"--tp", "4", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d", "--speculative-num-steps", "4", "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "12"},
	"nextn":        {"--tp", "2", "--speculative-algorithm", "NEXTN"},
	"ngram":        {"--tp", "4", "--speculative-algorithm", "NGRAM"},
	"dflash":       {"--tp", "4", "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/d", "--speculative-num-draft-tokens", "16"},
	"standalone":   {"--tp", "4", "--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", "/d", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"},
	"baseline":     {"--tp", "4"},
}

// Neutral prompts below the knee give exactly what the simulator gave before
// (Simulate, so the e2e tests' noise-free truth, every profile's calibration
// and every bench figure hold). A relative 1e-12 allows a fused multiply-add
// on other architectures; one different acceptance draw moves the accept
// length by far more.
func TestNeutralUnchanged(t *testing.T) {
	same := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Abs(b) }
	for _, g := range neutralGolden {
		m := mustModel(t, g.profile, goldenCfgs[g.cfg]...)
		for _, r := range []SimResult{Simulate(m, g.conc, g.requests, g.input, 300, 11),
			SimulateContent(m, ContentNeutral, g.conc, g.requests, g.input, 300, 11)} {
			if !same(r.AcceptLen, g.acceptLen) || !same(r.OutputTokS, g.outputTokS) || int64(r.CompletionToks) != g.completionToks ||
				!same(float64(r.Makespan), float64(g.makespanNs)) {
				t.Errorf("%s %s c=%d input %d: accept %v, %v tok/s, %d tokens, makespan %d; before: %v, %v, %d, %d",
					g.profile, g.cfg, g.conc, g.input, r.AcceptLen, r.OutputTokS, r.CompletionToks, int64(r.Makespan),
					g.acceptLen, g.outputTokS, g.completionToks, g.makespanNs)
			}
		}
	}
}

// The figures docs/sglangsim.md gives for the default profile, EAGLE-3 steps
// 3 topk 1, one stream, 512 tokens out: accept length per class at a short
// (1024-token) and a long (32768-token) prompt. Code beats prose by far more
// than the 0.3 an end-to-end test of two prompt sets needs.
func TestContentAcceptLengths(t *testing.T) {
	m := mustModel(t, DefaultProfile, eagle3(3)...)
	at := map[int]map[ContentClass]float64{}
	for _, input := range []int{1024, 32768} {
		at[input] = map[ContentClass]float64{}
		for _, c := range []ContentClass{ContentCode, ContentNeutral, ContentProse} {
			r := SimulateContent(m, c, 1, 8, input, 512, 7)
			at[input][c] = r.AcceptLen
			t.Logf("%s, %d-token prompts: accept length %.2f (model %.2f), %.0f tok/s", c, input, r.AcceptLen,
				m.ExpectedAcceptFor(c, input, 0), r.OutputTokS)
			if math.Abs(r.AcceptLen-m.ExpectedAcceptFor(c, input, 0)) > 0.1 {
				t.Errorf("%s at %d: simulated %.3f, model %.3f", c, input, r.AcceptLen, m.ExpectedAcceptFor(c, input, 0))
			}
		}
		if d := at[input][ContentCode] - at[input][ContentProse]; d < 0.5 {
			t.Errorf("%d-token prompts: code - prose = %.2f, want at least 0.5", input, d)
		}
		if !(at[input][ContentCode] > at[input][ContentNeutral] && at[input][ContentNeutral] > at[input][ContentProse]) {
			t.Errorf("%d-token prompts: %v, want code > neutral > prose", input, at[input])
		}
	}
	for _, c := range []ContentClass{ContentCode, ContentNeutral, ContentProse} {
		if !(at[32768][c] < at[1024][c]-0.2) {
			t.Errorf("%s: accept length %.2f at 32768 prompt tokens, %.2f at 1024: want a clear decay", c, at[32768][c], at[1024][c])
		}
	}
}

// The calibration docs/sglangsim.md cites: on the default profile (EAGLE-3
// steps 3 topk 1, greedy) prose accepts 1/1.23 of neutral text (SPEED-Bench:
// random-token inputs overstate throughput by about 23%) and code 1.27x
// prose (EAGLE-3's LLaMA-3.1-8B head: HumanEval 3.49 vs MT-bench 2.77);
// both built-in (Qwen3.5/3.6) profiles' MTP (EAGLE table) at steps 3 accept
// 1.57 tokens a step, an accept rate of 0.19, from 32K prompt tokens on
// (SGLang issue 30763).
func TestContentContextCalibration(t *testing.T) {
	m := mustModel(t, DefaultProfile, eagle3(3)...)
	n, c, p := m.ExpectedAcceptFor(ContentNeutral, 1024, 0), m.ExpectedAcceptFor(ContentCode, 1024, 0), m.ExpectedAcceptFor(ContentProse, 1024, 0)
	t.Logf("default profile, EAGLE3 3x1: code %.3f, neutral %.3f, prose %.3f", c, n, p)
	if r := n / p; math.Abs(r-1.23) > 0.02 {
		t.Errorf("neutral / prose = %.3f, want 1.23", r)
	}
	if r := c / p; math.Abs(r-1.26) > 0.02 {
		t.Errorf("code / prose = %.3f, want 1.26", r)
	}
	for _, pn := range ProfileNames() {
		mtp := mustModel(t, pn, "--tp", "4", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
			"--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")
		for _, prompt := range []int{32768, 100000} {
			al := mtp.ExpectedAcceptFor(ContentNeutral, prompt, 0)
			rate := (al - 1) / 3 // 2026 main's accept rate: accepted drafts over proposed ones
			t.Logf("%s MTP 3x1 at %d prompt tokens: accept length %.3f, rate %.3f (at 1024: %.3f)", pn, prompt, al, rate,
				mtp.ExpectedAcceptFor(ContentNeutral, 1024, 0))
			if math.Abs(al-1.57) > 0.02 {
				t.Errorf("%s MTP at %d prompt tokens: accept length %.3f, want 1.57 (rate 0.19)", pn, prompt, al)
			}
		}
	}
}

// Temperature composes with content and context: every class accepts less
// sampled than greedy, and the order of the classes holds.
func TestContentAndTemperature(t *testing.T) {
	m := mustModel(t, DefaultProfile, eagle3(3)...)
	for _, c := range []ContentClass{ContentCode, ContentNeutral, ContentProse} {
		prev := m.ExpectedAcceptFor(c, 16384, 0)
		for _, temp := range []float64{0.3, 0.7, 1, 2} {
			e := m.ExpectedAcceptFor(c, 16384, temp)
			if !(e < prev) {
				t.Errorf("%s: accept length %.3f at T=%v, %.3f below it: want falling", c, e, temp, prev)
			}
			prev = e
		}
	}
	// The order of composition: odds first, then the temperature's exponent.
	k := 1 + m.Profile.TempAlpha*0.7
	f := m.Profile.ContentCode * m.Profile.ContextFactor(16384)
	for i, p := range m.AcceptFor(ContentCode, 16384, 0.7) {
		q := m.accept[i]
		if want := math.Pow(f*q/(1-q+f*q), k); math.Abs(p-want) > 1e-12 {
			t.Errorf("position %d: %v, want %v", i, p, want)
		}
	}
}

// BenchmarkContentScore scores a 32768-word prompt: what the server does once
// per request (no timed assertion; the figure is in the log).
func BenchmarkContentScore(b *testing.B) {
	text := strings.Repeat(codeSample+proseSample, 1+32768/CountTokens(codeSample+proseSample))
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		ContentScore(text)
	}
}

// FuzzContentScore: any text scores within bounds, counts its words as the
// tokenizer does, and lowercase words alone are neutral with score 0.
func FuzzContentScore(f *testing.F) {
	for _, s := range []string{"", "a b", codeSample, pythonSample, jsonSample, proseSample, proseSample2, neutralText(1, 64), "Ünïcode. Text!", "x.\n\n  Y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := ContentScore(s)
		if c.Words != CountTokens(s) || c.Code < 0 || c.Code > 1 || c.Prose < 0 || c.Prose > 1 || c.Score != c.Code-c.Prose ||
			c.Scored < 0 || c.Scored > c.Words || c.Class != contentClassOf(c.Score, c.Scored) {
			t.Fatalf("%q: %+v (tokens %d)", s, c, CountTokens(s))
		}
		lower := !strings.ContainsFunc(s, func(r rune) bool { return !strings.ContainsRune(" \t\n\r\v\f", r) && (r < 'a' || r > 'z') })
		if lower && c != (Content{Words: c.Words}) {
			t.Fatalf("%q: lowercase words only, %+v", s, c)
		}
	})
}
