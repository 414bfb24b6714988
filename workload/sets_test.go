package workload

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// writeSet writes a prompt set file of the test's own made-up prompts (the project ships no
// dataset's text).
func writeSet(t testing.TB, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func item(line int, category string, maxTokens int, turns ...string) SetItem {
	return SetItem{Category: category, Turns: turns, MaxTokens: maxTokens, Line: line}
}

// Each format, detected and named: the items' turns, categories, max_tokens and lines.
func TestReadPromptSetFormats(t *testing.T) {
	for _, c := range []struct {
		name, format, body string
		want               []SetItem
		categories         []string
	}{
		{name: "sharegpt", format: FormatShareGPT, body: `
[
  {
    "id": "a1",
    "conversations": [
      {"from": "system", "value": "Answer briefly."},
      {"from": "human", "value": "Write a function that reverses a list"},
      {"from": "gpt", "value": "def rev(xs): return xs[::-1]"},
      {"from": "human", "value": "Now in Go"}
    ]
  },
  {"id": "a2", "score": 1e999, "conversations": [{"from": "gpt", "value": "Hello"}]},
  {"id": "a3", "conversations": [{"value": "Describe a quiet morning", "from": "user", "weight": [1, {"x": null}]}]},
  {"id": "a4", "conversations": null},
  {"id": "a5"}
]
`,
			want: []SetItem{item(3, "", 0, "Write a function that reverses a list"), item(13, "", 0, "Describe a quiet morning")}},
		{name: "openai", format: FormatOpenAI, body: `{"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Describe a quiet morning"}], "category": "writing"}
{"messages": [{"role": "user", "content": [{"type": "text", "text": "Write a function"}, {"type": "text", "text": "that reverses a list"}]}, {"role": "assistant", "content": "Here it is."}, {"role": "user", "content": "Add a test"}], "category": "coding", "max_tokens": 256}

{"messages": [{"role": "developer", "content": "x"}, {"role": "user", "content": "List three uses for a paper clip"}, {"role": "tool", "content": null}], "category": null, "max_tokens": null}
{"messages": [{"role": "user", "content": "Explain why the sky looks blue at noon"}], "category": "writing"}
`,
			want: []SetItem{
				item(1, "writing", 0, "Describe a quiet morning"),
				item(2, "coding", 256, "Write a function\nthat reverses a list", "Add a test"),
				item(4, "", 0, "List three uses for a paper clip"),
				item(5, "writing", 0, "Explain why the sky looks blue at noon"),
			},
			categories: []string{"writing", "coding"}},
		{name: "jsonl", format: FormatJSONL, body: "\ufeff{\"prompt\": \"Write a function that reverses a list\", \"category\": \"code\", \"max_tokens\": 64}\r\n" +
			"{\"text\": \"Describe a quiet morning\", \"prompt\": null}\r\n" +
			"  \t\r\n" +
			"{\"input\": \"Summarize a story about a lost key\", \"question\": \"ignored: input comes first\", \"answer\": 42}\n" +
			"{\"question\": \"How many legs do three spiders have?\", \"category\": \"math\"}",
			want: []SetItem{
				item(1, "code", 64, "Write a function that reverses a list"),
				item(2, "", 0, "Describe a quiet morning"),
				item(4, "", 0, "Summarize a story about a lost key"),
				item(5, "math", 0, "How many legs do three spiders have?"),
			},
			categories: []string{"code", "math"}},
		{name: "mtbench", format: FormatMTBench, body: `{"question_id": 1, "category": "writing", "turns": ["Describe a quiet morning", "Now as a poem"]}
{"question_id": 2, "category": "coding", "turns": ["Write a function that reverses a list"], "reference": ["def f(x): ..."]}
{"question_id": 3, "category": "writing", "turns": ["List three uses for a paper clip"], "max_tokens": 128}
`,
			want: []SetItem{
				item(1, "writing", 0, "Describe a quiet morning", "Now as a poem"),
				item(2, "coding", 0, "Write a function that reverses a list"),
				item(3, "writing", 128, "List three uses for a paper clip"),
			},
			categories: []string{"writing", "coding"}},
	} {
		path := writeSet(t, c.name+".data", c.body)
		for _, format := range []string{"", c.format} {
			set, err := ReadPromptSet(t.Context(), "mine", path, format, SetLimits{})
			if err != nil {
				t.Fatalf("%s (format %q): %v", c.name, format, err)
			}
			if set.Name != "mine" || set.Format != c.format {
				t.Errorf("%s (format %q): name %q, format %q; want mine, %s", c.name, format, set.Name, set.Format, c.format)
			}
			if !reflect.DeepEqual(set.Items, c.want) {
				t.Errorf("%s (format %q): items\n%+v\nwant\n%+v", c.name, format, set.Items, c.want)
			}
			if !reflect.DeepEqual(set.Categories, c.categories) {
				t.Errorf("%s (format %q): categories %q, want %q", c.name, format, set.Categories, c.categories)
			}
		}
	}
}

// Detection by the first object's keys: messages before turns before a prompt field.
func TestReadPromptSetDetection(t *testing.T) {
	for body, want := range map[string]string{
		`{"turns": ["Describe a quiet morning"], "prompt": "x"}`:                                        FormatMTBench,
		`{"prompt": "x", "messages": [{"role": "user", "content": "Describe a quiet morning"}]}`:        FormatOpenAI,
		`{"question": "Describe a quiet morning"}`:                                                      FormatJSONL,
		"\n\n  [{\"conversations\": [{\"from\": \"human\", \"value\": \"Describe a quiet morning\"}]}]": FormatShareGPT,
	} {
		set, err := ReadPromptSet(t.Context(), "s", writeSet(t, "d.json", body), "", SetLimits{})
		if err != nil || set.Format != want {
			t.Errorf("%s: %v, format %v; want %s", body, err, set, want)
		}
	}
}

// The hash is SHA-256 of the file's bytes, and changes with any one byte.
func TestPromptSetHash(t *testing.T) {
	body := `{"prompt": "Describe a quiet morning"}` + "\n"
	set, err := ReadPromptSet(t.Context(), "s", writeSet(t, "a.jsonl", body), "", SetLimits{})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(body))
	if set.Hash != hex.EncodeToString(sum[:]) {
		t.Errorf("hash %s, want %x", set.Hash, sum)
	}
	for _, other := range []string{
		`{"prompt": "Describe a quiet mornin"}` + "\n",  // a byte fewer
		`{"prompt": "Describe a quiet morninG"}` + "\n", // a byte changed
		`{"prompt": "Describe a quiet morning"}` + "\n\n",
	} {
		o, err := ReadPromptSet(t.Context(), "s", writeSet(t, "b.jsonl", other), "", SetLimits{})
		if err != nil || o.Hash == set.Hash {
			t.Errorf("%q: %v, hash %v same as %q's", other, err, o, body)
		}
	}
	big := writeSet(t, "big.json", `[{"conversations": [{"from": "human", "value": "`+strings.Repeat("calm ", 100000)+`"}]}]  `)
	b, _ := os.ReadFile(big)
	set, err = ReadPromptSet(t.Context(), "s", big, "", SetLimits{})
	if sum := sha256.Sum256(b); err != nil || set.Hash != hex.EncodeToString(sum[:]) {
		t.Errorf("sharegpt: %v, hash %v, want %x", err, set, sum)
	}
}

