package workload

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Prompt set files (issue 27; docs/bench.md, "Prompt set files"): a file in a format users already
// have, read once and streamed, every error naming the file and its line.
//
// The formats (PromptSet.Format):
const (
	// FormatShareGPT: a JSON array of {"conversations": [{"from", "value"}, ...]}; each conversation
	// gives its first "human" (or "user") turn, as sglang.bench_serving reads the file.
	FormatShareGPT = "sharegpt"
	// FormatOpenAI: JSON Lines of {"messages": [{"role", "content"}, ...]}; the user turns.
	FormatOpenAI = "openai"
	// FormatJSONL: JSON Lines of objects with a prompt field (promptFields, first present wins).
	FormatJSONL = "jsonl"
	// FormatMTBench: MT-Bench's and Spec-Bench's question.jsonl, {"question_id", "category",
	// "turns": [string, ...]}; every turn.
	FormatMTBench = "mtbench"
)

// setFormats lists the formats in the order error messages name them.
var setFormats = []string{FormatShareGPT, FormatOpenAI, FormatJSONL, FormatMTBench}

// promptFields are the fields a FormatJSONL object's prompt is read from, in this order: the first
// present (and not null) is the prompt. prompt: HumanEval's and most prompt lists'; text: plain text
// corpora; input: instruction sets' single field; question: GSM8K's.
var promptFields = []string{"prompt", "text", "input", "question"}

// openAIRoles are the roles a FormatOpenAI message may have; only user messages are read.
var openAIRoles = []string{"system", "developer", "user", "assistant", "tool", "function"}

// PromptSet is one prompt set file, read.
type PromptSet struct {
	Name   string    // as the caller named the set
	Format string    // the format read: the one named, else the one detected
	Items  []SetItem // in the file's order
	// Hash is the SHA-256 of the file's bytes, in hex: a changed file is a changed set.
	Hash string
	// Categories are the items' distinct non-empty categories, in order of first appearance.
	Categories []string
}

// SetItem is one prompt of a set: one request, or one conversation of several user turns.
type SetItem struct {
	// Category is the file's category field for the item ("" when it has none).
	Category string
	// Turns are the user turns, one or more. A turn after the first is sent with the answer to the
	// one before it, as MT-Bench and Spec-Bench do.
	Turns []string
	// MaxTokens is the item's own max_tokens; 0: the workload's output tokens.
	MaxTokens int
	// Line is where the item starts in the file, from 1.
	Line int
}

// SetLimits bounds every size of a prompt set file. A field that is 0 (or negative) takes its
// default (DefaultSetLimits).
type SetLimits struct {
	MaxItems int // prompts (items) in a set
	// MaxLineBytes bounds one line of JSON Lines (newline excluded) and, in a ShareGPT file, one
	// JSON value (a turn's text, with the space before it): what is held in memory at once.
	MaxLineBytes int
	MaxFileBytes int64 // the file
	MaxTurns     int   // user turns of one item
	MaxTokens    int   // an item's max_tokens
}

// DefaultSetLimits returns the bounds of a prompt set file, declared here once (docs/bench.md,
// "Prompt set files"). A million items of a 1 GiB file hold at most the file's prompts plus about
// 100 MB of items; 4 MiB is about a million tokens of text on one line; the largest max_tokens is
// the spec's bound on workload.output_tokens.
func DefaultSetLimits() SetLimits {
	return SetLimits{
		MaxItems:     1_000_000,
		MaxLineBytes: 4 << 20,
		MaxFileBytes: 1 << 30,
		MaxTurns:     100,
		MaxTokens:    1 << 20,
	}
}

// withDefaults fills the fields left at zero.
func (l SetLimits) withDefaults() SetLimits {
	d := DefaultSetLimits()
	if l.MaxItems <= 0 {
		l.MaxItems = d.MaxItems
	}
	if l.MaxLineBytes <= 0 {
		l.MaxLineBytes = d.MaxLineBytes
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = d.MaxFileBytes
	}
	if l.MaxTurns <= 0 {
		l.MaxTurns = d.MaxTurns
	}
	if l.MaxTokens <= 0 {
		l.MaxTokens = d.MaxTokens
	}
	return l
}

