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

// bodyParts are what every request of a level shares around its prompt: the JSON before the
// prompt's text (opening quote included) and after it.
type bodyParts struct{ head, tail []byte }

// newBodyParts encodes the level's request: streaming with usage, ignore_eos, max_tokens, the
// level's temperature.
func newBodyParts(api string, model []byte, outputTokens int, temperature float64) bodyParts {
	var p bodyParts
	p.head = append(p.head, `{"model":`...)
	p.head = append(p.head, model...)
	if api == APIChat {
		p.head = append(p.head, `,"messages":[{"role":"user","content":"`...)
		p.tail = append(p.tail, `"}]`...)
	} else {
		p.head = append(p.head, `,"prompt":"`...)
		p.tail = append(p.tail, '"')
	}
	p.tail = append(p.tail, `,"max_tokens":`...)
	p.tail = strconv.AppendInt(p.tail, int64(outputTokens), 10)
	p.tail = append(p.tail, `,"temperature":`...)
	p.tail = strconv.AppendFloat(p.tail, temperature, 'g', -1, 64)
	p.tail = append(p.tail, `,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`...)
	return p
}

// promptBody is one request's body, produced as it is read.
type promptBody struct {
	parts   *bodyParts
	cur     promptCursor
	pending []byte // produced, not yet read
	scratch []byte
	stage   uint8 // 0 head, 1 prompt, 2 tail, 3 done
}

// openCursor starts prompt i of stream of ds.
func openCursor(ds Dataset, stream uint64, i int) promptCursor {
	if cd, ok := ds.(cursorDataset); ok {
		return cd.cursor(stream, i)
	}
	return &stringCursor{s: ds.Prompt(stream, i)}
}

// newPromptBody returns the body of prompt i of stream and its length in bytes (from a first
// pass over the prompt's source, which allocates nothing that grows with the prompt; a Dataset's
// Prompt is called once).
func newPromptBody(parts *bodyParts, ds Dataset, stream uint64, i int) (*promptBody, int64) {
	b := &promptBody{parts: parts, scratch: make([]byte, 0, bodyChunk+64), cur: openCursor(ds, stream, i)}
	return b, int64(len(parts.head)+len(parts.tail)) + b.cur.size(b.scratch)
}

// next produces the body's next bytes into pending; false at the end.
func (b *promptBody) next() bool {
	switch b.stage {
	case 0:
		b.pending, b.stage = b.parts.head, 1
	case 1:
		var more bool
		b.scratch, more = b.cur.fill(b.scratch[:0], bodyChunk)
		b.pending = b.scratch
		if !more {
			b.stage = 2
		}
	case 2:
		b.pending, b.stage = b.parts.tail, 3
	default:
		return false
	}
	return true
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
