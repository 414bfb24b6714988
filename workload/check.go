package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The output check (docs/spec.md, "output_check"): speculative decoding is meant to be lossless, so
// with greedy sampling a point must answer fixed prompts as the baseline does. This file sends the
// prompts and compares the answers; the orchestrator decides what is compared with what.

// CheckConfig is one pass of the output check over a server.
type CheckConfig struct {
	URL, API, Model, APIKey string // Model "": the first id of /v1/models
	HTTPClient              *http.Client
	Prompts                 []string
	MaxTokens               int
	// Concurrency is how many prompts are in flight at once (1: one after the other).
	Concurrency int
	// Reverse sends the prompts last first (with Concurrency, another batch shape).
	Reverse bool
	// Timeout bounds the whole pass; 0: DefaultTimeoutBase + MaxTokens x DefaultTimeoutPerToken.
	Timeout time.Duration
}

// checkTopics and checkAsks make the check's prompts: fixed text, so every point of a sweep (and
// every sweep with the same seed) answers the same questions.
var (
	checkAsks = []string{
		"Explain in plain words how", "Write a short paragraph about how", "List the steps by which",
		"Describe for a new engineer how", "Summarise what happens when",
	}
	checkTopics = []string{
		"a hash table finds a key", "a compiler turns source code into machine code",
		"TCP recovers from a lost packet", "a GPU runs many threads at once", "rain forms in a cloud",
		"a bicycle stays upright", "a database keeps a transaction atomic", "vaccines train the immune system",
		"a sorting algorithm orders a list", "an electric motor turns", "bread rises in an oven",
		"a router picks a path for a packet", "the moon causes tides", "a spreadsheet recalculates a cell",
		"a battery stores energy", "a search engine ranks pages",
	}
)

// CheckPrompts returns n fixed prompts chosen by seed (the same n and seed give the same prompts).
func CheckPrompts(n int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, seed^0x6a09e667f3bcc909))
	out := make([]string, n)
	for i := range out {
		ask := checkAsks[rng.IntN(len(checkAsks))]
		topic := checkTopics[(i+rng.IntN(len(checkTopics)))%len(checkTopics)]
		out[i] = fmt.Sprintf("%s %s. (Question %d.)", ask, topic, i+1)
	}
	return out
}