// maxNesting bounds how deep the ShareGPT reader follows the fields it skips: encoding/json's own
// bound on nesting, which the JSON Lines formats get from json.Unmarshal.
const maxNesting = 10000

// SetError is an error in a prompt set file: the file, the line (from 1; 0 when the error is about
// the file as a whole: empty, no prompts, too large) and what is wrong.
type SetError struct {
	Path string
	Line int
	Msg  string
}

func (e *SetError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
	}
	return e.Path + ": " + e.Msg
}

// ReadPromptSet reads the prompt set file at path in format (one of the Format constants, or "" to
// detect it: a file whose first non-space byte is '[' is ShareGPT; JSON Lines by the first object's
// keys: messages is openai, turns is mtbench, a prompt field is jsonl). The file is read once,
// streamed, and hashed while it is read; nothing larger than a line (or, in a ShareGPT file, one
// JSON value) is held beside the prompts kept. An error in the file is a *SetError naming the line.
func ReadPromptSet(ctx context.Context, name, path, format string, limits SetLimits) (*PromptSet, error) {
	if format != "" && !slices.Contains(setFormats, format) {
		return nil, fmt.Errorf("unknown prompt set format %q (want %s, or none to detect it)", format,
			strings.Join(setFormats, ", "))
	}
	limits = limits.withDefaults()
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > limits.MaxFileBytes {
		return nil, &SetError{Path: path, Msg: fmt.Sprintf("%d bytes, larger than the limit of %d", st.Size(),
			limits.MaxFileBytes)}
	}
	src := &setSource{r: f, h: sha256.New(), max: limits.MaxFileBytes}
	r := &setReader{ctx: ctx, path: path, limits: limits, set: &PromptSet{Name: name, Format: format},
		seen: map[string]bool{}}
	if err := r.read(bufio.NewReaderSize(src, 64<<10)); err != nil {
		if errors.Is(err, errFileTooLarge) {
			return nil, &SetError{Path: path, Msg: fmt.Sprintf("larger than the limit of %d bytes", limits.MaxFileBytes)}
		}
		return nil, err
	}
	r.set.Hash = hex.EncodeToString(src.h.Sum(nil))
	return r.set, nil
}

// setSource hashes and counts what is read from the file, and stops past max bytes.
type setSource struct {
	r   io.Reader
	h   hash.Hash
	n   int64
	max int64
}

var errFileTooLarge = errors.New("prompt set file too large")

func (s *setSource) Read(p []byte) (int, error) {
	if s.n > s.max {
		return 0, errFileTooLarge
	}
	if rest := s.max + 1 - s.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := s.r.Read(p)
	s.h.Write(p[:n])
	s.n += int64(n)
	return n, err
}

// setReader holds one read's state.
type setReader struct {
	ctx    context.Context
	path   string
	limits SetLimits
	set    *PromptSet
	seen   map[string]bool // categories
}

