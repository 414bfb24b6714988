package workload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"unicode"
)

// madeUpSet is a set of the test's own prompts (the project ships no dataset's text): items of
// words, words per item, with a code-like one and one that needs escaping.
func madeUpSet(name string, words ...int) *PromptSet {
	set := &PromptSet{Name: name, Format: FormatJSONL}
	for k, n := range words {
		var b strings.Builder
		fmt.Fprintf(&b, "item%d", k)
		for w := 1; w < n; w++ {
			fmt.Fprintf(&b, " w%d", w)
		}
		set.Items = append(set.Items, SetItem{Turns: []string{b.String()}, Line: k + 1})
	}
	return set
}

func TestNewSetDatasetRefuses(t *testing.T) {
	for _, c := range []struct {
		set  *PromptSet
		pad  int
		want string
	}{
		{nil, 0, "no items"},
		{&PromptSet{Name: "e"}, 0, "no items"},
		{madeUpSet("n", 3), -1, "must not be negative"},
		{&PromptSet{Name: "t", Items: []SetItem{{Line: 4}}}, 0, "line 4) has no turn"},
	} {
		if _, err := NewSetDataset(c.set, c.pad, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v pad %d: %v, want %q", c.set, c.pad, err, c.want)
		}
	}
}

// The order is the seed's, the same for the same (stream, i); each stream cycles through every
// item, from its own place.
func TestSetDatasetOrder(t *testing.T) {
	const n = 10
	set := madeUpSet("order", slices.Repeat([]int{3}, n)...)
	d, _ := NewSetDataset(set, 0, 1)
	same, _ := NewSetDataset(set, 0, 1)
	other, _ := NewSetDataset(set, 0, 2)
	if d.String() != "set:order" || d.Set() != set || d.PadTo() != 0 || d.Conversations() != 0 {
		t.Errorf("%s %d %d", d, d.PadTo(), d.Conversations())
	}
	differs, starts := false, map[string]bool{}
	for _, stream := range []uint64{0, 1, 7, 0xdeadbeef, 1 << 63} {
		var seen []string
		for i := range 2 * n {
			p := d.Prompt(stream, i)
			if p != same.Prompt(stream, i) {
				t.Fatalf("stream %d prompt %d differs for the same seed", stream, i)
			}
			if p != d.Prompt(stream, i%n) {
				t.Errorf("stream %d: prompt %d is not prompt %d (no cycle)", stream, i, i%n)
			}
			if p != other.Prompt(stream, i) {
				differs = true
			}
			if i < n {
				seen = append(seen, p)
			}
		}
		starts[seen[0]] = true
		slices.Sort(seen)
		if len(slices.Compact(seen)) != n {
			t.Errorf("stream %d: %d distinct items in %d prompts, want every item once", stream, len(seen), n)
		}
	}
	if !differs || len(starts) < 2 {
		t.Errorf("another seed gives the same order (%v), or every stream starts at the same item (%d)", !differs, len(starts))
	}
	var order []int
	for i := range n {
		order = append(order, d.index(0, i))
	}
	if slices.IsSorted(order) {
		t.Errorf("not shuffled: %v", order)
	}
}

