package sim

import (
	"encoding/json"
	"math"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestParseFailLossy(t *testing.T) {
	for in, want := range map[string]float64{"lossy:0.05": 0.05, "lossy:1": 1, " lossy:0.5 ": 0.5, "lossy:1e-3": 0.001} {
		f, err := ParseFail(in)
		if err != nil || f.Kind != "lossy" || f.Prob != want {
			t.Errorf("ParseFail(%q) = %+v, %v; want lossy %v", in, f, err, want)
		}
	}
	for _, in := range []string{"lossy", "lossy:", "lossy:0", "lossy:-0.1", "lossy:1.5", "lossy:x", "lossy:NaN", "lossy:Inf"} {
		_, err := ParseFail(in)
		if err == nil || !strings.Contains(err.Error(), "SGLANGSIM_FAIL=lossy needs the probability that an accepted draft token is wrong, in (0, 1], e.g. lossy:0.05") {
			t.Errorf("ParseFail(%q): %v", in, err)
		}
	}
	if _, err := ParseFail("lossless"); err == nil || !strings.Contains(err.Error(), "lossy:P") {
		t.Errorf("unknown kind: %v, want the list with lossy:P", err)
	}
}

func TestNondeterminismKnob(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "SGLANGSIM_NONDETERMINISM" {
				return v
			}
			return ""
		}
	}
	for in, want := range map[string]float64{"": 0, "0": 0, "0.5": 0.5, "1": 1, " 0.25 ": 0.25} {
		c, err := LoadConfig(env(in))
		if err != nil || c.Nondeterminism != want {
			t.Errorf("SGLANGSIM_NONDETERMINISM=%q: %v, %v; want %v", in, c.Nondeterminism, err, want)
		}
	}
	for _, in := range []string{"-0.1", "1.01", "x", "NaN", "50%"} {
		if _, err := LoadConfig(env(in)); err == nil || !strings.Contains(err.Error(), "invalid SGLANGSIM_NONDETERMINISM=") ||
			!strings.Contains(err.Error(), "want a probability in [0, 1]") {
			t.Errorf("SGLANGSIM_NONDETERMINISM=%q: %v", in, err)
		}
	}
}

// key is the greedy key of a JSON prompt (kind "text") under model path mp.
func key(t *testing.T, mp, profile, prompt string) uint64 {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(prompt), &v); err != nil {
		t.Fatal(err)
	}
	h := greedyHasher(mp, profile, "text")
	hashContent(h, v)
	return h.Sum64()
}

// The same content in the forms the APIs carry it gives one key; other
// content, model path or profile another.
func TestGreedyKeyForms(t *testing.T) {
	const mp, prof = "/models/m", "qwen3.5-122b-a10b"
	base := key(t, mp, prof, `"a b c"`)
	for _, same := range []string{`["a b c"]`, `[{"type":"text","text":"a b c"}]`} {
		if k := key(t, mp, prof, same); k != base {
			t.Errorf("%s: key differs from \"a b c\"'s", same)
		}
	}
	ids := key(t, mp, prof, `[1, 2, 3]`)
	h := greedyHasher(mp, prof, "text")
	hashIDs(h, []int{1, 2, 3})
	if key(t, mp, prof, `[[1,2,3]]`) != ids || key(t, mp, prof, `[1.0,2,3]`) != ids || h.Sum64() != ids {
		t.Errorf("token id forms differ")
	}
	seen := map[uint64]string{}
	for _, p := range []string{`"a b c"`, `"a b  c"`, `"a b d"`, `[1,2,3]`, `[1,2]`, `"1 2 3"`, `[{"type":"text","text":"a b c"},{"type":"text","text":"x"}]`} {
		k := key(t, mp, prof, p)
		if q, dup := seen[k]; dup {
			t.Errorf("%s and %s share a key", p, q)
		}
		seen[k] = p
	}
	if key(t, "/models/other", prof, `"a b c"`) == base || key(t, mp, "qwen3.6-27b", `"a b c"`) == base {
		t.Errorf("the key does not depend on the model")
	}
	var chat uint64
	{
		h := greedyHasher(mp, prof, "chat")
		hashContent(h, "a b c")
		chat = h.Sum64()
	}
	if chat == base {
		t.Errorf("chat and text share a key")
	}
}