func (r *setReader) errAt(line int, format string, args ...any) error {
	return &SetError{Path: r.path, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// add keeps an item, or refuses one more than the limit.
func (r *setReader) add(it SetItem) error {
	if len(r.set.Items) == r.limits.MaxItems {
		return r.errAt(it.Line, "more than %d prompts (the limit)", r.limits.MaxItems)
	}
	if len(r.set.Items)%1024 == 0 {
		if err := r.ctx.Err(); err != nil {
			return fmt.Errorf("%s: %w", r.path, err)
		}
	}
	if it.Category != "" && !r.seen[it.Category] {
		r.seen[it.Category] = true
		r.set.Categories = append(r.set.Categories, it.Category)
	}
	r.set.Items = append(r.set.Items, it)
	return nil
}

var utf8BOM = []byte("\xef\xbb\xbf")

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// read skips a byte order mark and the leading space, then reads in the format named or detected.
func (r *setReader) read(br *bufio.Reader) error {
	if b, _ := br.Peek(len(utf8BOM)); bytes.Equal(b, utf8BOM) {
		br.Discard(len(utf8BOM))
	}
	line := 1
	var first byte
	for blank := false; ; blank = true {
		c, err := br.ReadByte()
		if err == io.EOF {
			empty := "empty"
			if blank {
				empty = "blank"
			}
			if r.set.Format == FormatShareGPT {
				return r.errAt(line, "not JSON: the file is %s", empty)
			}
			return &SetError{Path: r.path, Msg: "no prompts: the file is " + empty}
		}
		if err != nil {
			return err
		}
		if c == '\n' {
			line++
		}
		if !isJSONSpace(c) {
			first = c
			br.UnreadByte()
			break
		}
	}
	if r.set.Format == "" {
		switch first {
		case '[':
			r.set.Format = FormatShareGPT
		case '{': // JSON Lines: the first object's keys tell which
		default:
			return r.errAt(line, "not a prompt set: the file starts with %q; want a JSON array (%s) or one JSON "+
				"object per line (%s, %s, %s)", string(first), FormatShareGPT, FormatOpenAI, FormatJSONL, FormatMTBench)
		}
	}
	if r.set.Format == FormatShareGPT {
		return r.readShareGPT(br, line)
	}
	return r.readLines(br, line)
}

// ---- JSON Lines: openai, jsonl, mtbench ----

// lineReader reads lines of at most max bytes (newline and a carriage return before it excluded).
type lineReader struct {
	r    *bufio.Reader
	max  int
	buf  []byte
	line int // of the line last returned
}

var errLineTooLong = errors.New("line too long")

func (l *lineReader) next() ([]byte, error) {
	l.buf = l.buf[:0]
	for {
		frag, err := l.r.ReadSlice('\n')
		if len(l.buf)+len(frag) > l.max+2 { // room for "\r\n"
			l.line++
			return nil, errLineTooLong
		}
		l.buf = append(l.buf, frag...)
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(l.buf) == 0:
			return nil, io.EOF
		case err != nil && err != io.EOF:
			return nil, err
		}
		l.line++
		b := bytes.TrimSuffix(l.buf, []byte("\n"))
		b = bytes.TrimSuffix(b, []byte("\r"))
		if len(b) > l.max {
			return nil, errLineTooLong
		}
		return b, nil
	}
}

func (r *setReader) readLines(br *bufio.Reader, line int) error {
	lr := &lineReader{r: br, max: r.limits.MaxLineBytes, line: line - 1}
	lines := 0
	for {
		b, err := lr.next()
		if err == io.EOF {
			break
		}
		if err == errLineTooLong {
			return r.errAt(lr.line, "a line of more than %d bytes (the limit)", r.limits.MaxLineBytes)
		}
		if err != nil {
			return err
		}
		if lines++; lines%1024 == 0 {
			if err := r.ctx.Err(); err != nil {
				return fmt.Errorf("%s: %w", r.path, err)
			}
		}
		i := 0
		for i < len(b) && isJSONSpace(b[i]) {
			i++
		}
		if i == len(b) {
			continue
		}
		it, err := r.parseLine(b, b[i])
		if err != nil {
			return r.errAt(lr.line, "%s", err.Error())
		}
		it.Line = lr.line
		if err := r.add(it); err != nil {
			return err
		}
	}
	if len(r.set.Items) == 0 { // not reached: a non-blank line is an item or an error
		return &SetError{Path: r.path, Msg: "no prompts"}
	}
	return nil
}

// rawJSON is a JSON value as it stands in the line (not copied: valid while the line is).
type rawJSON []byte

func (v *rawJSON) UnmarshalJSON(b []byte) error { *v = b; return nil }

func (v rawJSON) null() bool { return len(v) == 0 || v[0] == 'n' }

// kind names a JSON value's type for an error message.
func (v rawJSON) kind() string {
	switch {
	case len(v) == 0:
		return "nothing"
	case v[0] == '"':
		return "a string"
	case v[0] == '{':
		return "an object"
	case v[0] == '[':
		return "an array"
	case v[0] == 't' || v[0] == 'f':
		return "a boolean"
	case v[0] == 'n':
		return "null"
	}
	return "a number"
}

// text decodes a string value that must not be blank.
func (v rawJSON) text(field string) (string, error) {
	if len(v) == 0 || v[0] != '"' {
		return "", fmt.Errorf("%s: want a string, found %s", field, v.kind())
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("%s: %v", field, err)
	}
	if strings.TrimSpace(s) == "" {
		return "", fmt.Errorf("%s is empty", field)
	}
	return s, nil
}

// badJSON words a JSON error of one line, with the byte of the line where it is (from 1).
func badJSON(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		hint := ""
		if strings.Contains(se.Error(), "unexpected end") {
			hint = " (JSON Lines hold one whole object per line)"
		}
		return fmt.Errorf("bad JSON at byte %d: %v%s", se.Offset, se, hint)
	}
	return fmt.Errorf("bad JSON: %v", err)
}