// Every malformed file is refused at its line, saying what is wrong.
func TestPromptSetMalformed(t *testing.T) {
	const ok = `{"prompt": "Describe a quiet morning"}` + "\n"
	const sgOK = `{"conversations": [{"from": "human", "value": "Describe a quiet morning"}]}`
	for _, c := range []struct {
		name, format, body string
		line               int // 0: the file as a whole
		want               string
	}{
		{"empty", "", "", 0, "no prompts: the file is empty"},
		{"blank", FormatJSONL, "\n  \n", 0, "no prompts: the file is blank"},
		{"empty sharegpt", FormatShareGPT, "", 1, "not JSON: the file is empty"},
		{"not a set", "", "\n\nhello", 3, `not a prompt set: the file starts with "h"`},
		{"bad JSON", "", ok + ok + `{"prompt": "Describe", }` + "\n" + ok, 3, "bad JSON at byte 24: invalid character '}'"},
		{"pretty JSON lines", FormatJSONL, "{\n  \"prompt\": \"x\"\n}\n", 1, "unexpected end of JSON input (JSON Lines hold one whole object per line)"},
		{"array line", FormatOpenAI, "[]\n", 1, "found an array (a ShareGPT file is format sharegpt)"},
		{"string line", FormatJSONL, ok + `"Describe a quiet morning"` + "\n", 2, "want one JSON object per line, found a string"},
		{"undetectable", "", `{"instruction": "Describe", "output": "x"}`, 1, `cannot tell the format from the first object's keys ("instruction", "output")`},
		{"no prompt", "", ok + `{"answer": "x"}`, 2, "no prompt: none of the fields prompt, text, input, question"},
		{"prompt number", "", ok + ok + ok + `{"prompt": 7}`, 4, "prompt: want a string, found a number"},
		{"prompt blank", "", `{"text": "  "}`, 1, "text is empty"},
		{"category", "", ok + `{"prompt": "x", "category": ["a"]}`, 2, "category: want a string, found an array"},
		{"max_tokens float", "", `{"prompt": "x", "max_tokens": 1.5}`, 1, "max_tokens: want a whole number from 1 to 1048576, found 1.5"},
		{"max_tokens zero", "", `{"prompt": "x", "max_tokens": 0}`, 1, "max_tokens: want a whole number"},
		{"max_tokens string", "", `{"prompt": "x", "max_tokens": "64"}`, 1, `found "64"`},
		{"no messages", FormatOpenAI, `{"prompt": "x"}`, 1, "no messages"},
		{"messages object", "", `{"messages": {"role": "user"}}`, 1, "messages: want an array, found an object"},
		{"message string", "", `{"messages": ["hi"]}`, 1, "messages: want an array of {role, content} objects, found a string in it"},
		{"unknown role", "", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}\n{\"messages\": [{\"role\": \"bot\", \"content\": \"x\"}]}", 2,
			`messages[0]: unknown role "bot" (want one of system, developer, user, assistant, tool, function)`},
		{"no role", "", `{"messages": [{"content": "x"}]}`, 1, "messages[0]: no role"},
		{"role number", "", `{"messages": [{"role": 1}]}`, 1, "messages[0].role: want a string, found a number"},
		{"no user", "", `{"messages": [{"role": "system", "content": "x"}, {"role": "assistant", "content": "y"}]}`, 1, "no user message among 2 messages"},
		{"user null", "", `{"messages": [{"role": "user", "content": null}]}`, 1, "messages[0].content: a user message without content"},
		{"user number", "", `{"messages": [{"role": "user", "content": 3}]}`, 1, "messages[0].content: want a string or an array of {type, text} parts, found a number"},
		{"image part", "", `{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}`, 1,
			`messages[0].content[0]: a part of type "image_url"; only text parts are read`},
		{"part text", "", `{"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}`, 1, "messages[0].content[0].text: want a string, found a number"},
		{"no parts", "", `{"messages": [{"role": "user", "content": []}]}`, 1, "messages[0].content is empty"},
		{"no turns", FormatMTBench, `{"question_id": 1}`, 1, "no turns"},
		{"turns string", "", `{"turns": "Describe a quiet morning"}`, 1, "turns: want an array of strings, found a string"},
		{"turn number", "", `{"turns": ["Describe a quiet morning"]}` + "\n" + `{"turns": ["Describe", 2]}`, 2, "turns[1]: want a string, found a number"},
		{"turns empty", "", `{"turns": []}`, 1, "turns is empty"},
		{"turn blank", "", `{"turns": ["a", ""]}`, 1, "turns[1] is empty"},
		// ShareGPT: one JSON array, pretty-printed or not.
		{"sharegpt object", FormatShareGPT, `{"conversations": []}`, 1, "want a JSON array of conversations, found an object"},
		{"sharegpt not JSON", FormatShareGPT, "\n nope", 2, "not JSON: invalid character 'o' in literal null (expecting 'u')"},
		{"sharegpt none", "", "[\n" + `{"conversations": [{"from": "gpt", "value": "x"}]}` + "\n]", 0,
			"no prompts: no conversation with a non-empty human turn among 1 entries"},
		{"sharegpt empty array", "", "[ ]", 0, "no prompts: no conversation with a non-empty human turn among 0 entries"},
		{"sharegpt entry", "", "[\n" + sgOK + ",\n 7\n]", 3, `entry 1: want an object {"conversations": [...]}, found a number`},
		{"sharegpt conversations", "", "[\n" + sgOK + ",\n" + `{"id": 2,` + "\n" + `"conversations": "x"}` + "\n]", 4,
			"entry 1: conversations: want an array, found a string"},
		{"sharegpt turn", "", "[{\"conversations\": [\n\"human\"]}]", 2, "entry 0: conversations[0]: want an object {from, value}, found a string"},
		{"sharegpt value", "", "[{\"conversations\": [\n{\"from\": \"human\",\n \"value\": 12}]}]", 3, "entry 0: conversations[0].value: want a string, found a number"},
		{"sharegpt from", "", "[{\"conversations\": [{\"from\": [\"human\"], \"value\": \"x\"}]}]", 1, "entry 0: conversations[0].from: want a string, found an array"},
		{"sharegpt syntax", "", "[\n" + sgOK + ",\n" + sgOK + "\n" + `{"conversations": []}` + "\n]", 4, "entry 2: invalid character '{' after array element"},
		{"sharegpt bad escape", "", "[\n" + sgOK + ",\n" + `{"id": "a\q"}` + "\n]", 3, `entry 1: id: invalid character 'q' in string escape code`},
		{"sharegpt truncated", "", "[\n" + sgOK + ",\n" + `{"conversations": [{"from": "human",` + "\n\n", 3, "entry 1: conversations[0]: unexpected end of file"},
		{"sharegpt truncated after", "", "[" + sgOK + ",", 1, "entry 1: unexpected end of file"},
		{"sharegpt trailing", "", "[" + sgOK + "]\n\n[]", 3, "trailing data after the JSON array"},
		{"sharegpt trailing junk", "", "[" + sgOK + "]\nx", 2, "trailing data after the JSON array"},
		{"sharegpt deep", "", "[{\"id\": " + strings.Repeat("[", maxNesting+1), 1, "entry 0: id: nested more than 10000 deep"},
		{"sharegpt as jsonl", FormatJSONL, "[" + sgOK + "]", 1, "found an array (a ShareGPT file is format sharegpt)"},
	} {
		path := writeSet(t, "set.data", c.body)
		set, err := ReadPromptSet(t.Context(), "s", path, c.format, SetLimits{})
		var se *SetError
		if !errors.As(err, &se) {
			t.Errorf("%s: %v, %+v; want a SetError", c.name, err, set)
			continue
		}
		where := fmt.Sprintf("%s:%d: ", path, c.line)
		if c.line == 0 {
			where = path + ": "
		}
		if se.Line != c.line || !strings.HasPrefix(err.Error(), where) || !strings.Contains(se.Msg, c.want) {
			t.Errorf("%s: %q (line %d)\nwant %q at line %d", c.name, err, se.Line, c.want, c.line)
		}
	}
}

