package workload

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// chunkedReader returns its input in the given piece sizes (then the rest), stamping nothing.
type chunkedReader struct {
	s     string
	sizes []int
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	n := len(c.s)
	if len(c.sizes) > 0 {
		n = min(n, c.sizes[0])
		c.sizes = c.sizes[1:]
	}
	n = copy(p, c.s[:n])
	c.s = c.s[n:]
	return n, nil
}

func readAll(t *testing.T, r io.Reader) ([]string, error) {
	t.Helper()
	s := NewSSEReader(r, nil, 0)
	var out []string
	for {
		d, _, err := s.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, string(d))
	}
}

func TestSSEReaderFraming(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string
	}{
		{"basic", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}},
		{"cr", "data: a\r\rdata: b\r\r", []string{"a", "b"}},
		{"no space", "data:a\n\n", []string{"a"}},
		{"two spaces keep one", "data:  a\n\n", []string{" a"}},
		{"multi-line", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"comments and fields", ": keepalive\nevent: x\nid: 3\nretry: 10\ndata: a\n\n:\n\n", []string{"a"}},
		{"blank lines only", "\n\n\n", nil},
		{"field without colon", "data\n\n", []string{""}},
		{"unterminated last event", "data: a\n\ndata: [DONE]", []string{"a", "[DONE]"}},
		{"unterminated with newline", "data: a\n", []string{"a"}},
		{"empty", "", nil},
		{"other field name", "datax: a\n\n", nil},
	}
	for _, c := range cases {
		for _, split := range [][]int{nil, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {3, 5, 2}} {
			got, err := readAll(t, &chunkedReader{s: c.in, sizes: split})
			if err != nil || strings.Join(got, "|") != strings.Join(c.want, "|") || len(got) != len(c.want) {
				t.Errorf("%s split %v: got %q, %v; want %q", c.name, split, got, err, c.want)
			}
		}
	}
}