// parseLine reads one line of a JSON Lines format (first: its first non-space byte); the first
// line decides the format when it was not named.
func (r *setReader) parseLine(b []byte, first byte) (SetItem, error) {
	var it SetItem
	switch {
	case first == '[':
		return it, errors.New("want one JSON object per line, found an array (a ShareGPT file is format sharegpt)")
	case first != '{' && !json.Valid(b):
		return it, badJSON(json.Unmarshal(b, new(any)))
	case first != '{':
		return it, fmt.Errorf("want one JSON object per line, found %s", rawJSON(bytes.TrimLeft(b, " \t")).kind())
	}
	var obj map[string]rawJSON
	if err := json.Unmarshal(b, &obj); err != nil {
		return it, badJSON(err)
	}
	if r.set.Format == "" {
		r.set.Format = detectLineFormat(obj)
		if r.set.Format == "" {
			keys := make([]string, 0, len(obj))
			for k := range obj {
				if len(k) > 40 {
					k = k[:40] + "..."
				}
				keys = append(keys, strconv.Quote(k))
			}
			slices.Sort(keys)
			if len(keys) > 8 {
				keys = append(keys[:8], "...")
			}
			return it, fmt.Errorf("cannot tell the format from the first object's keys (%s): want messages (%s), "+
				"turns (%s) or one of %s (%s), or name the format", strings.Join(keys, ", "), FormatOpenAI,
				FormatMTBench, strings.Join(promptFields, ", "), FormatJSONL)
		}
	}
	var err error
	switch r.set.Format {
	case FormatOpenAI:
		it.Turns, err = r.openAITurns(obj["messages"])
	case FormatMTBench:
		it.Turns, err = r.mtBenchTurns(obj["turns"])
	default:
		it.Turns, err = jsonlPrompt(obj)
	}
	if err != nil {
		return it, err
	}
	if c := obj["category"]; !c.null() {
		if c[0] != '"' {
			return it, fmt.Errorf("category: want a string, found %s", c.kind())
		}
		if err := json.Unmarshal(c, &it.Category); err != nil {
			return it, fmt.Errorf("category: %v", err)
		}
	}
	if m := obj["max_tokens"]; !m.null() {
		n, err := strconv.ParseInt(string(m), 10, 64)
		if err != nil || n < 1 || n > int64(r.limits.MaxTokens) {
			return it, fmt.Errorf("max_tokens: want a whole number from 1 to %d, found %s", r.limits.MaxTokens, clipJSON(m))
		}
		it.MaxTokens = int(n)
	}
	return it, nil
}

// clipJSON shows a value in an error message, cut to a few dozen bytes.
func clipJSON(v rawJSON) string {
	if len(v) > 40 {
		return string(v[:40]) + "..."
	}
	return string(v)
}

// detectLineFormat tells a JSON Lines format from an object's keys: messages, then turns, then a
// prompt field; "" when it has none of them.
func detectLineFormat(obj map[string]rawJSON) string {
	if _, ok := obj["messages"]; ok {
		return FormatOpenAI
	}
	if _, ok := obj["turns"]; ok {
		return FormatMTBench
	}
	for _, k := range promptFields {
		if _, ok := obj[k]; ok {
			return FormatJSONL
		}
	}
	return ""
}

