package workload

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
)

// A prompt set as a level's prompts (issue 27; docs/bench.md, "Prompt set files"): its items in an
// order shuffled by the seed, each with its own max_tokens when it has one, a conversation's turns
// sent one after the other over the chat API with the answers before them, and the first turn
// padded to a length by a shared document put before it.

// SetDataset sends the items of a prompt set (NewSetDataset). Item i of a stream is its
// conversation i: the first turn is Prompt(stream, i); later turns follow in the same order.
type SetDataset struct {
	set   *PromptSet
	padTo int
	order []int   // item indices, shuffled by the seed
	words []int32 // whitespace-separated words of each item's first turn
	multi int     // items of more than one turn
}

// NewSetDataset returns the items of set as a Dataset, in an order shuffled by seed (each stream
// starts at its own place in that order and cycles through it). padTo > 0 pads each item's first
// turn of n whitespace-separated words, n < padTo, to padTo words by putting the first padTo - n
// words of the shared document (SharedDocument) before it, then a blank line; a turn of padTo
// words or more is sent as it is, never cut. The target is in words: sglangsim counts one token
// per word, a real tokenizer about 1.3 per English word (more for code) plus the chat template, so
// the length sent is the server's count (Result.MeanFirstInputTokens).
func NewSetDataset(set *PromptSet, padTo int, seed uint64) (*SetDataset, error) {
	switch {
	case set == nil || len(set.Items) == 0:
		return nil, errors.New("prompt set dataset: the set has no items")
	case padTo < 0:
		return nil, fmt.Errorf("prompt set %q: padding must not be negative, got %d", set.Name, padTo)
	}
	d := &SetDataset{set: set, padTo: padTo, order: make([]int, len(set.Items)), words: make([]int32, len(set.Items))}
	for i, it := range set.Items {
		if len(it.Turns) == 0 {
			return nil, fmt.Errorf("prompt set %q: item %d (line %d) has no turn", set.Name, i, it.Line)
		}
		d.order[i] = i
		d.words[i] = int32(min(countWords(it.Turns[0]), 1<<31-1))
		if len(it.Turns) > 1 {
			d.multi++
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x7365742d6f726472))
	rng.Shuffle(len(d.order), func(i, j int) { d.order[i], d.order[j] = d.order[j], d.order[i] })
	return d, nil
}

// String names the dataset: "set:" and the set's name.
func (d *SetDataset) String() string { return "set:" + d.set.Name }

// Set is the prompt set the dataset sends.
func (d *SetDataset) Set() *PromptSet { return d.set }

// PadTo is the length in words the first turns are padded to (0: not padded).
func (d *SetDataset) PadTo() int { return d.padTo }

// Conversations counts the set's items of more than one turn.
func (d *SetDataset) Conversations() int { return d.multi }

// index is the set's item sent as conversation i of stream.
func (d *SetDataset) index(stream uint64, i int) int {
	n := uint64(len(d.order))
	return d.order[(stream*0x9e3779b97f4a7c15%n+uint64(i)%n)%n]
}

// Item returns the set's item sent as conversation i of stream, as the file holds it (unpadded).
func (d *SetDataset) Item(stream uint64, i int) SetItem { return d.set.Items[d.index(stream, i)] }

// Prompt returns the first turn of conversation i of stream, padded.
func (d *SetDataset) Prompt(stream uint64, i int) string { return d.Turn(stream, i, 0) }

// Turn returns turn t (from 0) of conversation i of stream: the first padded, a later one as the
// file holds it.
func (d *SetDataset) Turn(stream uint64, i, t int) string {
	k := d.index(stream, i)
	turn := d.set.Items[k].Turns[t]
	pad := d.pad(k, t)
	if pad == 0 {
		return turn
	}
	var b strings.Builder
	b.Grow(pad*7 + 2 + len(turn))
	c := &docCursor{n: pad}
	var buf []byte
	for more := true; more; {
		buf, more = c.fill(buf[:0], bodyChunk)
		b.Write(buf)
	}
	b.WriteString(padSeparator)
	b.WriteString(turn)
	return b.String()
}

