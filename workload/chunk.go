package workload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Chunk is what the load generator needs from one streamed OpenAI-compatible event. Byte slices
// alias the parsed data.
type Chunk struct {
	Done bool // the "[DONE]" sentinel
	// ID is the top-level "id" (SGLang's request id), raw JSON string contents.
	ID []byte
	// Content is the total length in bytes (raw, escapes not decoded) of the text the chunk carries:
	// choices[].text, choices[].delta.content and choices[].delta.reasoning_content. A chunk with
	// Content > 0 carries tokens.
	Content int
	// Finish is set when a choice has a non-null finish_reason.
	Finish bool
	// Usage is set when a non-null "usage" object is present.
	Usage                          bool
	PromptTokens, CompletionTokens int64
	// Error is set for an error event ({"error": {...}} or {"object": "error", ...}); ErrorMsg holds
	// its message (raw JSON string contents), possibly empty.
	Error    bool
	ErrorMsg []byte
}

var errMalformed = errors.New("malformed JSON")

// maxDepth bounds nesting of skipped values.
const maxDepth = 512

// ParseChunk parses one event's data into c. It does not allocate: it walks the JSON once,
// skipping what it does not need, and rejects malformed JSON.
func ParseChunk(data []byte, c *Chunk) error { return parseChunk(data, c, nil) }

// parseChunk is ParseChunk that also appends the answer's text to *text when text is not nil:
// choices[].text and choices[].delta.content (not reasoning_content, which a conversation's
// history does not carry), as raw JSON string contents (escapes kept), so that it can be sent
// again inside a JSON string as it is.
func parseChunk(data []byte, c *Chunk, text *[]byte) error {
	*c = Chunk{}
	p := parser{b: data, text: text}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '[' && string(trimSpace(data)) == "[DONE]" {
		c.Done = true
		return nil
	}
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return p.errf("want a JSON object")
	}
	isErrorObject := false
	err := p.object(func(key []byte) error {
		switch string(key) {
		case "id":
			if p.peek() == '"' {
				s, err := p.str()
				c.ID = s
				return err
			}
		case "choices":
			if p.peek() == '[' {
				return p.array(func() error { return p.choice(c) })
			}
		case "usage":
			if p.peek() == '{' {
				c.Usage = true
				return p.object(func(k []byte) error {
					switch string(k) {
					case "prompt_tokens":
						return p.intInto(&c.PromptTokens)
					case "completion_tokens":
						return p.intInto(&c.CompletionTokens)
					}
					return p.skip()
				})
			}
		case "error":
			switch p.peek() {
			case '{':
				c.Error = true
				return p.object(func(k []byte) error {
					if string(k) == "message" && p.peek() == '"' {
						s, err := p.str()
						c.ErrorMsg = s
						return err
					}
					return p.skip()
				})
			case '"':
				c.Error = true
				s, err := p.str()
				c.ErrorMsg = s
				return err
			}
		case "object":
			if p.peek() == '"' {
				s, err := p.str()
				if string(s) == "error" {
					isErrorObject = true
				}
				return err
			}
		case "message":
			if p.peek() == '"' && c.ErrorMsg == nil {
				s, err := p.str()
				c.ErrorMsg = s
				return err
			}
		}
		return p.skip()
	})
	if err != nil {
		return err
	}
	if isErrorObject {
		c.Error = true
	} else if !c.Error {
		c.ErrorMsg = nil
	}
	p.ws()
	if p.i != len(p.b) {
		return p.errf("trailing data")
	}
	return nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

type parser struct {
	b    []byte
	i    int
	text *[]byte // where choice() appends the answer's text; nil: nowhere
}

func (p *parser) errf(what string) error {
	return fmt.Errorf("%w at offset %d: %s", errMalformed, p.i, what)
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		if c := p.b[p.i]; c > ' ' || !isSpace(c) {
			return
		}
		p.i++
	}
}

// peek skips white space and returns the next byte (0 at the end).
func (p *parser) peek() byte {
	p.ws()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

// object walks an object; each member's value must be consumed by fn.
func (p *parser) object(fn func(key []byte) error) error {
	if p.peek() != '{' {
		return p.errf("want '{'")
	}
	p.i++
	if p.peek() == '}' {
		p.i++
		return nil
	}
	for {
		if p.peek() != '"' {
			return p.errf("want a key")
		}
		key, err := p.str()
		if err != nil {
			return err
		}
		if p.peek() != ':' {
			return p.errf("want ':'")
		}
		p.i++
		if p.peek() == 0 {
			return p.errf("want a value")
		}
		if err := fn(key); err != nil {
			return err
		}
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return nil
		default:
			return p.errf("want ',' or '}'")
		}
	}
}

func (p *parser) array(fn func() error) error {
	if p.peek() != '[' {
		return p.errf("want '['")
	}
	p.i++
	if p.peek() == ']' {
		p.i++
		return nil
	}
	for {
		if err := fn(); err != nil {
			return err
		}
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			return nil
		default:
			return p.errf("want ',' or ']'")
		}
	}
}

func (p *parser) choice(c *Chunk) error {
	if p.peek() != '{' {
		return p.skip()
	}
	return p.object(func(k []byte) error {
		switch string(k) {
		case "text":
			return p.textInto(&c.Content, p.text)
		case "delta":
			if p.peek() == '{' {
				return p.object(func(k []byte) error {
					switch string(k) {
					case "content":
						return p.textInto(&c.Content, p.text)
					case "reasoning_content":
						return p.textInto(&c.Content, nil)
					}
					return p.skip()
				})
			}
		case "finish_reason":
			if p.peek() == 'n' {
				return p.skip()
			}
			c.Finish = true
		}
		return p.skip()
	})
}