func jsonlPrompt(obj map[string]rawJSON) ([]string, error) {
	for _, k := range promptFields {
		if v := obj[k]; !v.null() {
			s, err := v.text(k)
			if err != nil {
				return nil, err
			}
			return []string{s}, nil
		}
	}
	return nil, fmt.Errorf("no prompt: none of the fields %s", strings.Join(promptFields, ", "))
}

func (r *setReader) mtBenchTurns(v rawJSON) ([]string, error) {
	if v.null() {
		return nil, errors.New("no turns")
	}
	var turns []rawJSON
	if v[0] != '[' || json.Unmarshal(v, &turns) != nil {
		return nil, fmt.Errorf("turns: want an array of strings, found %s", v.kind())
	}
	if len(turns) == 0 {
		return nil, errors.New("turns is empty")
	}
	if len(turns) > r.limits.MaxTurns {
		return nil, fmt.Errorf("%d turns, more than the limit of %d", len(turns), r.limits.MaxTurns)
	}
	out := make([]string, len(turns))
	for i, t := range turns {
		s, err := t.text(fmt.Sprintf("turns[%d]", i))
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

func (r *setReader) openAITurns(v rawJSON) ([]string, error) {
	if v.null() {
		return nil, errors.New("no messages")
	}
	var msgs []map[string]rawJSON
	if v[0] != '[' {
		return nil, fmt.Errorf("messages: want an array, found %s", v.kind())
	}
	if err := json.Unmarshal(v, &msgs); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("messages: want an array of {role, content} objects, found %s in it", article(te.Value))
		}
		return nil, fmt.Errorf("messages: %v", err)
	}
	var turns []string
	for i, m := range msgs {
		role, err := m["role"].text(fmt.Sprintf("messages[%d].role", i))
		if m["role"].null() {
			err = fmt.Errorf("messages[%d]: no role", i)
		}
		if err != nil {
			return nil, err
		}
		if !slices.Contains(openAIRoles, role) {
			return nil, fmt.Errorf("messages[%d]: unknown role %q (want one of %s)", i, role, strings.Join(openAIRoles, ", "))
		}
		if role != "user" {
			continue
		}
		t, err := userContent(m["content"], fmt.Sprintf("messages[%d].content", i))
		if err != nil {
			return nil, err
		}
		if len(turns) == r.limits.MaxTurns {
			return nil, fmt.Errorf("more than %d user turns (the limit)", r.limits.MaxTurns)
		}
		turns = append(turns, t)
	}
	if len(turns) == 0 {
		return nil, fmt.Errorf("no user message among %d messages", len(msgs))
	}
	return turns, nil
}

// article puts a or an before a JSON type's name.
func article(typ string) string {
	if typ == "array" || typ == "object" {
		return "an " + typ
	}
	return "a " + typ
}

// userContent reads a user message's content: a string, or parts of which only text is read (joined
// by newlines).
func userContent(v rawJSON, field string) (string, error) {
	if v.null() {
		return "", fmt.Errorf("%s: a user message without content", field)
	}
	if v[0] == '"' {
		return v.text(field)
	}
	var parts []map[string]rawJSON
	if v[0] != '[' || json.Unmarshal(v, &parts) != nil {
		return "", fmt.Errorf("%s: want a string or an array of {type, text} parts, found %s", field, v.kind())
	}
	texts := make([]string, 0, len(parts))
	for i, p := range parts {
		pf := fmt.Sprintf("%s[%d]", field, i)
		typ, err := p["type"].text(pf + ".type")
		if err != nil {
			return "", err
		}
		if typ != "text" {
			return "", fmt.Errorf("%s: a part of type %q; only text parts are read", pf, typ)
		}
		s, err := p["text"].text(pf + ".text")
		if err != nil {
			return "", err
		}
		texts = append(texts, s)
	}
	if len(texts) == 0 {
		return "", fmt.Errorf("%s is empty", field)
	}
	return strings.Join(texts, "\n"), nil
}

