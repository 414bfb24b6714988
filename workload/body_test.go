package workload

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// oldBody is the request body as the load generator built it before bodies were streamed: the
// whole prompt, then json.Marshal of it. The streamed body must be these bytes exactly (the
// simulator's output and any server's prefix cache see the same prompts).
func oldBody(api string, model []byte, outputTokens int, temperature float64, prompt string) []byte {
	js := func(s string) []byte { b, _ := json.Marshal(s); return b }
	b := []byte(`{"model":`)
	b = append(b, model...)
	if api == APIChat {
		b = append(b, `,"messages":[{"role":"user","content":`...)
		b = append(b, js(prompt)...)
		b = append(b, `}]`...)
	} else {
		b = append(b, `,"prompt":`...)
		b = append(b, js(prompt)...)
	}
	b = append(b, `,"max_tokens":`...)
	b = strconv.AppendInt(b, int64(outputTokens), 10)
	b = append(b, `,"temperature":`...)
	b = strconv.AppendFloat(b, temperature, 'g', -1, 64)
	b = append(b, `,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`...)
	return b
}

// readBody reads a streamed body through reads of n bytes and checks its announced size.
func readBody(t *testing.T, parts *bodyParts, ds Dataset, stream uint64, i, n int) []byte {
	t.Helper()
	b, size := newPromptBody(parts, ds, stream, i)
	var r io.Reader = b
	if n == 1 {
		r = iotest.OneByteReader(b)
	}
	buf := make([]byte, n)
	var out []byte
	for {
		k, err := r.Read(buf)
		out = append(out, buf[:k]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if int64(len(out)) != size {
		t.Fatalf("body of %d bytes announced as %d", len(out), size)
	}
	return out
}

// stringDataset serves fixed prompts (as a ShareGPT file does).
type stringDataset []string

func (d stringDataset) Prompt(_ uint64, i int) string { return d[i%len(d)] }
func (d stringDataset) String() string                { return "strings" }

func TestPromptBodyIsTheOldBody(t *testing.T) {
	model := jsonString("/models/Qwen3.5-122B-A10B")
	// sha256 of the bodies the code before streaming sent for seed 42, 1000 tokens, max_tokens 128,
	// temperature 0.7, for (stream, index) (1, 0), (1, 5), (0xdeadbeef, 77).
	golden := map[string][]string{
		APIChat: {"1873cae74a652eda0d10ef67523d9cead952e08f2fe0b57204d2450d5f31ebad",
			"46890062b524f0d0b1da5d0ad34a1e48e597ac61c382d1be92c3eee9b4b3f1c3",
			"76e08a17771fc43c5d93db9ee58dc71be346c69a324ff9fc1931d9b29344e1ea"},
		APICompletions: {"c3841917bfce9342ee2df71d028152b9f573153f89206e1da30029de0b60a111",
			"756040bebfb7a4ada6b5e517b51db82d53ae4fefd4255e9e57cf9edcd405796c",
			"f6b0b98e132b0d2ff5fccf333771973651bf70c6b9b89e7195a61cdba79ae9e8"},
	}
	keys := []struct {
		s uint64
		i int
	}{{1, 0}, {1, 5}, {0xdeadbeef, 77}}
	for _, api := range []string{APIChat, APICompletions} {
		parts := newBodyParts(api, model, 128, 0.7)
		d := &RandomDataset{Tokens: 1000, Seed: 42}
		for k, key := range keys {
			for _, n := range []int{1, 7, 4096, 1 << 20} {
				got := readBody(t, &parts, d, key.s, key.i, n)
				if sum := sha256.Sum256(got); hex.EncodeToString(sum[:]) != golden[api][k] {
					t.Errorf("%s %v reads of %d: body differs from the old code's", api, key, n)
				}
				if want := oldBody(api, model, 128, 0.7, d.Prompt(key.s, key.i)); !bytes.Equal(got, want) {
					t.Errorf("%s %v reads of %d: body differs from Prompt's", api, key, n)
				}
			}
		}
		// Prompts longer than a chunk, and prompts that need escaping (a ShareGPT file's).
		long := &RandomDataset{Tokens: 40000, Seed: 3}
		if got, want := readBody(t, &parts, long, 9, 2, 32<<10), oldBody(api, model, 128, 0.7, long.Prompt(9, 2)); !bytes.Equal(got, want) {
			t.Errorf("%s: a 40000-word body differs", api)
		}
		texts := stringDataset{"", "a", `say "hi" \ <b>&amp;</b>` + "\n\t\r\b\f\x00\x1f\x7f", "é 日本語 \u2028\u2029 🙂",
			"bad \xff\xfe utf-8 \xe6\x97", strings.Repeat("ü<", 5000) + strings.Repeat("\x80", 3000)}
		for i := range texts {
			for _, n := range []int{1, 3, 4096} {
				if got, want := readBody(t, &parts, texts, 0, i, n), oldBody(api, model, 128, 0.7, texts[i]); !bytes.Equal(got, want) {
					t.Errorf("%s: text %d, reads of %d:\n got %q\nwant %q", api, i, n, got, want)
				}
			}
		}
	}
}

// The random vocabulary is sent without escaping: each word must be its own JSON string contents.
func TestPromptWordsArePlain(t *testing.T) {
	for _, w := range promptWords {
		if b, _ := json.Marshal(w); string(b) != `"`+w+`"` || strings.ContainsAny(w, " \t\n") {
			t.Errorf("word %q needs escaping", w)
		}
	}
}

func TestAppendJSONTextIsJSON(t *testing.T) {
	var all []string
	for b := range 256 {
		all = append(all, string([]byte{byte(b)}), "x"+string([]byte{byte(b)})+"y")
	}
	for _, r := range []rune{0x80, 0x7ff, 0x800, 0xfffd, 0x2027, 0x2028, 0x2029, 0x202a, 0xffff, 0x10000, 0x10ffff} {
		all = append(all, string(r))
	}
	all = append(all, "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf", "\xe2\x80")
	for _, s := range all {
		checkJSONText(t, s)
	}
}

func checkJSONText(t *testing.T, s string) {
	t.Helper()
	want, _ := json.Marshal(s)
	for _, limit := range []int{1, 2, 5, 1 << 20} {
		got := []byte{'"'}
		for pos := 0; pos < len(s); {
			before := pos
			var piece []byte
			piece, pos = appendJSONText(nil, s, pos, limit)
			if pos == before {
				t.Fatalf("%q: no progress at %d", s, pos)
			}
			got = append(got, piece...)
		}
		got = append(got, '"')
		if !bytes.Equal(got, want) {
			t.Errorf("%q limit %d: got %s, json.Marshal %s", s, limit, got, want)
		}
	}
}

func TestCountWordsIsFields(t *testing.T) {
	for _, s := range []string{"", " ", "a", " a  b\tc\n", "\u00a0x\u0085y\u2003z", "\xff \xfe", "日本 語", "a\u200bb"} {
		if got, want := countWords(s), len(strings.Fields(s)); got != want {
			t.Errorf("countWords(%q) = %d, strings.Fields %d", s, got, want)
		}
	}
	d := &RandomDataset{Tokens: 777, Seed: 5}
	if got, want := promptWordCount(d, 3, 4), len(strings.Fields(d.Prompt(3, 4))); got != want {
		t.Errorf("random prompt: %d words counted, %d in the prompt", got, want)
	}
}

// countingDataset counts Prompt calls.
type countingDataset struct {
	stringDataset
	calls int
}

func (d *countingDataset) Prompt(s uint64, i int) string {
	d.calls++
	return d.stringDataset.Prompt(s, i)
}

// A dataset's Prompt is asked once per body (its size and its bytes come from the one string).
func TestPromptBodyAsksOnce(t *testing.T) {
	d := &countingDataset{stringDataset: stringDataset{strings.Repeat("a <b> ", 3000)}}
	parts := newBodyParts(APIChat, jsonString("m"), 8, 0)
	got := readBody(t, &parts, d, 0, 0, 1000)
	if want := oldBody(APIChat, jsonString("m"), 8, 0, d.stringDataset[0]); !bytes.Equal(got, want) || d.calls != 1 {
		t.Errorf("Prompt called %d times (want 1); body equal: %v", d.calls, bytes.Equal(got, want))
	}
}
