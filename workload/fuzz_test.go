package workload

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// FuzzSSE feeds arbitrary bytes through the SSE reader (whole and one byte at a time) and every
// event through ParseChunk: no panic, the same events either way, ParseChunk agrees with
// encoding/json on what is a valid object, and the answer's text it keeps is JSON string contents.
func FuzzSSE(f *testing.F) {
	f.Add([]byte("data: {\"id\":\"a\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\" the\"},\"finish_reason\":null}],\"usage\":null}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\r\n\r\n: ping\r\r"))
	f.Add([]byte("data: {\"error\":{\"message\":\"x\"}}\ndata: more\n\ndata"))
	f.Fuzz(func(t *testing.T, in []byte) {
		whole := events(t, bytes.NewReader(in))
		bytewise := events(t, &oneByteReader{b: in})
		if len(whole) != len(bytewise) {
			t.Fatalf("%d events whole, %d byte by byte", len(whole), len(bytewise))
		}
		for i := range whole {
			if !bytes.Equal(whole[i], bytewise[i]) {
				t.Fatalf("event %d: %q vs %q", i, whole[i], bytewise[i])
			}
		}
		for _, d := range append(whole, in) {
			var c Chunk
			err := ParseChunk(d, &c)
			t := bytes.TrimSpace(d)
			valid := json.Valid(d) && len(t) > 0 && t[0] == '{'
			if err == nil && !c.Done && !valid {
				panic("ParseChunk accepted invalid JSON: " + string(d))
			}
			if err != nil && valid && len(d) < 400 {
				panic("ParseChunk rejected valid JSON " + string(d) + ": " + err.Error())
			}
			if c.Content < 0 || c.Content > len(d) {
				panic("content length out of range")
			}
			// The answer's text kept for a later turn is sent again inside a JSON string as it is:
			// it must be valid string contents.
			var text []byte
			var c2 Chunk
			if err2 := parseChunk(d, &c2, &text); (err2 == nil) != (err == nil) || c2.Content != c.Content {
				panic("keeping the text changed the parse: " + string(d))
			}
			if err == nil && (len(text) > c.Content || !json.Valid(append(append([]byte{'"'}, text...), '"'))) {
				panic("kept text is not JSON string contents: " + string(text))
			}
		}
	})
}

func events(t *testing.T, r io.Reader) [][]byte {
	s := NewSSEReader(r, nil, 1<<16)
	var out [][]byte
	for {
		d, _, err := s.Next()
		if err != nil {
			return out
		}
		out = append(out, append([]byte(nil), d...))
	}
}

type oneByteReader struct{ b []byte }

func (o *oneByteReader) Read(p []byte) (int, error) {
	if len(o.b) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = o.b[0]
	o.b = o.b[1:]
	return 1, nil
}

// FuzzJSONText: the streamed prompt's escaping is encoding/json's, whatever the text and wherever a
// piece ends.
func FuzzJSONText(f *testing.F) {
	f.Add("say \"hi\" <b>\n\xff\u2028")
	f.Fuzz(func(t *testing.T, s string) { checkJSONText(t, s) })
}