// ---- ShareGPT: one JSON array, walked token by token ----

// decoderInput feeds the ShareGPT decoder: it counts the newlines handed over (so a line is
// known without keeping the bytes) and refuses to read more than max bytes past the last token.
type decoderInput struct {
	r        io.Reader
	newlines int   // in every byte read
	lastNL   int   // newlines before the last non-space byte read
	read     int64 // bytes read
	floor    int64 // the decoder's offset after its last token
	max      int64
}

var errValueTooLarge = errors.New("JSON value too large")

func (d *decoderInput) Read(p []byte) (int, error) {
	if d.read-d.floor > d.max {
		return 0, errValueTooLarge
	}
	n, err := d.r.Read(p)
	b := p[:n]
	if i := bytes.LastIndexFunc(b, func(c rune) bool { return c >= 0x80 || !isJSONSpace(byte(c)) }); i >= 0 {
		d.lastNL = d.newlines + bytes.Count(b[:i], []byte{'\n'})
	}
	d.newlines += bytes.Count(b, []byte{'\n'})
	d.read += int64(n)
	return n, err
}

// newlineCounter counts the newlines written to it.
type newlineCounter int

func (c *newlineCounter) Write(p []byte) (int, error) {
	*c += newlineCounter(bytes.Count(p, []byte{'\n'}))
	return len(p), nil
}

// sharegptWalker reads the array's tokens and knows the line of each.
type sharegptWalker struct {
	r     *setReader
	dec   *json.Decoder
	in    *decoderInput
	line0 int // the line of the decoder's first byte
}

func (w *sharegptWalker) token() (json.Token, error) {
	t, err := w.dec.Token()
	w.in.floor = w.dec.InputOffset()
	return t, err
}

// line is the line of the decoder's position: the newlines read, less those it holds unread.
func (w *sharegptWalker) line() int {
	var n newlineCounter
	io.Copy(&n, w.dec.Buffered())
	return w.line0 + w.in.newlines - int(n)
}

// fail words an error of the decoder (or of the reads under it) at its line, after at (a format).
func (w *sharegptWalker) fail(err error, at string, args ...any) error {
	where := fmt.Sprintf(at, args...)
	if where != "" {
		where += ": "
	}
	switch {
	case errors.Is(err, errFileTooLarge) || errors.As(err, new(*fs.PathError)):
		return err // the file's own
	case errors.Is(err, errValueTooLarge):
		return w.r.errAt(w.line(), "%sa JSON value of more than %d bytes (the limit)", where, w.r.limits.MaxLineBytes)
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return w.r.errAt(w.line0+w.in.lastNL, "%sunexpected end of file", where)
	}
	return w.r.errAt(w.line(), "%s%v", where, err)
}

// describe names a token for an error message.
func describe(t json.Token) string {
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
		return fmt.Sprintf("%q", string(t))
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "a number"
}

