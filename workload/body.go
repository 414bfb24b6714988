package workload

import (
	"io"
	"math/rand/v2"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// A request's body is written while it is sent, a few KiB at a time, from the prompt's source (the
// random dataset's generator, or a dataset's string): the client never holds a whole prompt, so its
// memory is bounded by the requests in flight, not by their prompts' length. The bytes are those
// encoding/json gives for the same request (TestPromptBodyIsTheOldBody).

// bodyChunk is how much escaped prompt text a body produces per step.
const bodyChunk = 4 << 10

// promptCursor yields a prompt's text as JSON string contents (escaped, without quotes), in order.
type promptCursor interface {
	// fill appends the next escaped text to dst, at least one byte unless the prompt is done,
	// stopping once len(dst) reaches limit (a piece may run a few bytes past it); more is false
	// when nothing is left.
	fill(dst []byte, limit int) (out []byte, more bool)
	// size is the length of everything fill gives from the start, computed without moving the
	// cursor (scratch: room it may write into).
	size(scratch []byte) int64
}

// cursorDataset is a Dataset that can write a prompt piecewise without building it.
type cursorDataset interface {
	cursor(stream uint64, i int) promptCursor
}

// rng is the generator of prompt i of stream; Prompt and cursor draw the same words from it.
func (d *RandomDataset) rng(stream uint64, i int) *rand.Rand {
	return rand.New(rand.NewPCG(d.Seed^0x5bd1e9955bd1e995, stream*0x9e3779b97f4a7c15+uint64(i)))
}

func (d *RandomDataset) cursor(stream uint64, i int) promptCursor {
	return &randomCursor{d: d, stream: stream, i: i, rng: d.rng(stream, i), n: d.Tokens}
}

// randomCursor draws Prompt's words one by one. The vocabulary needs no JSON escaping
// (TestPromptWordsArePlain).
type randomCursor struct {
	d      *RandomDataset
	stream uint64
	i      int
	rng    *rand.Rand
	w, n   int
}

func (c *randomCursor) fill(dst []byte, limit int) ([]byte, bool) {
	for c.w < c.n && len(dst) < limit {
		if c.w > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, promptWords[c.rng.IntN(len(promptWords))]...)
		c.w++
	}
	return dst, c.w < c.n
}

// size draws the words again from the seed and sums their lengths and the spaces between them.
func (c *randomCursor) size([]byte) int64 {
	rng := c.d.rng(c.stream, c.i)
	var n int64
	for w := range c.n {
		if w > 0 {
			n++
		}
		n += int64(len(promptWords[rng.IntN(len(promptWords))]))
	}
	return n
}

// stringCursor escapes a prompt held as a string (ShareGPT's, or any Dataset's).
type stringCursor struct {
	s   string
	pos int
}

func (c *stringCursor) fill(dst []byte, limit int) ([]byte, bool) {
	dst, c.pos = appendJSONText(dst, c.s, c.pos, limit)
	return dst, c.pos < len(c.s)
}

func (c *stringCursor) size(scratch []byte) int64 {
	var n int64
	for pos := 0; pos < len(c.s); {
		var out []byte
		out, pos = appendJSONText(scratch[:0], c.s, pos, bodyChunk)
		n += int64(len(out))
	}
	return n
}

const hexDigits = "0123456789abcdef"