// Sampled requests keep their words (the seed's, as before); greedy ones take
// them from the key and not the seed, and so does their natural length; the
// acceptance draws are the seed's in both cases.
func TestGreedyRequestWords(t *testing.T) {
	s := NewRequest("x", 10, 64, true, 0, 12345)
	if got, want := s.Text(64), string(appendWords(nil, 0, 64, 12345)); got != want {
		t.Errorf("sampled text changed:\n%s\n%s", got, want)
	}
	const k = 0xfeedface
	a := NewGreedyRequest("a", 10, 1000, false, 600, 1, k)
	b := NewGreedyRequest("b", 10, 1000, false, 600, 2, k)
	if a.target != b.target || a.stop != b.stop || a.Text(a.target) != b.Text(b.target) {
		t.Errorf("greedy requests of one key differ: %d %s / %d %s", a.target, a.stop, b.target, b.stop)
	}
	if c := NewGreedyRequest("c", 10, 1000, false, 600, 1, k+1); c.Text(200) == a.Text(200) {
		t.Errorf("greedy requests of two keys share their text")
	}
	// Longer max_tokens only extends the text.
	short := NewGreedyRequest("s", 10, 20, true, 600, 3, k)
	if !strings.HasPrefix(a.Text(100), short.Text(20)) {
		t.Errorf("greedy text not a prefix of a longer one")
	}
	// Acceptance draws: the same sequence as a sampled request of the seed.
	for _, ignore := range []bool{true, false} {
		g, r := NewGreedyRequest("g", 10, 1000, ignore, 600, 77, k), NewRequest("r", 10, 1000, ignore, 600, 77)
		for i := 0; i < 100; i++ {
			if x, y := g.rng.Float64(), r.rng.Float64(); x != y {
				t.Fatalf("ignore_eos %v: draw %d: greedy %v, sampled %v", ignore, i, x, y)
			}
		}
	}
	// Natural lengths of greedy requests: exponential around the mean, as sampled ones.
	sum := 0.0
	for i := 0; i < 4000; i++ {
		sum += float64(NewGreedyRequest("n", 10, 1<<30, false, 600, 0, uint64(i)*golden).target)
	}
	if m := sum / 4000; math.Abs(m-600) > 40 {
		t.Errorf("mean greedy natural length %.0f, want ~600", m)
	}
}

func TestDivergence(t *testing.T) {
	for _, greedy := range []bool{true, false} {
		r := newRequest("x", 1, 80, true, 0, 9, greedy, 0xabc)
		clean := strings.Fields(r.Text(80))
		r.nondet = divergence{at: 30, key: 5}
		div := strings.Fields(r.Text(80))
		for i := range clean {
			if (i < 30) != (clean[i] == div[i]) {
				t.Fatalf("greedy %v: word %d: %q vs %q; want equal before 30 and different from it", greedy, i, clean[i], div[i])
			}
		}
		r.markWrong(10, 6)
		r.markWrong(5, 7) // only the first counts
		if d := r.divergence(); d.at != 10 || d.key != 6 || r.FirstWrong() != 10 {
			t.Errorf("divergence %+v, first wrong %d; want the earlier: the wrong token at 10", d, r.FirstWrong())
		}
		// Streamed in pieces, the text is the same.
		var b []byte
		for i := 0; i < 80; i += 7 {
			b = r.appendText(b, i, min(7, 80-i), r.divergence())
		}
		if string(b) != r.Text(80) {
			t.Errorf("pieces differ from the whole")
		}
	}
}

func TestNondeterminismDraws(t *testing.T) {
	n, hits := 2000, 0
	for i := 1; i <= n; i++ {
		d := nondeterminism(42, uint64(i), 0.5, 64)
		if d != nondeterminism(42, uint64(i), 0.5, 64) {
			t.Fatalf("request %d: not reproducible", i)
		}
		if d.at < 0 {
			continue
		}
		hits++
		if d.at < 48 || d.at > 63 {
			t.Errorf("request %d diverges at %d, want in the last quarter [48, 63]", i, d.at)
		}
	}
	if share := float64(hits) / float64(n); math.Abs(share-0.5) > 0.05 {
		t.Errorf("share diverged %.3f, want ~0.5", share)
	}
	for i := uint64(1); i < 100; i++ {
		if nondeterminism(1, i, 0, 64).at >= 0 || nondeterminism(1, i, 1, 64).at < 0 {
			t.Fatalf("p 0 or 1 not honoured")
		}
		if d := nondeterminism(1, i, 1, 1); d.at != 0 {
			t.Fatalf("one-token output diverges at %d", d.at)
		}
		if d := nondeterminism(1, i, 1, 5); d.at < 3 || d.at > 4 {
			t.Fatalf("5-token output diverges at %d, want 3 or 4", d.at)
		}
	}
}