// skip passes over the rest of a value whose first token was t.
func (w *sharegptWalker) skip(t json.Token, at string, args ...any) error {
	if d, ok := t.(json.Delim); !ok || (d != '{' && d != '[') {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := w.token()
		if err != nil {
			return w.fail(err, at, args...)
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			if depth++; depth > maxNesting {
				return w.r.errAt(w.line(), "%s: nested more than %d deep", fmt.Sprintf(at, args...), maxNesting)
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// readShareGPT reads a ShareGPT array: each entry's first human (or user) turn is an item; an
// entry without one, or whose first such turn is blank, gives none.
func (r *setReader) readShareGPT(br *bufio.Reader, line int) error {
	in := &decoderInput{r: br, max: int64(r.limits.MaxLineBytes)}
	w := &sharegptWalker{r: r, dec: json.NewDecoder(in), in: in, line0: line}
	w.dec.UseNumber() // a number is skipped as text: 1e999 is no error
	t, err := w.token()
	if se := (*json.SyntaxError)(nil); errors.As(err, &se) {
		return r.errAt(line, "not JSON: %v", se)
	}
	if err != nil {
		return w.fail(err, "")
	}
	if t != json.Delim('[') {
		return r.errAt(line, "want a JSON array of conversations, found %s", describe(t))
	}
	entries := 0
	for w.dec.More() {
		if err := r.shareGPTEntry(w, entries); err != nil {
			return err
		}
		if entries++; entries%1024 == 0 {
			if err := r.ctx.Err(); err != nil {
				return fmt.Errorf("%s: %w", r.path, err)
			}
		}
	}
	if _, err := w.token(); err != nil { // the closing bracket
		return w.fail(err, "entry %d", entries)
	}
	switch _, err := w.token(); {
	case err == io.EOF:
	case err == nil, errors.As(err, new(*json.SyntaxError)):
		return r.errAt(w.line(), "trailing data after the JSON array")
	default:
		return w.fail(err, "after the JSON array")
	}
	if len(r.set.Items) == 0 {
		return &SetError{Path: r.path, Msg: fmt.Sprintf("no prompts: no conversation with a non-empty human turn "+
			"among %d entries", entries)}
	}
	return nil
}

func (r *setReader) shareGPTEntry(w *sharegptWalker, entry int) error {
	t, err := w.token()
	if err != nil {
		return w.fail(err, "entry %d", entry)
	}
	line := w.line() // after the token: before it, the decoder may not have passed the comma
	if t != json.Delim('{') {
		return r.errAt(line, "entry %d: want an object {\"conversations\": [...]}, found %s", entry, describe(t))
	}
	var prompt string
	found := false
	for w.dec.More() {
		k, err := w.token()
		if err != nil {
			return w.fail(err, "entry %d", entry)
		}
		t, err := w.token()
		if err != nil {
			return w.fail(err, "entry %d: %s", entry, k)
		}
		if k != "conversations" {
			if err := w.skip(t, "entry %d: %s", entry, k); err != nil {
				return err
			}
			continue
		}
		if t == nil {
			continue
		}
		if t != json.Delim('[') {
			return r.errAt(w.line(), "entry %d: conversations: want an array, found %s", entry, describe(t))
		}
		for turn := 0; w.dec.More(); turn++ {
			from, value, err := r.shareGPTTurn(w, entry, turn)
			if err != nil {
				return err
			}
			if !found && (from == "human" || from == "user") {
				found, prompt = true, value
			}
		}
		if _, err := w.token(); err != nil {
			return w.fail(err, "entry %d: conversations", entry)
		}
	}
	if _, err := w.token(); err != nil {
		return w.fail(err, "entry %d", entry)
	}
	if !found || strings.TrimSpace(prompt) == "" {
		return nil
	}
	return r.add(SetItem{Turns: []string{prompt}, Line: line})
}

// shareGPTTurn reads one turn {"from", "value"} (null: no turn); other fields are skipped.
func (r *setReader) shareGPTTurn(w *sharegptWalker, entry, turn int) (from, value string, err error) {
	ctx := fmt.Sprintf("entry %d: conversations[%d]", entry, turn)
	t, err := w.token()
	if err != nil {
		return "", "", w.fail(err, "%s", ctx)
	}
	if t == nil {
		return "", "", nil
	}
	if t != json.Delim('{') {
		return "", "", r.errAt(w.line(), "%s: want an object {from, value}, found %s", ctx, describe(t))
	}
	for w.dec.More() {
		k, err := w.token()
		if err != nil {
			return "", "", w.fail(err, "%s", ctx)
		}
		t, err := w.token()
		if err != nil {
			return "", "", w.fail(err, "%s.%s", ctx, k)
		}
		switch k {
		case "from", "value":
			s, ok := t.(string)
			if !ok && t != nil {
				return "", "", r.errAt(w.line(), "%s.%s: want a string, found %s", ctx, k, describe(t))
			}
			if k == "from" {
				from = s
			} else {
				value = s
			}
		default:
			if err := w.skip(t, "%s.%s", ctx, k); err != nil {
				return "", "", err
			}
		}
	}
	if _, err := w.token(); err != nil {
		return "", "", w.fail(err, "%s", ctx)
	}
	return from, value, nil
}