func TestSSEReaderErrors(t *testing.T) {
	// A read error mid-event drops the partial event and reports the error.
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: par"), iotest.ErrReader(boom))
	got, err := readAll(t, r)
	if !errors.Is(err, boom) || len(got) != 1 {
		t.Errorf("got %q, %v", got, err)
	}
	// Too large an event.
	s := NewSSEReader(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), nil, 64)
	if _, _, err := s.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("large: %v", err)
	}
	s = NewSSEReader(strings.NewReader(strings.Repeat("data: xxxxxxxx\n", 20)+"\n"), nil, 64)
	if _, _, err := s.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("large multi-line: %v", err)
	}
	// A reader that never makes progress.
	s = NewSSEReader(zeroReader{}, nil, 0)
	if _, _, err := s.Next(); !errors.Is(err, io.ErrNoProgress) {
		t.Errorf("no progress: %v", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// Events are stamped with the read that completed them: events of one read share its time; an
// event split across reads takes the later one.
func TestSSEReaderTimestamps(t *testing.T) {
	clock := time.Unix(0, 0)
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	s := NewSSEReader(&chunkedReader{s: "data: a\n\ndata: b\n\ndata: c\n\n", sizes: []int{18, 5}}, now, 0)
	var stamps []int64
	for {
		_, at, err := s.Next()
		if err != nil {
			break
		}
		stamps = append(stamps, at.Unix())
	}
	if len(stamps) != 3 || stamps[0] != 1 || stamps[1] != 1 || stamps[2] != 3 {
		t.Errorf("stamps %v, want [1 1 3]", stamps)
	}
}

// The formats of SGLang (and sglangsim): role+content first chunk, multi-token chunks under
// speculation, finish chunk, usage chunk with empty choices, [DONE].
func TestParseChunk(t *testing.T) {
	cases := []struct {
		in   string
		want Chunk
	}{
		{`{"id":"abc","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":" the"},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`,
			Chunk{ID: []byte("abc"), Content: 4}},
		{`{"id":"abc","choices":[{"index":0,"delta":{"content":" of and to"},"finish_reason":null}],"usage":null}`,
			Chunk{ID: []byte("abc"), Content: 10}},
		{`{"id":"abc","choices":[{"index":0,"delta":{},"finish_reason":"length","matched_stop":null}],"usage":null}`,
			Chunk{ID: []byte("abc"), Finish: true}},
		{`{"id":"abc","object":"text_completion","choices":[],"usage":{"prompt_tokens":1024,"total_tokens":1536,"completion_tokens":512,"prompt_tokens_details":null}}`,
			Chunk{ID: []byte("abc"), Usage: true, PromptTokens: 1024, CompletionTokens: 512}},
		{`{"choices":[{"text":"x\"y","finish_reason":null}]}`, Chunk{Content: 4}},
		{`{"choices":[{"delta":{"reasoning_content":"hm","content":null}}]}`, Chunk{Content: 2}},
		{` [DONE] `, Chunk{Done: true}},
		{`{"error":{"message":"boom","type":"x","code":500}}`, Chunk{Error: true, ErrorMsg: []byte("boom")}},
		{`{"object":"error","message":"Requested token count exceeds","type":"BadRequestError","code":400}`,
			Chunk{Error: true, ErrorMsg: []byte("Requested token count exceeds")}},
		{`{"message":"not an error","choices":[]}`, Chunk{}},
		{`{"usage":{"prompt_tokens":1.0e0,"completion_tokens":7}}`, Chunk{Usage: true, PromptTokens: 1, CompletionTokens: 7}},
		{` { "id" : "a" , "x" : [ { "y" : [ 1 , -2.5e+3 , true , false , null , "s" ] } , { } , [ ] ] } `, Chunk{ID: []byte("a")}},
	}
	for _, c := range cases {
		var got Chunk
		if err := ParseChunk([]byte(c.in), &got); err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if got.Done != c.want.Done || string(got.ID) != string(c.want.ID) || got.Content != c.want.Content ||
			got.Finish != c.want.Finish || got.Usage != c.want.Usage || got.PromptTokens != c.want.PromptTokens ||
			got.CompletionTokens != c.want.CompletionTokens || got.Error != c.want.Error || string(got.ErrorMsg) != string(c.want.ErrorMsg) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.in, got, c.want)
		}
	}
	for _, bad := range []string{``, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":[1,]}`, `{"a":tru}`, `{"a":"\x"}`,
		`{"a":"\u12"}`, `{"a":01x}`, `{"a":-}`, `{"a":1.}`, `{"a":1e}`, `{} x`, `[1]`, `"s"`, `{"a":"` + "\x01" + `"}`,
		`{"choices":[{"delta":{"content":"x"}]}`, `{"a":{"b":1]}`, `DONE`, strings.Repeat("[", 600) + strings.Repeat("]", 600),
		`{"a":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`} {
		var c Chunk
		if err := ParseChunk([]byte(bad), &c); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// plainRun, which tests eight bytes at a time, stops where a byte-by-byte scan does: every byte
// value at every place in and after the first word, from every start, with other special bytes
// after it (a borrow in the word test may mark bytes above a true stop, never below).
func TestPlainRun(t *testing.T) {
	naive := func(b []byte, i int) int {
		for ; i < len(b); i++ {
			if c := b[i]; c == '"' || c == '\\' || c < 0x20 {
				return i
			}
		}
		return len(b)
	}
	for v := range 256 {
		for at := range 20 {
			for _, after := range []byte{'a', 0xff, 0x80, '"', 0x00, '\\'} {
				b := bytes.Repeat([]byte{'a'}, 24)
				b[at] = byte(v)
				for j := at + 1; j < len(b); j += 3 {
					b[j] = after
				}
				for start := range len(b) + 1 {
					for end := start; end <= len(b); end += 7 {
						if got, want := plainRun(b[:end], start), naive(b[:end], start); got != want {
							t.Fatalf("plainRun(%q, %d) = %d, want %d", b[:end], start, got, want)
						}
					}
				}
			}
		}
	}
}

func TestParseChunkNoAlloc(t *testing.T) {
	data := []byte(`{"id":"0000000000000001abcdef","object":"chat.completion.chunk","created":1764560000,"model":"/models/Qwen3.5-122B-A10B","choices":[{"index":0,"delta":{"content":" the of and"},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}`)
	var c Chunk
	if n := testing.AllocsPerRun(100, func() { _ = ParseChunk(data, &c) }); n != 0 {
		t.Errorf("%v allocations per chunk", n)
	}
}

func TestDistPercentiles(t *testing.T) {
	d := newDist()
	for i := 1; i <= 1000; i++ {
		d.record(time.Duration(i) * time.Millisecond)
	}
	s := d.summary()
	near := func(got, want float64) bool { return math.Abs(got-want) <= want*0.002 }
	if s.Count != 1000 || !near(s.Mean, 500.5) || !near(s.Median, 500) || !near(s.P90, 900) || !near(s.P99, 990) ||
		s.Max != 1000 || s.Min != 1 {
		t.Errorf("%+v", s)
	}
	// Merging shards gives the same as recording in one.
	a, b := newDist(), newDist()
	for i := 1; i <= 1000; i++ {
		if i%3 == 0 {
			a.record(time.Duration(i) * time.Millisecond)
		} else {
			b.record(time.Duration(i) * time.Millisecond)
		}
	}
	a.merge(b)
	if m := a.summary(); m != s {
		t.Errorf("merged %+v != %+v", m, s)
	}
	// One sample: every statistic is that sample (sub-millisecond resolution kept).
	one := newDist()
	one.record(1234567 * time.Nanosecond)
	if s := one.summary(); s.Median != 1.234567 || s.P99 != 1.234567 || s.Max != 1.234567 {
		t.Errorf("one sample %+v", s)
	}
	if s := newDist().summary(); s != (Dist{}) {
		t.Errorf("empty %+v", s)
	}
	// Zero and absurd values are clamped, not dropped.
	z := newDist()
	z.record(0)
	z.record(-time.Second)
	z.record(2 * time.Hour)
	if s := z.summary(); s.Count != 3 || s.Min != 0 {
		t.Errorf("clamped %+v", s)
	}
}

func TestRandomPromptsDeterministic(t *testing.T) {
	d, err := ParseDataset("random", 100, 42)
	if err != nil {
		t.Fatal(err)
	}
	d2, _ := ParseDataset("", 100, 42)
	other, _ := ParseDataset("random", 100, 43)
	p := d.Prompt(1, 5)
	if p != d2.Prompt(1, 5) {
		t.Error("same seed, stream and index gave different prompts")
	}
	if len(strings.Fields(p)) != 100 || strings.Count(p, " ") != 99 {
		t.Errorf("prompt of %d words: %q", len(strings.Fields(p)), p)
	}
	seen := map[string]bool{p: true}
	for _, q := range []string{d.Prompt(1, 6), d.Prompt(2, 5), other.Prompt(1, 5)} {
		if seen[q] {
			t.Error("distinct (seed, stream, index) repeated a prompt")
		}
		if q[:20] == p[:20] {
			t.Error("prompts share a prefix")
		}
		seen[q] = true
	}
	if _, err := ParseDataset("random", 0, 1); err == nil {
		t.Error("zero input tokens accepted")
	}
}

func TestShareGPT(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `[{"id":"1","conversations":[{"from":"human","value":"hello there"},{"from":"gpt","value":"hi"}]},
 {"id":"2","conversations":[{"from":"gpt","value":"first"},{"from":"user","value":"second"}]},
 {"id":"3","conversations":[{"from":"human","value":"  "}]},
 {"id":"4"}]`)
	d, err := LoadShareGPT(good, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(d.Prompts, "|")
	if got != "hello there|second" && got != "second|hello there" {
		t.Errorf("prompts %q", d.Prompts)
	}
	if d.Prompt(0, 0) == d.Prompt(0, 1) || d.Prompt(7, 2) != d.Prompt(7, 0) {
		t.Error("prompts do not cycle")
	}
	for name, c := range map[string]struct{ body, want string }{
		"empty":    {"", "not JSON"},
		"object":   {`{"conversations":[]}`, "want a JSON array"},
		"none":     {`[{"conversations":[{"from":"gpt","value":"x"}]}]`, "no conversation with a non-empty human turn among 1 entries"},
		"type":     {`[{"conversations":"nope"}]`, "entry 0"},
		"truncate": {`[{"conversations":[]},`, "entry 1"},
		"trailing": {`[] []`, "trailing data"},
	} {
		_, err := LoadShareGPT(write(name+".json", c.body), 1)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), name+".json") {
			t.Errorf("%s: %v, want %q and the path", name, err, c.want)
		}
	}
}