// Every bound of SetLimits, met and passed.
func TestPromptSetLimits(t *testing.T) {
	lines := func(n int, line string) string { return strings.Repeat(line+"\n", n) }
	p := `{"prompt": "Describe a quiet morning"}` // 38 bytes
	sg := `{"conversations": [{"from": "human", "value": "Describe a quiet morning"}]}`
	for _, c := range []struct {
		name, body string
		limits     SetLimits
		line       int
		want       string // "": read
	}{
		{"items", lines(3, p), SetLimits{MaxItems: 3}, 0, ""},
		{"items over", lines(4, p), SetLimits{MaxItems: 3}, 4, "more than 3 prompts (the limit)"},
		{"sharegpt items over", "[\n" + sg + ",\n" + sg + "\n]", SetLimits{MaxItems: 1}, 3, "more than 1 prompts (the limit)"},
		{"line", lines(2, p) + "\r\n", SetLimits{MaxLineBytes: 38}, 0, ""},
		{"line over", p + "\n" + p + " \n", SetLimits{MaxLineBytes: 38}, 2, "a line of more than 38 bytes (the limit)"},
		{"line over, last", p + "\n" + p + " ", SetLimits{MaxLineBytes: 38}, 2, "a line of more than 38 bytes (the limit)"},
		{"line far over", p + "\n" + strings.Repeat(" ", 200000) + p, SetLimits{MaxLineBytes: 100}, 2, "a line of more than 100 bytes (the limit)"},
		{"sharegpt value", "[\n" + sg + "\n]", SetLimits{MaxLineBytes: 1000}, 0, ""},
		{"sharegpt value over", "[\n" + sg + ",\n" + `{"conversations": [{"from": "human", "value": "` + strings.Repeat("calm ", 20000) + `"}]}]`,
			SetLimits{MaxLineBytes: 1000}, 3, "entry 1: conversations[0].value: a JSON value of more than 1000 bytes (the limit)"},
		{"file", lines(2, p), SetLimits{MaxFileBytes: 78}, 0, ""},
		{"file over", lines(2, p) + " ", SetLimits{MaxFileBytes: 78}, 0, "79 bytes, larger than the limit of 78"},
		{"turns", `{"turns": ["a", "b"]}`, SetLimits{MaxTurns: 2}, 0, ""},
		{"user turns", `{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}`, SetLimits{MaxTurns: 2}, 0, ""},
		{"turns over", `{"turns": ["a", "b", "c"]}`, SetLimits{MaxTurns: 2}, 1, "3 turns, more than the limit of 2"},
		{"user turns over", `{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}, {"role": "user", "content": "c"}]}`,
			SetLimits{MaxTurns: 2}, 1, "more than 2 user turns (the limit)"},
		{"max_tokens", `{"prompt": "x", "max_tokens": 100}`, SetLimits{MaxTokens: 100}, 0, ""},
		{"max_tokens over", `{"prompt": "x", "max_tokens": 101}`, SetLimits{MaxTokens: 100}, 1, "max_tokens: want a whole number from 1 to 100, found 101"},
	} {
		path := writeSet(t, "set.data", c.body)
		_, err := ReadPromptSet(t.Context(), "s", path, "", c.limits)
		var se *SetError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (!errors.As(err, &se) || se.Line != c.line || !strings.Contains(se.Msg, c.want)):
			t.Errorf("%s: %v; want %q at line %d", c.name, err, c.want, c.line)
		}
	}

	// A file that grows past the limit while it is read (here: one that is not a regular file, so
	// its size is not known before) is refused too.
	src := &setSource{r: strings.NewReader(lines(3, p)), max: 80, h: sha256.New()}
	r := &setReader{ctx: t.Context(), path: "pipe", limits: SetLimits{}.withDefaults(), set: &PromptSet{}, seen: map[string]bool{}}
	if err := r.read(bufio.NewReader(src)); !errors.Is(err, errFileTooLarge) {
		t.Errorf("stream past the file limit: %v", err)
	}
	src = &setSource{r: strings.NewReader("[" + sg + "," + sg + "]"), max: 100, h: sha256.New()}
	r.set = &PromptSet{}
	if err := r.read(bufio.NewReader(src)); !errors.Is(err, errFileTooLarge) {
		t.Errorf("sharegpt stream past the file limit: %v", err)
	}
}