// pad is how many words of the shared document go before turn t of item k.
func (d *SetDataset) pad(k, t int) int {
	if t != 0 || d.padTo <= int(d.words[k]) {
		return 0
	}
	return d.padTo - int(d.words[k])
}

// cursor writes the first turn of conversation i of stream (cursorDataset).
func (d *SetDataset) cursor(stream uint64, i int) promptCursor { return d.turnCursor(stream, i, 0) }

// turnCursor writes turn t of conversation i of stream, padded if it is the first, without
// building the padded text.
func (d *SetDataset) turnCursor(stream uint64, i, t int) promptCursor {
	k := d.index(stream, i)
	turn := &stringCursor{s: d.set.Items[k].Turns[t]}
	if pad := d.pad(k, t); pad > 0 {
		return &paddedCursor{doc: docCursor{n: pad}, text: turn}
	}
	return turn
}

// turnWords is the whitespace-separated words of turn t of conversation i of stream as sent.
func (d *SetDataset) turnWords(stream uint64, i, t int) int {
	k := d.index(stream, i)
	if t == 0 {
		return max(int(d.words[k]), d.padTo)
	}
	return countWords(d.set.Items[k].Turns[t])
}

// The shared document is lowercase words of the random prompts' vocabulary, the same for every
// request, level and seed: a long context that every padded prompt of a run shares from its first
// word (as a long system prompt or a retrieved document would be), and that holds nothing a
// content-scoring server would take for code or for any particular kind of text, so that the
// prompt's own content still decides. Its word k is a hash of k: any length is written without
// being stored.

// padSeparator is put between the shared document and the turn it pads: a blank line.
const padSeparator = "\n\n"

// docWord is word k (from 0) of the shared document.
func docWord(k int) string {
	return promptWords[mix64(uint64(k)+0x646f63756d656e74)%uint64(len(promptWords))]
}

// mix64 is splitmix64's finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// SharedDocument returns the first words words of the shared document that pads a prompt set's
// first turns (NewSetDataset), separated by single spaces.
func SharedDocument(words int) string {
	var b strings.Builder
	c := &docCursor{n: words}
	var buf []byte
	for more := words > 0; more; {
		buf, more = c.fill(buf[:0], bodyChunk)
		b.Write(buf)
	}
	return b.String()
}

// docCursor writes the shared document's first n words. The vocabulary needs no JSON escaping
// (TestPromptWordsArePlain).
type docCursor struct{ w, n int }

func (c *docCursor) fill(dst []byte, limit int) ([]byte, bool) {
	for c.w < c.n && len(dst) < limit {
		if c.w > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, docWord(c.w)...)
		c.w++
	}
	return dst, c.w < c.n
}

func (c *docCursor) size([]byte) int64 {
	n := int64(max(c.n-1, 0)) // the spaces
	for k := range c.n {
		n += int64(len(docWord(k)))
	}
	return n
}

// paddedCursor writes the shared document, the separator (escaped) and a turn.
type paddedCursor struct {
	doc     docCursor
	sepDone bool
	text    *stringCursor
}

// padSeparatorJSON is padSeparator as JSON string contents.
const padSeparatorJSON = `\n\n`

func (c *paddedCursor) fill(dst []byte, limit int) ([]byte, bool) {
	if c.doc.w < c.doc.n {
		var more bool
		if dst, more = c.doc.fill(dst, limit); more {
			return dst, true
		}
	}
	if !c.sepDone {
		dst, c.sepDone = append(dst, padSeparatorJSON...), true
	}
	if len(dst) >= limit {
		return dst, c.text.pos < len(c.text.s)
	}
	return c.text.fill(dst, limit)
}

func (c *paddedCursor) size(scratch []byte) int64 {
	return c.doc.size(scratch) + int64(len(padSeparatorJSON)) + c.text.size(scratch)
}