// appendJSONText appends s[from:], escaped as encoding/json escapes a string's contents (its
// HTML-safe form: <, > and & as \u00XX; invalid UTF-8 as \ufffd; U+2028 and U+2029 escaped), rune
// by rune until dst reaches limit, and returns where it stopped (a rune boundary, as json steps).
func appendJSONText(dst []byte, s string, from, limit int) ([]byte, int) {
	i := from
	for i < len(s) && len(dst) < limit {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\':
				dst = append(dst, '\\', b)
			case b == '\n':
				dst = append(dst, '\\', 'n')
			case b == '\r':
				dst = append(dst, '\\', 'r')
			case b == '\t':
				dst = append(dst, '\\', 't')
			case b == '\b':
				dst = append(dst, '\\', 'b')
			case b == '\f':
				dst = append(dst, '\\', 'f')
			case b < 0x20 || b == '<' || b == '>' || b == '&':
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			default:
				dst = append(dst, b)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return dst, i
}

// bodyParts are what every request of a level shares around its prompts: the JSON before the
// first prompt's text (opening quote included), the JSON closing the last prompt, and the
// sampling parameters after max_tokens.
type bodyParts struct {
	head      []byte // {"model":M,"messages":[{"role":"user","content":"  or  {"model":M,"prompt":"
	close     []byte // "}]  or  "
	params    []byte // ,"temperature":T,...} after max_tokens' value
	maxTokens int    // the level's max_tokens
	tail      []byte // close, max_tokens of the level, params: the usual end of a body
}

// The JSON between the turns of a conversation (chat only): a user turn's text, then the answer's,
// then the next user turn's.
var (
	userToAnswer = []byte(`"},{"role":"assistant","content":"`)
	answerToUser = []byte(`"},{"role":"user","content":"`)
)

// newBodyParts encodes the level's request: streaming with usage, ignore_eos, max_tokens, the
// level's temperature.
func newBodyParts(api string, model []byte, outputTokens int, temperature float64) bodyParts {
	var p bodyParts
	p.head = append(p.head, `{"model":`...)
	p.head = append(p.head, model...)
	if api == APIChat {
		p.head = append(p.head, `,"messages":[{"role":"user","content":"`...)
		p.close = append(p.close, `"}]`...)
	} else {
		p.head = append(p.head, `,"prompt":"`...)
		p.close = append(p.close, '"')
	}
	p.params = append(p.params, `,"temperature":`...)
	p.params = strconv.AppendFloat(p.params, temperature, 'g', -1, 64)
	p.params = append(p.params, `,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`...)
	p.maxTokens = outputTokens
	p.tail = p.appendTail(nil, outputTokens)
	return p
}

// appendTail appends the end of a body asking for maxTokens.
func (p *bodyParts) appendTail(dst []byte, maxTokens int) []byte {
	dst = append(dst, p.close...)
	dst = append(dst, `,"max_tokens":`...)
	dst = strconv.AppendInt(dst, int64(maxTokens), 10)
	return append(dst, p.params...)
}

// bodyPiece is a part of a body: JSON written as it is, or a prompt's text escaped as it is
// written.
type bodyPiece struct {
	raw []byte
	cur promptCursor
}

// promptBody is one request's body, produced as it is read.
type promptBody struct {
	pieces  []bodyPiece
	k       int    // the piece being written
	pending []byte // produced, not yet read
	scratch []byte
}

// openCursor starts prompt i of stream of ds.
func openCursor(ds Dataset, stream uint64, i int) promptCursor {
	if cd, ok := ds.(cursorDataset); ok {
		return cd.cursor(stream, i)
	}
	return &stringCursor{s: ds.Prompt(stream, i)}
}

// newPromptBody returns the body of prompt i of stream, sent alone with the level's max_tokens,
// and its length in bytes.
func newPromptBody(parts *bodyParts, ds Dataset, stream uint64, i int) (*promptBody, int64) {
	return newBody([]bodyPiece{{raw: parts.head}, {cur: openCursor(ds, stream, i)}, {raw: parts.tail}})
}

// newBody returns a body of pieces and its length in bytes (from a first pass over the prompts'
// sources, which allocates nothing that grows with a prompt; a Dataset's Prompt is called once).
func newBody(pieces []bodyPiece) (*promptBody, int64) {
	b := &promptBody{pieces: pieces, scratch: make([]byte, 0, bodyChunk+64)}
	var n int64
	for _, p := range pieces {
		if p.cur != nil {
			n += p.cur.size(b.scratch)
		} else {
			n += int64(len(p.raw))
		}
	}
	return b, n
}

// next produces the body's next bytes into pending; false at the end.
func (b *promptBody) next() bool {
	for b.k < len(b.pieces) {
		p := &b.pieces[b.k]
		if p.cur == nil {
			b.pending = p.raw
			b.k++
			return true
		}
		var more bool
		b.scratch, more = p.cur.fill(b.scratch[:0], bodyChunk)
		b.pending = b.scratch
		if !more {
			b.k++
		}
		if len(b.pending) > 0 {
			return true
		}
	}
	return false
}

func (b *promptBody) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(b.pending) == 0 {
			if !b.next() {
				if n == 0 {
					return 0, io.EOF
				}
				break
			}
			continue
		}
		c := copy(p[n:], b.pending)
		b.pending = b.pending[c:]
		n += c
	}
	return n, nil
}

// promptWordCount is the number of whitespace-separated words of prompt i of stream (what a
// request without usage is counted as sending).
func promptWordCount(ds Dataset, stream uint64, i int) int {
	if rd, ok := ds.(*RandomDataset); ok {
		return max(rd.Tokens, 0) // single-space-separated words
	}
	return countWords(ds.Prompt(stream, i))
}

// countWords counts what strings.Fields would return, without building it.
func countWords(s string) int {
	n := 0
	in := false
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		i += size
		if unicode.IsSpace(r) {
			in = false
		} else if !in {
			in = true
			n++
		}
	}
	return n
}