func TestReadPromptSetRefusals(t *testing.T) {
	if _, err := ReadPromptSet(t.Context(), "s", "x", "alpaca", SetLimits{}); err == nil ||
		err.Error() != `unknown prompt set format "alpaca" (want sharegpt, openai, jsonl, mtbench, or none to detect it)` {
		t.Errorf("unknown format: %v", err)
	}
	if _, err := ReadPromptSet(t.Context(), "s", filepath.Join(t.TempDir(), "nope"), "", SetLimits{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	path := writeSet(t, "a.jsonl", strings.Repeat(`{"prompt": "Describe a quiet morning"}`+"\n", 3000))
	if _, err := ReadPromptSet(ctx, "s", path, "", SetLimits{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// Reading is streamed: a large OpenAI chat file whose assistant answers are most of its bytes is read
// allocating a small part of its size in all (so its peak heap is smaller still), and keeping only
// the user turns.
func TestPromptSetStreamingMemory(t *testing.T) {
	size := 50 << 20
	if testing.Short() {
		size = 8 << 20
	}
	path := filepath.Join(t.TempDir(), "chat.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	answer := strings.Repeat("A quiet morning has birdsong, cold air and slow light. ", 1200) // 66 KB
	n := 0
	for written := 0; written < size; n++ {
		k, _ := fmt.Fprintf(w, `{"category": "c%d", "messages": [{"role": "user", "content": "Describe a quiet morning, take %d"}, `+
			`{"role": "assistant", "content": "%s"}]}`+"\n", n%4, n, answer)
		written += k
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	var set *PromptSet
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	set, err = ReadPromptSet(t.Context(), "chat", path, "", SetLimits{})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Items) != n || set.Items[n-1].Turns[0] != fmt.Sprintf("Describe a quiet morning, take %d", n-1) || len(set.Categories) != 4 {
		t.Fatalf("%d items (want %d), last %+v, categories %q", len(set.Items), n, set.Items[n-1], set.Categories)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	if allocated > uint64(size/8) {
		t.Errorf("reading a %d-byte file allocated %d bytes: more than an eighth of it, so it is not streamed", size, allocated)
	}
	t.Logf("%d-byte file, %d items: %d bytes allocated in all while reading", size, n, allocated)
	runtime.KeepAlive(set)
}
