package workload_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/specsweep/specsweep/workload"
)

// Levels on prompt set files, against the real simulator: the files are written by the tests, of
// their own made-up prompts (the project ships no dataset's text). sglangsim counts one token per
// whitespace-separated word of every message, and with ignore_eos answers exactly max_tokens
// tokens, one word each: the token counts below are exact.

// madeUp is made-up prompt k: prose of some words, or a few lines of code.
func madeUp(k int) string {
	if k%3 == 2 {
		return fmt.Sprintf("func add%d(a, b int) int {\n\treturn a + b + %d\n}\n// Explain what add%d returns.", k, k, k)
	}
	return fmt.Sprintf("Write a short note about topic %d for a reader who %s.", k,
		strings.Repeat("likes quiet mornings and ", k%4+1)+"long walks")
}

func words(s string) int { return len(strings.Fields(s)) }

// writeSetFile writes n items of made-up prompts in format (turns: the mtbench items' turns, the
// openai items' user messages; maxTokens(k): item k's max_tokens, 0 for none) and returns its path.
func writeSetFile(t *testing.T, format string, n, turns int, maxTokens func(k int) int) string {
	t.Helper()
	var b bytes.Buffer
	enc := func(v any) {
		line, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	later := func(k, turn int) string { return fmt.Sprintf("Now say it again for turn %d of %d, shorter.", turn, k) }
	var entries []any
	for k := range n {
		item := map[string]any{"category": []string{"writing", "coding", "math"}[k%3]}
		if mt := maxTokens(k); mt > 0 {
			item["max_tokens"] = mt
		}
		switch format {
		case workload.FormatShareGPT:
			entries = append(entries, map[string]any{"id": fmt.Sprint(k), "conversations": []map[string]string{
				{"from": "system", "value": "Be brief."}, {"from": "human", "value": madeUp(k)},
				{"from": "gpt", "value": "A recorded answer that is not sent."}}})
		case workload.FormatOpenAI:
			msgs := []map[string]string{{"role": "system", "content": "Be brief."}, {"role": "user", "content": madeUp(k)}}
			for turn := 2; turn <= turns; turn++ {
				msgs = append(msgs, map[string]string{"role": "assistant", "content": "A recorded answer."},
					map[string]string{"role": "user", "content": later(k, turn)})
			}
			item["messages"] = msgs
			enc(item)
		case workload.FormatJSONL:
			field := []string{"prompt", "question", "text"}[k%3]
			item[field] = madeUp(k)
			enc(item)
		case workload.FormatMTBench:
			ts := []string{madeUp(k)}
			for turn := 2; turn <= turns; turn++ {
				ts = append(ts, later(k, turn))
			}
			item["question_id"], item["turns"] = 80+k, ts
			enc(item)
		}
	}
	if format == workload.FormatShareGPT {
		line, _ := json.MarshalIndent(entries, "", " ")
		b.Write(line)
	}
	path := filepath.Join(t.TempDir(), format+".jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func noMax(int) int { return 0 }

func readSet(t *testing.T, name, path, format string) *workload.PromptSet {
	t.Helper()
	set, err := workload.ReadPromptSet(t.Context(), name, path, "", workload.SetLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if set.Format != format {
		t.Fatalf("%s detected as %s, want %s", path, set.Format, format)
	}
	return set
}

func setLevel(t *testing.T, cfg workload.Config, set *workload.PromptSet, padTo int) (*workload.Result, []workload.RequestRecord) {
	t.Helper()
	d, err := workload.NewSetDataset(set, padTo, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	var saved syncBuffer
	cfg.Prompts, cfg.SaveRequests = d, &saved
	if cfg.StallTimeout == 0 {
		cfg.StallTimeout = 5 * time.Second
	}
	res, err := workload.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Dataset != "set:"+set.Name || res.InputTokens != padTo {
		t.Errorf("dataset %q input tokens %d, want set:%s and %d", res.Dataset, res.InputTokens, set.Name, padTo)
	}
	return res, readRecords(t, saved.String())
}

// Every format, read from a file and sent: each item's first turn as the user message (a
// conversation's later turns after their answers), every item as often as the others, the
// server's token counts in the totals and means.
func TestPromptSetLevelsEveryFormat(t *testing.T) {
	sim := startSim(t, simOpts{spec: true})
	const n, out = 6, 8
	for _, format := range []string{workload.FormatShareGPT, workload.FormatOpenAI, workload.FormatJSONL, workload.FormatMTBench} {
		t.Run(format, func(t *testing.T) {
			turns := 1
			if format == workload.FormatMTBench || format == workload.FormatOpenAI {
				turns = 2
			}
			set := readSet(t, format+"-set", writeSetFile(t, format, n, turns, noMax), format)
			// One request in flight: each conversation's turns follow each other, so 2n requests
			// send every item once (two turns) or twice (one).
			res, recs := setLevel(t, workload.Config{URL: sim.URL, Concurrency: 1, Requests: 2 * n, Warmup: 2,
				OutputTokens: out, Seed: 5}, set, 0)
			checkClean(t, res, 2*n)
			var first, in int64
			for k := range n {
				w := int64(words(madeUp(k)))
				first += w
				if turns == 2 {
					in += w + (w + out + int64(words(set.Items[k].Turns[1])))
				} else {
					in += 2 * w
				}
			}
			if turns == 1 {
				first *= 2
			}
			wantLater := 0
			if turns == 2 {
				wantLater = n
			}
			if res.TotalInputTokens != in || res.TotalOutputTokens != 2*n*out || res.LaterTurns != wantLater {
				t.Errorf("input %d output %d later turns %d, want %d %d %d", res.TotalInputTokens, res.TotalOutputTokens,
					res.LaterTurns, in, 2*n*out, wantLater)
			}
			firsts := float64(2*n - wantLater)
			if res.MeanInputTokens != float64(in)/(2*n) || res.MeanFirstInputTokens != float64(first)/firsts ||
				res.MeanOutputTokens != out {
				t.Errorf("means: input %g first %g output %g, want %g %g %d", res.MeanInputTokens, res.MeanFirstInputTokens,
					res.MeanOutputTokens, float64(in)/(2*n), float64(first)/firsts, out)
			}
			if res.AcceptLength == nil || res.AcceptLengthSource != workload.AcceptMetrics {
				t.Errorf("accept length %v from %q", res.AcceptLength, res.AcceptLengthSource)
			}
			for _, r := range recs {
				if (turns == 1 && r.Turn != 0) || (turns == 2 && (r.Turn < 1 || r.Turn > 2)) {
					t.Errorf("record %+v: turn %d", r, r.Turn)
				}
			}
		})
	}
}

// exchange is one chat request through the recording proxy: its body and the stream it got.
type exchange struct {
	mu   sync.Mutex
	req  []byte
	resp bytes.Buffer
}

func (e *exchange) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.resp.Write(p)
}

type exchangeKey struct{}

// recordingProxy forwards everything to the server at target, and records each completion
// request's body and the stream it got back.
func recordingProxy(t *testing.T, target string) (string, func() []*exchange) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var all []*exchange
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1 // pass each event on at once
	rp.ModifyResponse = func(resp *http.Response) error {
		if e, ok := resp.Request.Context().Value(exchangeKey{}).(*exchange); ok {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.TeeReader(resp.Body, e), resp.Body}
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/completions") {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			e := &exchange{req: b}
			mu.Lock()
			all = append(all, e)
			mu.Unlock()
			r = r.WithContext(context.WithValue(r.Context(), exchangeKey{}, e))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []*exchange {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(all)
	}
}

type chatRequest struct {
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	MaxTokens int `json:"max_tokens"`
}

// streamedAnswer is the text of a chat stream's delta.content, decoded.
func streamedAnswer(t *testing.T, stream []byte) string {
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct {
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		for _, c := range ev.Choices {
			if c.Delta.Content != nil {
				b.WriteString(*c.Delta.Content)
			}
		}
	}
	return b.String()
}

// A conversation's later turn carries the turns before it and the answers the server streamed to
// them, byte for byte, and its item's max_tokens; several conversations in flight at once keep
// their own histories. The server counts the history in the later turn's prompt.
func TestPromptSetConversationCarriesTheAnswer(t *testing.T) {
	sim := startSim(t, simOpts{spec: true})
	proxy, exchanges := recordingProxy(t, sim.URL)
	const n, pad, out = 5, 24, 6
	maxTokens := func(k int) int { return []int{0, 9, 0, 4, 0}[k] }
	set := readSet(t, "mt", writeSetFile(t, workload.FormatMTBench, n, 3, maxTokens), workload.FormatMTBench)
	res, recs := setLevel(t, workload.Config{URL: proxy, Concurrency: 3, Requests: 14, OutputTokens: out, Seed: 2}, set, pad)
	checkClean(t, res, 14)
	byPrefix := map[string]string{} // a request's messages (JSON) -> the answer it streamed
	var reqs []chatRequest
	for _, e := range exchanges() {
		var req chatRequest
		if err := json.Unmarshal(e.req, &req); err != nil {
			t.Fatalf("request body %s: %v", e.req, err)
		}
		key, _ := json.Marshal(req.Messages)
		byPrefix[string(key)] = streamedAnswer(t, e.resp.Bytes())
		reqs = append(reqs, req)
	}
	later := 0
	for _, req := range reqs {
		m := req.Messages
		if len(m)%2 != 1 || len(m) > 5 {
			t.Fatalf("%d messages", len(m))
		}
		k := slices.IndexFunc(set.Items, func(it workload.SetItem) bool { return strings.HasSuffix(m[0].Content, it.Turns[0]) })
		if k < 0 {
			t.Fatalf("first message %q is no item's first turn", m[0].Content)
		}
		it := set.Items[k]
		if words(m[0].Content) != max(pad, words(it.Turns[0])) {
			t.Errorf("first turn of %d words, want %d", words(m[0].Content), max(pad, words(it.Turns[0])))
		}
		wantMax := out
		if it.MaxTokens > 0 {
			wantMax = it.MaxTokens
		}
		if req.MaxTokens != wantMax {
			t.Errorf("item %d: max_tokens %d, want %d", k, req.MaxTokens, wantMax)
		}
		for j := 1; j < len(m); j += 2 {
			later++
			prefix, _ := json.Marshal(m[:j])
			answer, ok := byPrefix[string(prefix)]
			switch {
			case m[j].Role != "assistant" || m[j+1].Role != "user" || m[j+1].Content != it.Turns[(j+1)/2]:
				t.Errorf("messages %d-%d: %+v, want the answer, then turn %d of item %d", j, j+1, m[j:j+2], (j+1)/2+1, k)
			case !ok:
				t.Errorf("no earlier request sent the %d messages before an answer", j)
			case answer != m[j].Content || words(answer) != wantMax:
				t.Errorf("the answer carried %q, the one streamed %q (%d tokens)", m[j].Content, answer, wantMax)
			}
		}
	}
	if later < 4 || res.LaterTurns == 0 {
		t.Errorf("%d later messages, %d later turns: the level sent too few conversations", later, res.LaterTurns)
	}
	// Each record's prompt tokens are its messages' words, as the server counted them.
	turns := map[int]int{}
	for _, r := range recs {
		turns[r.Turn]++
	}
	if turns[0] != 0 || turns[2]+turns[3] != res.LaterTurns || turns[1]+res.LaterTurns != 14 {
		t.Errorf("records by turn %v, %d later turns", turns, res.LaterTurns)
	}
	var sent int64
	for _, req := range reqs {
		for _, m := range req.Messages {
			sent += int64(words(m.Content))
		}
	}
	if sent != res.TotalInputTokens {
		t.Errorf("the requests carried %d words, the server counted %d tokens", sent, res.TotalInputTokens)
	}
}

// Padding and max_tokens, over both APIs: a first turn shorter than the target is padded to it, a
// longer one is sent as it is; an item's max_tokens is its requests', the level's output tokens
// the others'; the totals are the server's.
func TestPromptSetPaddingAndMaxTokens(t *testing.T) {
	sim := startSim(t, simOpts{})
	const n, pad, out = 6, 20, 7
	maxTokens := func(k int) int { return []int{0, 3, 12, 0, 5, 0}[k] }
	set := readSet(t, "pad", writeSetFile(t, workload.FormatJSONL, n, 1, maxTokens), workload.FormatJSONL)
	var want [][2]int64 // (prompt, completion) of each item, twice
	var shorter, longer int
	for k := range n {
		w := words(madeUp(k))
		if w < pad {
			shorter++
		} else {
			longer++
		}
		mt := int64(out)
		if maxTokens(k) > 0 {
			mt = int64(maxTokens(k))
		}
		want = append(want, [2]int64{int64(max(w, pad)), mt}, [2]int64{int64(max(w, pad)), mt})
	}
	if shorter == 0 || longer == 0 {
		t.Fatalf("the made-up set has %d prompts shorter than %d words, %d longer: want both", shorter, pad, longer)
	}
	slices.SortFunc(want, func(a, b [2]int64) int { return int(a[0]-b[0])*1000 + int(a[1]-b[1]) })
	for _, api := range []string{workload.APIChat, workload.APICompletions} {
		res, recs := setLevel(t, workload.Config{URL: sim.URL, API: api, Concurrency: 2, Requests: 2 * n, OutputTokens: out,
			Seed: 9}, set, pad)
		if res.Completed != 2*n || res.Failed != 0 {
			t.Fatalf("%s: completed %d failed %d %+v", api, res.Completed, res.Failed, res.Errors)
		}
		var got [][2]int64
		var in, outTotal int64
		for _, r := range recs {
			got = append(got, [2]int64{r.PromptTokens, r.CompletionTokens})
		}
		for _, w := range want {
			in, outTotal = in+w[0], outTotal+w[1]
		}
		slices.SortFunc(got, func(a, b [2]int64) int { return int(a[0]-b[0])*1000 + int(a[1]-b[1]) })
		if !slices.Equal(got, want) {
			t.Errorf("%s: (prompt, completion) tokens %v, want %v", api, got, want)
		}
		if res.TotalInputTokens != in || res.TotalOutputTokens != outTotal || res.MeanFirstInputTokens != float64(in)/(2*n) ||
			res.MeanOutputTokens != float64(outTotal)/(2*n) || res.OutputTokens != out {
			t.Errorf("%s: totals %d %d, means %g %g", api, res.TotalInputTokens, res.TotalOutputTokens,
				res.MeanFirstInputTokens, res.MeanOutputTokens)
		}
	}
}

// The open loop: an arrival sends a conversation's next turn once its answer has ended, else
// begins a conversation; every request counts.
func TestPromptSetOpenLoopConversations(t *testing.T) {
	sim := startSim(t, simOpts{spec: true})
	const n, pad, out = 4, 30, 5
	set := readSet(t, "mt", writeSetFile(t, workload.FormatMTBench, n, 2, noMax), workload.FormatMTBench)
	res, recs := setLevel(t, workload.Config{URL: sim.URL, RequestRate: 100, Requests: 16, OutputTokens: out, Seed: 4}, set, pad)
	checkClean(t, res, 16)
	if res.LaterTurns == 0 || res.LaterTurns > 8 {
		t.Errorf("%d later turns of 16 requests", res.LaterTurns)
	}
	second := int64(words(set.Items[0].Turns[1])) // every item's is as long
	for _, r := range recs {
		// Every made-up first turn is shorter than the padding.
		want := map[int]int64{1: pad, 2: pad + out + second}[r.Turn]
		if r.PromptTokens != want {
			t.Errorf("turn %d: %d prompt tokens, want %d", r.Turn, r.PromptTokens, want)
		}
	}
}

// The completions API has no turns: a set of conversations is refused before anything is sent.
func TestPromptSetTurnsNeedChat(t *testing.T) {
	set := &workload.PromptSet{Name: "mt", Items: []workload.SetItem{{Turns: []string{"a", "b"}, Line: 1},
		{Turns: []string{"c"}, Line: 2}}}
	d, err := workload.NewSetDataset(set, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, err = workload.Run(t.Context(), workload.Config{URL: "http://127.0.0.1:1", Model: "m", API: "completions",
		Concurrency: 1, Requests: 1, OutputTokens: 4, Prompts: d})
	if err == nil || !strings.Contains(err.Error(), `prompt set "mt" has 1 conversations of several turns: they need the chat API`) {
		t.Errorf("err %v", err)
	}
}