func TestParseCounters(t *testing.T) {
	text := `# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m",tp_rank="0"} 1000
sglang:generation_tokens_total{model_name="m",tp_rank="1"} 500 1700000000
sglang:spec_verify_calls_total{model_name="m",label="a}b"} 300
sglang:spec_verify_calls_total_other 9
sglang:spec_accept_length{model_name="m"} 3.2
`
	c := parseCounters([]byte(text))
	if !c.hasGen || !c.hasVerify || c.gen != 1500 || c.verify != 300 {
		t.Errorf("%+v", c)
	}
	spec := serverInfo{ok: true, spec: true, specKnown: true}
	before, after := counters{ok: true, gen: 100, verify: 50, hasGen: true, hasVerify: true},
		counters{ok: true, gen: 500, verify: 150, hasGen: true, hasVerify: true}
	if a, src := acceptLength(spec, before, after, nil, serverInfo{}, 0, 0); a == nil || *a != 4 || src != "metrics" {
		t.Errorf("counters: %v %s", a, src)
	}
	if a, _ := acceptLength(serverInfo{ok: true, specKnown: true}, before, after, nil, serverInfo{}, 0, 0); a != nil {
		t.Error("baseline got an accept length")
	}
	fallback := serverInfo{ok: true, hasAccept: true, accept: 2.5}
	if a, src := acceptLength(spec, counters{}, counters{}, nil, fallback, 0, 0); a == nil || *a != 2.5 || src != "server_info" {
		t.Errorf("fallback: %v %s", a, src)
	}
	if a, _ := acceptLength(serverInfo{}, before, before, nil, serverInfo{}, 0, 0); a != nil {
		t.Error("no verify calls and no server info: want nil")
	}
	// Without the verify counter, the window's Decode-batch lines come before the lifetime average.
	d := 3.25
	if a, src := acceptLength(spec, counters{ok: true, hasGen: true}, counters{ok: true, hasGen: true}, &d, fallback, 4, 2.5); a == nil || *a != 3.25 || src != AcceptDecodeLog {
		t.Errorf("decode log: %v %s", a, src)
	}
	// The counters count each request's first token, which came from prefill, not a verify step.
	if a, src := acceptLength(spec, before, after, nil, serverInfo{}, 20, 0); a == nil || *a != 3.8 || src != AcceptMetrics {
		t.Errorf("counters less the prefill tokens: %v %s", a, src)
	}
	// No counter, no Decode-batch accept length (older releases): tokens per streamed step.
	if a, src := acceptLength(spec, counters{}, counters{}, nil, fallback, 4, 2.75); a == nil || *a != 2.75 || src != AcceptStream {
		t.Errorf("stream: %v %s", a, src)
	}
	if a, _ := acceptLength(serverInfo{ok: true, specKnown: true}, counters{}, counters{}, nil, serverInfo{}, 4, 1); a != nil {
		t.Error("a baseline got an accept length from the stream")
	}
}