// Padding: a first turn shorter than the target gets the shared document's first words before it,
// to the target in words; a longer one is sent as it is; later turns are not padded. The body
// written piecewise is the padded prompt's JSON, and is not built whole.
func TestSetDatasetPadding(t *testing.T) {
	set := madeUpSet("pad", 3, 19, 20, 45)
	set.Items = append(set.Items,
		SetItem{Turns: []string{"say \"hi\" <b>&\n\tthen\u2028stop", "and \"then\"?"}, Line: 5},
		SetItem{Turns: []string{"def f(x):\n    return x * 2\n# explain f"}, Line: 6})
	d, err := NewSetDataset(set, 20, 3)
	if err != nil {
		t.Fatal(err)
	}
	if d.Conversations() != 1 {
		t.Errorf("%d conversations, want 1", d.Conversations())
	}
	for i := range set.Items {
		it, p := d.Item(0, i), d.Prompt(0, i)
		turn := it.Turns[0]
		words := len(strings.Fields(turn))
		switch {
		case words >= 20 && p != turn:
			t.Errorf("a first turn of %d words was changed: %q", words, p)
		case words < 20 && len(strings.Fields(p)) != 20:
			t.Errorf("padded to %d words, want 20: %q", len(strings.Fields(p)), p)
		case words < 20 && p != SharedDocument(20-words)+"\n\n"+turn:
			t.Errorf("padded turn %q: want the document's first %d words, a blank line, the turn", p, 20-words)
		}
		if got := d.turnWords(0, i, 0); got != len(strings.Fields(p)) {
			t.Errorf("turnWords %d, the prompt has %d", got, len(strings.Fields(p)))
		}
		if len(it.Turns) > 1 && (d.Turn(0, i, 1) != it.Turns[1] || d.turnWords(0, i, 1) != 2) {
			t.Errorf("a later turn was changed: %q", d.Turn(0, i, 1))
		}
	}
	model := jsonString("m")
	for _, api := range []string{APIChat, APICompletions} {
		parts := newBodyParts(api, model, 128, 0.7)
		for i := range set.Items {
			for _, n := range []int{1, 7, 4096} {
				if got, want := readBody(t, &parts, d, 9, i, n), oldBody(api, model, 128, 0.7, d.Prompt(9, i)); !bytes.Equal(got, want) {
					t.Errorf("%s item %d, reads of %d:\n got %s\nwant %s", api, i, n, got, want)
				}
			}
		}
	}

	// A long document: the same bytes, written a chunk at a time.
	long, _ := NewSetDataset(set, 300_000, 3)
	parts := newBodyParts(APIChat, model, 16, 0)
	if got, want := readBody(t, &parts, long, 1, 4, 32<<10), oldBody(APIChat, model, 16, 0, long.Prompt(1, 4)); !bytes.Equal(got, want) {
		t.Errorf("a 300000-word padded body differs")
	}
	body := func(pad int) uint64 {
		d, _ := NewSetDataset(set, pad, 3)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b, _ := newPromptBody(&parts, d, 1, 0)
		buf := make([]byte, 32<<10)
		for {
			if _, err := b.Read(buf); err != nil {
				break
			}
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	if small, large := body(1000), body(300_000); large > small+64<<10 {
		t.Errorf("a body padded to 300000 words allocated %d bytes, to 1000 words %d: built whole", large, small)
	}
}

// The shared document is lowercase words of the random prompts' vocabulary, and the same whatever
// its length (a shorter one is a prefix of a longer one).
func TestSharedDocument(t *testing.T) {
	doc := SharedDocument(5000)
	words := strings.Split(doc, " ")
	if len(words) != 5000 || SharedDocument(0) != "" || SharedDocument(1) != words[0] {
		t.Fatalf("%d words", len(words))
	}
	counts := map[string]int{}
	for _, w := range words {
		if !slices.Contains(promptWords, w) || strings.IndexFunc(w, func(r rune) bool { return !unicode.IsLower(r) }) >= 0 {
			t.Fatalf("word %q", w)
		}
		counts[w]++
	}
	if len(counts) < len(promptWords)*9/10 {
		t.Errorf("%d distinct words of %d", len(counts), len(promptWords))
	}
	if !strings.HasPrefix(doc, SharedDocument(1234)+" ") {
		t.Error("a shorter document is not the longer one's beginning")
	}
}

// A conversation's later turn carries the turns and answers before it (the answers as the stream
// gave them, escapes kept) and the item's own max_tokens; the announced size is the body's.
func TestConversationBody(t *testing.T) {
	set := &PromptSet{Name: "conv", Items: []SetItem{{
		Turns: []string{"first <question>", "second \"one\"", "third"}, MaxTokens: 33, Line: 1}}}
	d, _ := NewSetDataset(set, 6, 1)
	r := &runner{cfg: Config{Prompts: d, OutputTokens: 7}, set: d, parts: newBodyParts(APIChat, jsonString("m"), 7, 0)}
	var c conversation
	var convs atomic.Int64
	r.begin(&c, 5, 0, &convs)
	if c.turns != 3 || c.maxTokens != 33 || !c.follows() {
		t.Fatalf("begun %+v", c)
	}
	answers := [][]byte{[]byte(`one \"quoted\" \u003cb\u003e\n`), []byte(` two`)}
	for k, a := range answers {
		if !c.advance(&outcome{ok: true}, a) {
			t.Fatalf("turn %d did not advance", k)
		}
	}
	if c.follows() {
		t.Error("the last turn says a turn follows")
	}
	b, size := r.body(&c)
	var got bytes.Buffer
	got.ReadFrom(b)
	if int64(got.Len()) != size {
		t.Errorf("body of %d bytes announced as %d", got.Len(), size)
	}
	var req struct {
		Messages  []struct{ Role, Content string }
		MaxTokens int `json:"max_tokens"`
	}
	if err := json.Unmarshal(got.Bytes(), &req); err != nil {
		t.Fatalf("%v: %s", err, got.Bytes())
	}
	want := []string{"user", d.Prompt(5, 0), "assistant", "one \"quoted\" <b>\n", "user", "second \"one\"",
		"assistant", " two", "user", "third"}
	var have []string
	for _, m := range req.Messages {
		have = append(have, m.Role, m.Content)
	}
	if !slices.Equal(have, want) || req.MaxTokens != 33 {
		t.Errorf("messages %q max_tokens %d\nwant %q max_tokens 33", have, req.MaxTokens, want)
	}
	if got := r.promptWords(&c); got != 6+2+3+1+1 {
		t.Errorf("%d words estimated, want 13", got)
	}
	// The last turn's answer, or a failed turn, ends the conversation.
	if c.advance(&outcome{ok: true}, nil) || c.turns != 0 {
		t.Error("a conversation went on past its last turn")
	}
	r.begin(&c, 5, 0, &convs)
	if c.i != 1 || c.turn != 0 || c.advance(&outcome{}, nil) || c.turns != 0 || len(c.answers) != 0 {
		t.Errorf("a failed turn did not end its conversation: %+v", c)
	}
}

// The answer's text is kept from content and text (not reasoning_content), raw.
func TestParseChunkAnswerText(t *testing.T) {
	var c Chunk
	var text []byte
	for _, ev := range []string{
		`{"choices":[{"delta":{"role":"assistant","content":""}}]}`,
		`{"choices":[{"delta":{"reasoning_content":"hmm","content":"a \"b\""}}]}`,
		`{"choices":[{"text":" c\n","finish_reason":null}]}`,
		`{"choices":[{"delta":{"content":null}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
	} {
		if err := parseChunk([]byte(ev), &c, &text); err != nil {
			t.Fatal(err)
		}
	}
	if string(text) != `a \"b\" c\n` {
		t.Errorf("text %q", text)
	}
	if err := parseChunk([]byte(`{"choices":[{"delta":{"content":"x"}}]}`), &c, nil); err != nil || c.Content != 1 {
		t.Errorf("without a text buffer: %v %+v", err, c)
	}
}