// Answer sends every prompt once, non-streaming at temperature 0, and returns the answers' texts
// in prompt order.
func Answer(ctx context.Context, cfg CheckConfig) ([]string, error) {
	// The load's own checks of URL, API and limits; its prompts (InputTokens) are not used.
	lc := Config{URL: cfg.URL, API: cfg.API, APIKey: cfg.APIKey, Concurrency: 1, Requests: 1, InputTokens: 1,
		OutputTokens: max(cfg.MaxTokens, 1)}
	base, err := lc.normalize()
	if err != nil {
		return nil, fmt.Errorf("output check: %w", err)
	}
	r := &runner{cfg: lc, base: base, client: cfg.HTTPClient}
	if r.client == nil {
		r.client = NewHTTPClient(max(cfg.Concurrency, 1))
		defer r.client.CloseIdleConnections()
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeoutBase + time.Duration(max(cfg.MaxTokens, 1))*DefaultTimeoutPerToken
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	model := cfg.Model
	if model == "" {
		if model, err = r.firstModel(ctx); err != nil {
			return nil, fmt.Errorf("output check: %w", err)
		}
	}
	path := "/v1/chat/completions"
	if lc.API == APICompletions {
		path = "/v1/completions"
	}
	order := make([]int, len(cfg.Prompts))
	for i := range order {
		order[i] = i
		if cfg.Reverse {
			order[i] = len(order) - 1 - i
		}
	}
	out := make([]string, len(cfg.Prompts))
	errs := make([]error, len(cfg.Prompts))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, min(cfg.Concurrency, len(order))) {
		wg.Go(func() {
			for i := range next {
				out[i], errs[i] = r.answer(ctx, path, model, cfg.Prompts[i], cfg.MaxTokens)
			}
		})
	}
	for _, i := range order {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, e := range errs {
		if e != nil {
			return out, fmt.Errorf("output check: prompt %d: %w", i+1, e)
		}
	}
	return out, nil
}

// maxAnswerBytes bounds one answer's body: the check's answers are a few hundred tokens.
const maxAnswerBytes = 4 << 20

// answer sends one greedy request and returns its text.
func (r *runner) answer(ctx context.Context, path, model, prompt string, maxTokens int) (string, error) {
	body := map[string]any{"model": model, "max_tokens": maxTokens, "temperature": 0, "stream": false}
	if r.cfg.API == APIChat {
		body["messages"] = []map[string]string{{"role": "user", "content": prompt}}
	} else {
		body["prompt"] = prompt
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+path, bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if r.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+r.cfg.APIKey)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return "", err
	}
	if len(raw) > maxAnswerBytes {
		return "", fmt.Errorf("POST %s: the answer is larger than %d bytes (the limit)", path, maxAnswerBytes)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, errorText(raw))
	}
	var v struct {
		Choices []struct {
			Text    *string `json:"text"`
			Message *struct {
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("POST %s: %w", path, err)
	}
	if len(v.Choices) == 0 {
		return "", fmt.Errorf("POST %s: no choices in the answer", path)
	}
	switch c := v.Choices[0]; {
	case c.Text != nil:
		return *c.Text, nil
	case c.Message != nil && c.Message.Content != nil:
		return *c.Message.Content, nil
	}
	return "", fmt.Errorf("POST %s: the answer has no text", path)
}

// Comparison is how one set of answers agrees with the reference's.
type Comparison struct {
	// Agreement is the mean over prompts of the common prefix's length divided by the reference's
	// length, in words (whitespace-separated; the server's tokens are not known here): 1 is the
	// same text everywhere.
	Agreement float64 `json:"agreement"`
	// Diverged is set when some prompt's answer differs; Prompt (0-based) and Word are the first
	// divergence (the earliest in the text, over prompts), with both texts.
	Diverged  bool   `json:"diverged"`
	Prompt    int    `json:"prompt"`
	Word      int    `json:"word"`
	Reference string `json:"reference,omitempty"`
	Got       string `json:"got,omitempty"`
}

// ErrCheckShape: the two sets of answers are not answers to the same prompts.
var ErrCheckShape = errors.New("answers to different prompt sets")

// Compare compares got with the reference's answers ref, prompt by prompt.
func Compare(ref, got []string) (Comparison, error) {
	if len(ref) != len(got) || len(ref) == 0 {
		return Comparison{}, fmt.Errorf("%w: %d reference answers, %d answers", ErrCheckShape, len(ref), len(got))
	}
	c := Comparison{Word: -1}
	sum := 0.0
	for i := range ref {
		rw, gw := strings.Fields(ref[i]), strings.Fields(got[i])
		n := 0
		for n < len(rw) && n < len(gw) && rw[n] == gw[n] {
			n++
		}
		if len(rw) == 0 {
			if len(gw) == 0 {
				sum++
			}
		} else {
			sum += float64(n) / float64(len(rw))
		}
		if n < len(rw) || n < len(gw) {
			if !c.Diverged || n < c.Word {
				c.Diverged, c.Prompt, c.Word, c.Reference, c.Got = true, i, n, ref[i], got[i]
			}
		}
	}
	c.Agreement = sum / float64(len(ref))
	if !c.Diverged {
		c.Word = 0
	}
	return c, nil
}

// MinMargin is the least disagreement beyond the reference's own that the check tolerates: greedy
// decoding in BF16 is not bit-exact across batch shapes, so a lossless point may diverge late on a
// prompt or two even when the reference agreed with itself everywhere.
const MinMargin = 0.1

// MismatchThreshold is the agreement under which a point does not answer as the reference does:
// the reference's agreement with itself (self), less twice its own disagreement, and at least
// MinMargin less.
func MismatchThreshold(self float64) float64 {
	return max(0, self-max(MinMargin, 2*(1-self)))
}

// Mismatch applies MismatchThreshold.
func Mismatch(agreement, self float64) bool { return agreement < MismatchThreshold(self) }

// Words spells a comparison in one line, e.g. "prompt 3 differs from word 12 (agreement 0.41)".
func (c Comparison) Words() string {
	if !c.Diverged {
		return "the same answers (agreement " + strconv.FormatFloat(c.Agreement, 'f', 2, 64) + ")"
	}
	return fmt.Sprintf("prompt %d differs from word %d (agreement %.2f)", c.Prompt+1, c.Word+1, c.Agreement)
}