// textInto adds a string's raw length to n (null and other types add nothing) and, when text is
// not nil, appends its raw contents there.
func (p *parser) textInto(n *int, text *[]byte) error {
	if p.peek() != '"' {
		return p.skip()
	}
	s, err := p.str()
	*n += len(s)
	if err == nil && text != nil {
		*text = append(*text, s...)
	}
	return err
}

// intInto reads a non-negative number (its integer part) into n; null leaves n alone.
func (p *parser) intInto(n *int64) error {
	c := p.peek()
	if c < '0' || c > '9' {
		return p.skip()
	}
	var v int64
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		if v < 1<<58 {
			v = v*10 + int64(p.b[p.i]-'0')
		}
		p.i++
	}
	p.i = start
	if err := p.number(); err != nil {
		return err
	}
	*n = v
	return nil
}

// str reads a string and returns its raw contents (escapes left as they are).
func (p *parser) str() ([]byte, error) {
	if p.peek() != '"' {
		return nil, p.errf("want a string")
	}
	p.i++
	start := p.i
	for {
		p.i = plainRun(p.b, p.i)
		if p.i >= len(p.b) {
			break
		}
		switch c := p.b[p.i]; {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, nil
		case c == '\\':
			p.i++
			if p.i >= len(p.b) {
				return nil, p.errf("unterminated escape")
			}
			switch p.b[p.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i++
			case 'u':
				if p.i+5 > len(p.b) {
					return nil, p.errf("short \\u escape")
				}
				for _, h := range p.b[p.i+1 : p.i+5] {
					if !isHex(h) {
						return nil, p.errf("bad \\u escape")
					}
				}
				p.i += 5
			default:
				return nil, p.errf("bad escape")
			}
		default: // c < 0x20
			return nil, p.errf("control character in string")
		}
	}
	return nil, p.errf("unterminated string")
}

// plainRun returns the index of the first byte at or after i that a string's plain run ends at
// ('"', '\\' or a control character), or len(b). It tests eight bytes at a time: the strings of a
// streamed chunk (its id, its model's name, the keys) are most of what the parser reads.
func plainRun(b []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q, s := x^(ones*'"'), x^(ones*'\\')
		// a byte's high bit is set in m for a byte that is zero in q or s, or under 0x20 in x; the
		// lowest one is exact (a borrow only marks bytes above a true one)
		m := ((q - ones) &^ q) | ((s - ones) &^ s) | ((x - ones*0x20) &^ x)
		if m &= highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 {
			return i
		}
	}
	return len(b)
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func (p *parser) number() error {
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i < len(p.b) && p.b[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		p.i = start
		return p.errf("bad number")
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return p.errf("bad number")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return p.errf("bad number")
		}
	}
	return nil
}

func (p *parser) literal(lit string) error {
	if len(p.b)-p.i < len(lit) || string(p.b[p.i:p.i+len(lit)]) != lit {
		return p.errf("bad literal")
	}
	p.i += len(lit)
	return nil
}

// skip consumes one value of any type, iteratively (no recursion, bounded depth).
func (p *parser) skip() error {
	depth := 0
	// open containers, one bit per level: set for an object, clear for an array
	var stack [maxDepth / 8]byte
	isObj := func() bool { return stack[(depth-1)/8]&(1<<((depth-1)%8)) != 0 }
	push := func(obj bool) {
		if obj {
			stack[depth/8] |= 1 << (depth % 8)
		} else {
			stack[depth/8] &^= 1 << (depth % 8)
		}
		depth++
	}
	expectValue := true
	for {
		c := p.peek()
		if expectValue {
			switch {
			case c == '{':
				if depth == maxDepth {
					return p.errf("nesting too deep")
				}
				push(true)
				p.i++
				if p.peek() == '}' {
					p.i++
					depth--
					break
				}
				if p.peek() != '"' {
					return p.errf("want a key")
				}
				if _, err := p.str(); err != nil {
					return err
				}
				if p.peek() != ':' {
					return p.errf("want ':'")
				}
				p.i++
				continue
			case c == '[':
				if depth == maxDepth {
					return p.errf("nesting too deep")
				}
				push(false)
				p.i++
				if p.peek() == ']' {
					p.i++
					depth--
					break
				}
				continue
			case c == '"':
				if _, err := p.str(); err != nil {
					return err
				}
			case c == '-' || (c >= '0' && c <= '9'):
				if err := p.number(); err != nil {
					return err
				}
			case c == 't':
				if err := p.literal("true"); err != nil {
					return err
				}
			case c == 'f':
				if err := p.literal("false"); err != nil {
					return err
				}
			case c == 'n':
				if err := p.literal("null"); err != nil {
					return err
				}
			default:
				return p.errf("want a value")
			}
		}
		// after a value: close containers or move to the next element
		expectValue = true
		if depth == 0 {
			return nil
		}
		c = p.peek()
		switch {
		case c == ',':
			p.i++
			if isObj() {
				if p.peek() != '"' {
					return p.errf("want a key")
				}
				if _, err := p.str(); err != nil {
					return err
				}
				if p.peek() != ':' {
					return p.errf("want ':'")
				}
				p.i++
			}
		case c == '}' && isObj(), c == ']' && !isObj():
			p.i++
			depth--
			expectValue = false
		default:
			return p.errf("want ',' or a closing bracket")
		}
	}
}