type virtualReq struct {
	r     *Request
	steps []int
}

// runVirtual drives e in virtual time until every request finished,
// recording each request's step sizes.
func runVirtual(t *testing.T, e *Engine, reqs []*Request) []virtualReq {
	t.Helper()
	now := time.Unix(1_000_000, 0)
	out := make([]virtualReq, len(reqs))
	for i, r := range reqs {
		r.Arrival = now
		e.Submit(r)
		out[i].r = r
	}
	for iter := 0; ; iter++ {
		d, commit := e.Iterate(now)
		if commit == nil {
			break
		}
		if iter > 1e6 {
			t.Fatal("runaway")
		}
		now = now.Add(d)
		commit(now)
		for i := range out {
			var st []int
			st, _, _, _, _ = out[i].r.Take(st)
			out[i].steps = append(out[i].steps, st...)
		}
	}
	return out
}

// Lossy: wrong tokens only at accepted draft positions of a speculative
// server, early for P 0.05 at 64 tokens, none on a baseline; the acceptance
// (verify steps, step sizes) is the same as without.
func TestLossyEngine(t *testing.T) {
	spec := mustModel(t, "qwen3.5-122b-a10b", eagle3(3)...)
	base := mustModel(t, "qwen3.5-122b-a10b")
	reqs := func(n int) []*Request {
		var rs []*Request
		for i := 0; i < n; i++ {
			rs = append(rs, NewGreedyRequest("r", 100, 64, true, 0, uint64(i)*7919, uint64(i)))
		}
		return rs
	}
	run := func(m *Model, p float64) []virtualReq {
		e := NewEngine(m, 1, nil)
		e.LossyP = p
		return runVirtual(t, e, reqs(64))
	}
	clean, lossy := run(spec, 0), run(spec, 0.05)
	var firsts []int
	for i := range clean {
		if !equalInts(clean[i].steps, lossy[i].steps) || clean[i].r.verify != lossy[i].r.verify {
			t.Fatalf("request %d: steps %v with lossy, %v without", i, lossy[i].steps, clean[i].steps)
		}
		if clean[i].r.FirstWrong() != -1 {
			t.Fatalf("wrong token without lossy")
		}
		fw := lossy[i].r.FirstWrong()
		if fw == 0 {
			t.Fatalf("request %d: the prefill token is wrong", i)
		}
		if fw < 0 {
			fw = 64
		}
		firsts = append(firsts, fw)
	}
	sort.Ints(firsts)
	t.Logf("first wrong tokens (64: none): %v", firsts)
	if med := firsts[len(firsts)/2]; med >= 40 {
		t.Errorf("median first wrong token %d, want early (< 40): %v", med, firsts)
	}
	if early := sort.SearchInts(firsts, 64); early < len(firsts)*3/4 {
		t.Errorf("only %d of %d outputs have a wrong token", early, len(firsts))
	}
	for i, v := range run(base, 1) {
		if v.r.FirstWrong() != -1 {
			t.Fatalf("baseline request %d: wrong token at %d", i, v.r.FirstWrong())
		}
	}
	// P 1: the first wrong token is the first accepted draft token, never a
	// step's bonus token (the last of its step).
	for i, v := range run(spec, 1) {
		pos, want := 1, -1 // after the prefill token
		for _, k := range v.steps[1:] {
			if k > 1 {
				want = pos
				break
			}
			pos += k
		}
		// (a last step cut to one token by max_tokens keeps an accepted draft)
		if got := v.r.FirstWrong(); got != want && !(want == -1 && got == 63) {
			t.Errorf("request %d: steps %v: first wrong %d, want %d", i, v.steps, got, want)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