func TestDecodeAcceptLength(t *testing.T) {
	lines := []string{
		"[2025-03-01 10:00:00 TP0] Decode batch. #running-req: 4, #token: 900, token usage: 0.01, accept len: 1.00, gen throughput (token/s): 99.00, #queue-req: 0,",
		"[2025-03-01 10:00:01 TP0] Decode batch. #running-req: 2, #token: 900, token usage: 0.01, accept len: 3.00, gen throughput (token/s): 99.00, #queue-req: 0,",
		"Prefill batch, #new-seq: 1, #new-token: 32, #cached-token: 0, token usage: 0.00, #running-req: 1, #queue-req: 0,",
		"[2026-05-01 10:00:02] Decode batch, #running-req: 6, #token: 900, token usage: 0.01, accept len: 4.00, accept rate: 0.75, cuda graph: True, gen throughput (token/s): 99.00, #queue-req: 0, ",
		"Decode batch [812], #running-req: 1, #full token: 10, full token usage: 0.00, mamba num: 2, mamba usage: 0.00, accept len: 2.00, accept rate: 0.50, ",
		"Decode batch, #running-req: 3, #token: 5, token usage: 0.00, cuda graph: True, gen throughput (token/s): 9.00, #queue-req: 0, ", // no speculation
	}
	// The first line (its interval began before the window) is left out: (2*3 + 6*4 + 1*2) / 9.
	got := DecodeAcceptLength(lines)
	if want := (2*3.0 + 6*4 + 1*2) / 9; got == nil || math.Abs(*got-want) > 1e-9 {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got := DecodeAcceptLength(lines[:2]); got == nil || *got != 3 {
		t.Fatalf("two lines: %v, want the second's", got)
	}
	if got := DecodeAcceptLength(lines[:1]); got == nil || *got != 1 {
		t.Fatalf("one line: %v", got)
	}
	if DecodeAcceptLength(lines[2:3]) != nil || DecodeAcceptLength(nil) != nil {
		t.Fatal("no Decode-batch line: want nil")
	}
}

// A long event arriving in many small reads is read in linear time (the fuzzer found the
// quadratic rescan this guards against: 16 MB in 64-byte reads would scan terabytes and never end).
func TestSSEReaderLongLineLinear(t *testing.T) {
	line := "data: " + strings.Repeat("x", 16<<20) + "\n\n"
	sizes := make([]int, len(line)/64+1)
	for i := range sizes {
		sizes[i] = 64
	}
	s := NewSSEReader(&chunkedReader{s: line, sizes: sizes}, nil, 32<<20)
	d, _, err := s.Next()
	if err != nil || len(d) != 16<<20 {
		t.Fatalf("%d bytes, %v", len(d), err)
	}
}

// TestParseServerInfoEveryRelease: the lifetime accept length is read where each release puts it:
// the internal_states list (0.4.6.post4 on) or the top level of the body (0.4.3.post3 to
// 0.4.6.post3); a baseline, an absent algorithm and a body that is not JSON.
func TestParseServerInfoEveryRelease(t *testing.T) {
	for _, c := range []struct {
		name, body       string
		spec, specKnown  bool
		accept           float64
		hasAccept, valid bool
	}{
		{"list", `{"speculative_algorithm": "EAGLE3", "internal_states": [{"avg_spec_accept_length": 2.75}]}`, true, true, 2.75, true, true},
		{"top level", `{"speculative_algorithm": "EAGLE", "avg_spec_accept_length": 3.5, "last_gen_throughput": 12.5}`, true, true, 3.5, true, true},
		{"both: the list wins", `{"speculative_algorithm": "EAGLE", "avg_spec_accept_length": 1.5, "internal_states": [{"avg_spec_accept_length": 2.5}]}`, true, true, 2.5, true, true},
		{"baseline", `{"speculative_algorithm": null}`, false, true, 0, false, true},
		{"no algorithm field", `{"avg_spec_accept_length": 0}`, false, false, 0, false, true},
		{"not json", `<html>`, false, false, 0, false, false},
	} {
		si := parseServerInfo([]byte(c.body))
		if si.ok != c.valid || si.spec != c.spec || si.specKnown != c.specKnown || si.hasAccept != c.hasAccept || si.accept != c.accept {
			t.Errorf("%s: %+v", c.name, si)
		}
	}
}
