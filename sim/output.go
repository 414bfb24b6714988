package sim

import (
	"encoding/json"
	"hash"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
)

// The output text. A token is a word of vocab. A request's words come from
// its Salt:
//
//   - greedy (temperature below GreedyTemperature): Salt is the greedy key,
//     a hash of the model (--model-path, profile name) and of the prompt's
//     content only, so the text (and, without ignore_eos, its length) is the
//     same whatever the speculation, tp, seed, rid, order, batch or server
//     run: speculative decoding is lossless;
//   - sampled: Salt is the request's seed, as before (appendWords).
//
// A text can diverge from a position on (BF16 batching nondeterminism,
// SGLANGSIM_NONDETERMINISM, or a wrong accepted draft token,
// SGLANGSIM_FAIL=lossy:P): from there every word differs from the one the
// undiverged text has, taken from another hash.

// GreedyTemperature is SGLang's sampling epsilon: a request with a lower
// temperature samples greedily (the target's argmax).
const GreedyTemperature = 1e-5

const golden = 0x9E3779B97F4A7C15

// mix64 is splitmix64's finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	return x ^ x>>31
}

// divergence is where a text stops being the undiverged one: from position
// at (0-based output token) on, words come from key. at < 0: never.
type divergence struct {
	at  int
	key uint64
}

var noDivergence = divergence{at: -1}

// earlier is the divergence of the two that starts first.
func (d divergence) earlier(o divergence) divergence {
	if d.at < 0 || (o.at >= 0 && o.at < d.at) {
		return o
	}
	return d
}

// word is the vocab index of output token i of a request with salt salt.
func word(salt uint64, greedy bool, i int, d divergence) uint64 {
	nv := uint64(len(vocab))
	var w uint64
	if greedy {
		w = mix64(salt+uint64(i)*golden) % nv
	} else {
		w = (salt + uint64(i)*0x9E3779B1) >> 7 % nv // appendWords
	}
	if d.at >= 0 && i >= d.at {
		w = (w + 1 + mix64(d.key^uint64(i)*golden)%(nv-1)) % nv
	}
	return w
}

// appendText appends output tokens start..start+n-1 of r (" word" each),
// diverged by d.
func (r *Request) appendText(b []byte, start, n int, d divergence) []byte {
	if !r.greedy && d.at < 0 {
		return appendWords(b, start, n, r.Salt)
	}
	for i := start; i < start+n; i++ {
		b = append(b, ' ')
		b = append(b, vocab[word(r.Salt, r.greedy, i, d)]...)
	}
	return b
}

// Divergence is where r's text diverges: the earlier of the nondeterminism
// drawn at arrival and the first wrong accepted draft token (lossy).
func (r *Request) divergence() divergence {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nondet.earlier(r.wrong)
}

// markWrong records that output token pos came from a wrong accepted draft
// token (SGLANGSIM_FAIL=lossy); the first one counts. The scheduler calls it
// before pushing the step holding pos.
func (r *Request) markWrong(pos int, key uint64) {
	r.mu.Lock()
	if r.wrong.at < 0 {
		r.wrong = divergence{at: pos, key: key}
	}
	r.mu.Unlock()
}

// FirstWrong is the output position of the first wrong accepted draft token
// (SGLANGSIM_FAIL=lossy), or -1.
func (r *Request) FirstWrong() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wrong.at
}

// Text is the output text of r's first n tokens as the server renders it
// (each token " word").
func (r *Request) Text(n int) string { return string(r.appendText(nil, 0, n, r.divergence())) }

// lossy draws, for the draft tokens a verify step accepted at output
// positions from..from+drafts-1, whether each is wrong (probability p, from
// the request's own lossy RNG, separate from the acceptance draws); the first
// wrong one diverges the rest of the text. Once wrong, nothing more is drawn.
func (r *Request) lossy(p float64, from, drafts int) {
	if r.wrongSeen {
		return
	}
	if r.lossRNG == nil {
		r.lossRNG = rand.New(rand.NewPCG(r.seed, 0x6c6f737379))
	}
	for j := 0; j < drafts; j++ {
		if r.lossRNG.Float64() < p {
			r.wrongSeen = true
			r.markWrong(from+j, r.lossRNG.Uint64())
			return
		}
	}
}

// nondeterminism draws whether greedy request number n diverges (probability
// p) and where: uniformly in the last quarter of its target tokens. The draw
// comes from an RNG of the server's seed and n alone, so a run is
// reproducible and two requests of the same prompt may differ.
func nondeterminism(seed uint64, n uint64, p float64, target int) divergence {
	if p <= 0 || target < 1 {
		return noDivergence
	}
	rng := rand.New(rand.NewPCG(seed, n))
	if rng.Float64() >= p {
		return noDivergence
	}
	q := max(1, (target+3)/4)
	return divergence{at: target - q + rng.IntN(q), key: rng.Uint64()}
}

// greedyHasher starts the greedy key of a request: the model (--model-path
// and the profile's name) and the prompt's kind ("text" for /v1/completions'
// prompt and /generate's text or input_ids, which give the same key for the
// same content; "chat" for messages).
func greedyHasher(modelPath, profile, kind string) hash.Hash64 {
	h := fnv.New64a()
	for _, s := range []string{"sglangsim/greedy", modelPath, profile, kind} {
		io.WriteString(h, s)
		h.Write([]byte{0})
	}
	return h
}

// hashContent adds a decoded JSON prompt or message content to h in a
// canonical form: a string; a list of one prompt (a string or a list of
// ids) or one text part is that prompt; a list of numbers is token ids;
// anything else its canonical JSON (encoding/json sorts object keys).
func hashContent(h io.Writer, v any) {
	switch x := v.(type) {
	case nil:
		io.WriteString(h, "n\x00")
	case string:
		io.WriteString(h, "t\x00")
		io.WriteString(h, x)
	case []any:
		if len(x) == 1 {
			switch y := x[0].(type) {
			case string, []any:
				hashContent(h, y)
				return
			case map[string]any:
				if t, ok := y["text"].(string); ok && y["type"] == "text" && len(y) == 2 {
					hashContent(h, t)
					return
				}
			}
		}
		ids := make([]byte, 0, 8*len(x))
		for _, e := range x {
			f, ok := e.(float64)
			if !ok {
				hashJSON(h, x)
				return
			}
			ids = strconv.AppendFloat(ids, f, 'f', -1, 64)
			ids = append(ids, ',')
		}
		io.WriteString(h, "i\x00")
		h.Write(ids)
	default:
		hashJSON(h, x)
	}
}

func hashJSON(h io.Writer, v any) {
	b, _ := json.Marshal(v)
	io.WriteString(h, "j\x00")
	h.Write(b)
}

// hashIDs adds /generate's input_ids to h, as hashContent adds a list of ids.
func hashIDs(h io.Writer, ids []int) {
	b := make([]byte, 0, 2+8*len(ids))
	b = append(b, "i\x00"...)
	for _, id := range ids {
		b = strconv.AppendInt(b, int64(id), 10)
		b = append(b, ',')
	}
	h.Write(b)
}

// validProb reports whether p is a probability in [0, 1].
func validProb(p float64) bool { return !math.IsNaN(p) && p >= 0 && p <= 1 }