// FuzzReadPromptSet reads arbitrary bytes as a prompt set file in every format and detected: no
// panic; an error is a *SetError at a line of the file (or about the file as a whole); a set read
// has items of non-blank turns at the file's lines, within the limits, the file's hash and its
// categories; and a set detected reads the same when its format is named.
func FuzzReadPromptSet(f *testing.F) {
	for _, s := range []string{
		`[{"conversations": [{"from": "human", "value": "Describe a quiet morning"}, {"from": "gpt", "value": "Birds."}]}, {"id": 2}]`,
		"[\n {\"conversations\": [\n  {\"from\": \"user\", \"value\": \"Write a function that reverses a list\", \"x\": [1, {}]}\n ]}\n]\n",
		`{"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": [{"type": "text", "text": "Describe a quiet morning"}]}, {"role": "assistant", "content": "x"}, {"role": "user", "content": "Again"}], "category": "writing", "max_tokens": 64}` + "\n",
		"\ufeff{\"prompt\": \"Write a function that reverses a list\", \"category\": \"code\"}\r\n\r\n{\"question\": \"How many legs do three spiders have?\"}",
		`{"question_id": 1, "category": "writing", "turns": ["Describe a quiet morning", "Now as a poem"]}` + "\n" + `{"question_id": 2, "category": "math", "turns": ["Add 2 and 2"]}`,
		"[{\"conversations\": [{\"from\": \"human\", \"value\": \"a\\q\"}]}]",
		"{\"turns\": [\"a\", 2]}\n",
	} {
		f.Add([]byte(s))
	}
	limits := SetLimits{MaxItems: 20, MaxLineBytes: 1 << 10, MaxFileBytes: 1 << 14, MaxTurns: 3, MaxTokens: 1000}
	f.Fuzz(func(t *testing.T, in []byte) {
		path := filepath.Join(t.TempDir(), "set")
		if err := os.WriteFile(path, in, 0o644); err != nil {
			t.Fatal(err)
		}
		lines := bytes.Count(in, []byte{'\n'}) + 1
		sum := sha256.Sum256(in)
		for _, format := range append([]string{""}, setFormats...) {
			set, err := ReadPromptSet(t.Context(), "f", path, format, limits)
			if err != nil {
				var se *SetError
				switch {
				case !errors.As(err, &se):
					t.Fatalf("format %q: %v is not a SetError", format, err)
				case se.Path != path || se.Line < 0 || se.Line > lines:
					t.Fatalf("format %q: %v: line %d of a %d-line file", format, err, se.Line, lines)
				case se.Line == 0 && !strings.HasPrefix(se.Msg, "no prompts") && !strings.Contains(se.Msg, "larger than"):
					t.Fatalf("format %q: %v: no line", format, err)
				}
				continue
			}
			if (format != "" && set.Format != format) || !slices.Contains(setFormats, set.Format) {
				t.Fatalf("format %q read as %q", format, set.Format)
			}
			if set.Hash != hex.EncodeToString(sum[:]) {
				t.Fatalf("format %q: hash %s", format, set.Hash)
			}
			if len(set.Items) == 0 || len(set.Items) > limits.MaxItems {
				t.Fatalf("format %q: %d items", format, len(set.Items))
			}
			var cats []string
			last := 1
			for _, it := range set.Items {
				if len(it.Turns) == 0 || len(it.Turns) > limits.MaxTurns || it.Line < last || it.Line > lines ||
					it.MaxTokens < 0 || it.MaxTokens > limits.MaxTokens {
					t.Fatalf("format %q: item %+v (%d lines)", format, it, lines)
				}
				for _, turn := range it.Turns {
					if strings.TrimSpace(turn) == "" {
						t.Fatalf("format %q: blank turn in %+v", format, it)
					}
				}
				if it.Category != "" && !slices.Contains(cats, it.Category) {
					cats = append(cats, it.Category)
				}
				last = it.Line
			}
			if !slices.Equal(cats, set.Categories) {
				t.Fatalf("format %q: categories %q, items have %q", format, set.Categories, cats)
			}
			if format == "" {
				named, err := ReadPromptSet(t.Context(), "f", path, set.Format, limits)
				if err != nil || !reflect.DeepEqual(named.Items, set.Items) {
					t.Fatalf("detected %s, but named it reads %v, %+v", set.Format, err, named)
				}
			}
		}
	})
}

// FuzzConversationBody builds the body of a conversation's later turn from any turns and answer,
// padded or not: it is JSON of the announced size, its messages are the turns (the first padded to
// the target in words) and the answer as encoding/json reads them, and its max_tokens the item's.
func FuzzConversationBody(f *testing.F) {
	f.Add("Describe a quiet morning", "Now shorter", " Birds \"sing\".\n", 12, 0)
	f.Add("def f(x):\n\treturn x <b>&\xff", "\u2028", "", 0, 5)
	f.Fuzz(func(t *testing.T, first, second, answer string, pad, maxTokens int) {
		if strings.TrimSpace(first) == "" || strings.TrimSpace(second) == "" {
			return // the reader keeps no blank turn
		}
		pad, maxTokens = pad&0xfff, maxTokens&0xfff
		set := &PromptSet{Name: "f", Items: []SetItem{{Turns: []string{first, second}, MaxTokens: maxTokens, Line: 1}}}
		d, err := NewSetDataset(set, pad, 1)
		if err != nil {
			t.Fatal(err)
		}
		r := &runner{cfg: Config{Prompts: d, OutputTokens: 7}, set: d, parts: newBodyParts(APIChat, jsonString("m"), 7, 0)}
		var c conversation
		var convs atomic.Int64
		r.begin(&c, 3, 0, &convs)
		raw := jsonString(answer)
		if !c.advance(&outcome{ok: true}, raw[1:len(raw)-1]) {
			t.Fatal("no second turn")
		}
		b, size := r.body(&c)
		var got bytes.Buffer
		if _, err := got.ReadFrom(b); err != nil || int64(got.Len()) != size {
			t.Fatalf("body of %d bytes announced as %d (%v)", got.Len(), size, err)
		}
		var req struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
			MaxTokens int `json:"max_tokens"`
		}
		if err := json.Unmarshal(got.Bytes(), &req); err != nil {
			t.Fatalf("%v: %s", err, got.Bytes())
		}
		want := []string{"user", d.Prompt(3, 0), "assistant", answer, "user", second}
		var have []string
		for _, m := range req.Messages {
			have = append(have, m.Role, m.Content)
		}
		// As encoding/json gives the strings back (invalid UTF-8 as U+FFFD, byte by byte).
		for i, s := range want {
			if err := json.Unmarshal(jsonString(s), &want[i]); err != nil {
				t.Fatal(err)
			}
		}
		wantMax := 7
		if maxTokens > 0 {
			wantMax = maxTokens
		}
		if !slices.Equal(have, want) || req.MaxTokens != wantMax {
			t.Fatalf("messages %q max_tokens %d, want %q %d", have, req.MaxTokens, want, wantMax)
		}
		if w := len(strings.Fields(d.Prompt(3, 0))); w != max(pad, len(strings.Fields(first))) {
			t.Fatalf("first turn of %d words, padding %d", w, pad)
		}
	})
}
