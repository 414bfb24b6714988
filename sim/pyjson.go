package sim

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file reads a JSON file as SGLang does (open(path) then json.load, Python 3.12's C scanner)
// so that a bad --speculative-adaptive-config fails with Python's own message: its positions count
// characters, it takes NaN and Infinity, keeps the order of an object's keys (the last of a repeated
// key wins, in the first one's place) and tells ints from floats.

// pyDict is a Python dict decoded from a JSON object.
type pyDict struct {
	keys []string
	vals map[string]any
}

func (d *pyDict) get(k string) (any, bool) { v, ok := d.vals[k]; return v, ok }

// pyBigInt is an integer beyond int64: its decimal digits.
type pyBigInt string

// pyExc is a Python exception: its type as Python prints it and its message.
type pyExc struct{ Type, Msg string }

func (e *pyExc) Error() string { return e.Type + ": " + e.Msg }

// pyLoadJSON is json.load of a text file's bytes (UTF-8, as open() decodes it).
func pyLoadJSON(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, utf8Error(data)
	}
	s := []rune(string(data))
	if len(s) > 0 && s[0] == '\ufeff' {
		return nil, jsonErr("Unexpected UTF-8 BOM (decode using utf-8-sig)", s, 0)
	}
	p := &pyScanner{s: s}
	idx := p.ws(0)
	v, end, err := p.value(idx)
	if err != nil {
		return nil, err
	}
	if end = p.ws(end); end != len(s) {
		return nil, jsonErr("Extra data", s, end)
	}
	return v, nil
}

// utf8Error is the UnicodeDecodeError of reading data as UTF-8 text.
func utf8Error(data []byte) error {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r != utf8.RuneError || n > 1 {
			i += n
			continue
		}
		why := "invalid start byte"
		if b := data[i]; b >= 0xc2 && b <= 0xf4 {
			need := 2
			if b >= 0xf0 {
				need = 4
			} else if b >= 0xe0 {
				need = 3
			}
			why = "invalid continuation byte"
			for k := 1; k < need; k++ {
				if i+k >= len(data) {
					why = "unexpected end of data"
					break
				}
				if data[i+k]&0xc0 != 0x80 {
					break
				}
			}
		}
		return &pyExc{"UnicodeDecodeError", fmt.Sprintf("'utf-8' codec can't decode byte 0x%02x in position %d: %s", data[i], i, why)}
	}
	return nil
}

// jsonErr is json.decoder.JSONDecodeError(msg, doc, pos).
func jsonErr(msg string, s []rune, pos int) error {
	line, col := 1, pos+1
	for i := 0; i < pos && i < len(s); i++ {
		if s[i] == '\n' {
			line, col = line+1, pos-i
		}
	}
	return &pyExc{"json.decoder.JSONDecodeError", fmt.Sprintf("%s: line %d column %d (char %d)", msg, line, col, pos)}
}

type pyScanner struct{ s []rune }

func (p *pyScanner) ws(i int) int {
	for i < len(p.s) && (p.s[i] == ' ' || p.s[i] == '\t' || p.s[i] == '\n' || p.s[i] == '\r') {
		i++
	}
	return i
}

func (p *pyScanner) has(i int, lit string) bool {
	r := []rune(lit)
	if i+len(r) > len(p.s) {
		return false
	}
	for k := range r {
		if p.s[i+k] != r[k] {
			return false
		}
	}
	return true
}

// value scans one value at i (scan_once); "Expecting value" when there is none.
func (p *pyScanner) value(i int) (any, int, error) {
	if i >= len(p.s) {
		return nil, i, jsonErr("Expecting value", p.s, i)
	}
	switch c := p.s[i]; {
	case c == '"':
		return p.str(i + 1)
	case c == '{':
		return p.object(i + 1)
	case c == '[':
		return p.array(i + 1)
	case p.has(i, "null"):
		return nil, i + 4, nil
	case p.has(i, "true"):
		return true, i + 4, nil
	case p.has(i, "false"):
		return false, i + 5, nil
	case p.has(i, "NaN"):
		return math.NaN(), i + 3, nil
	case p.has(i, "Infinity"):
		return math.Inf(1), i + 8, nil
	case p.has(i, "-Infinity"):
		return math.Inf(-1), i + 9, nil
	}
	return p.number(i)
}

// number matches -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?: an int without a fraction or exponent.
func (p *pyScanner) number(i int) (any, int, error) {
	s, j := p.s, i
	digit := func(k int) bool { return k < len(s) && s[k] >= '0' && s[k] <= '9' }
	if j < len(s) && s[j] == '-' {
		j++
	}
	switch {
	case digit(j) && s[j] == '0':
		j++
	case digit(j):
		for digit(j) {
			j++
		}
	default:
		return nil, i, jsonErr("Expecting value", s, i)
	}
	isFloat := false
	if j < len(s) && s[j] == '.' && digit(j+1) {
		isFloat = true
		for j++; digit(j); j++ {
		}
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if digit(k) {
			isFloat = true
			for j = k; digit(j); j++ {
			}
		}
	}
	text := string(s[i:j])
	if isFloat {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, i, jsonErr("Expecting value", s, i)
		}
		return f, j, nil
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return n, j, nil
	}
	return pyBigInt(text), j, nil
}

// str scans a string whose opening quote is at i-1 (scanstring, strict).
func (p *pyScanner) str(i int) (any, int, error) {
	s, begin := p.s, i-1
	var b strings.Builder
	for {
		if i >= len(s) {
			return nil, i, jsonErr("Unterminated string starting at", s, begin)
		}
		c := s[i]
		switch {
		case c == '"':
			return b.String(), i + 1, nil
		case c < 0x20:
			return nil, i, jsonErr("Invalid control character at", s, i)
		case c != '\\':
			b.WriteRune(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return nil, i, jsonErr("Unterminated string starting at", s, begin)
		}
		esc := s[i+1]
		if r, ok := map[rune]rune{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}[esc]; ok {
			b.WriteRune(r)
			i += 2
			continue
		}
		if esc != 'u' {
			return nil, i, jsonErr(`Invalid \escape`, s, i)
		}
		u, ok := p.hex4(i + 2)
		if !ok {
			return nil, i, jsonErr(`Invalid \uXXXX escape`, s, i+1)
		}
		i += 6
		if utf16IsHigh(u) && i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
			if lo, ok := p.hex4(i + 2); ok && lo >= 0xdc00 && lo <= 0xdfff {
				u = 0x10000 + (u-0xd800)<<10 + (lo - 0xdc00)
				i += 6
			}
		}
		b.WriteRune(u)
	}
}

func utf16IsHigh(r rune) bool { return r >= 0xd800 && r <= 0xdbff }

func (p *pyScanner) hex4(i int) (rune, bool) {
	if i+4 > len(p.s) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(p.s[i:i+4]), 16, 32)
	return rune(n), err == nil
}

func (p *pyScanner) object(i int) (any, int, error) {
	s := p.s
	d := &pyDict{vals: map[string]any{}}
	i = p.ws(i)
	if i < len(s) && s[i] == '}' {
		return d, i + 1, nil
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return nil, i, jsonErr("Expecting property name enclosed in double quotes", s, i)
		}
		k, j, err := p.str(i + 1)
		if err != nil {
			return nil, j, err
		}
		i = p.ws(j)
		if i >= len(s) || s[i] != ':' {
			return nil, i, jsonErr("Expecting ':' delimiter", s, i)
		}
		v, j2, err := p.value(p.ws(i + 1))
		if err != nil {
			return nil, j2, err
		}
		key := k.(string)
		if _, dup := d.vals[key]; !dup {
			d.keys = append(d.keys, key)
		}
		d.vals[key] = v
		i = p.ws(j2)
		if i < len(s) && s[i] == '}' {
			return d, i + 1, nil
		}
		if i >= len(s) || s[i] != ',' {
			return nil, i, jsonErr("Expecting ',' delimiter", s, i)
		}
		i = p.ws(i + 1)
	}
}

func (p *pyScanner) array(i int) (any, int, error) {
	s := p.s
	out := []any{}
	i = p.ws(i)
	if i < len(s) && s[i] == ']' {
		return out, i + 1, nil
	}
	for {
		v, j, err := p.value(i)
		if err != nil {
			return nil, j, err
		}
		out = append(out, v)
		i = p.ws(j)
		if i < len(s) && s[i] == ']' {
			return out, i + 1, nil
		}
		if i >= len(s) || s[i] != ',' {
			return nil, i, jsonErr("Expecting ',' delimiter", s, i)
		}
		i = p.ws(i + 1)
	}
}

// pyTypeName is type(v).__name__ of a decoded value.
func pyTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64, pyBigInt:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case *pyDict:
		return "dict"
	}
	return fmt.Sprintf("%T", v)
}

// pyValueRepr is repr(v) of a decoded value.
func pyValueRepr(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		return pyBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case pyBigInt:
		return string(x)
	case float64:
		return pyFloatRepr(x)
	case string:
		return pyStrRepr(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyValueRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *pyDict:
		parts := make([]string, len(x.keys))
		for i, k := range x.keys {
			parts[i] = pyStrRepr(k) + ": " + pyValueRepr(x.vals[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

// pyFloatRepr is repr(float): the shortest round-trip digits, fixed notation for
// exponents from -4 to 15 (with ".0" when whole), else d.ddde+XX.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	x, _ := strconv.Atoi(exp)
	if x < -4 || x >= 16 {
		sign := "+"
		if x < 0 {
			sign, x = "-", -x
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, x)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// pyStrRepr is repr(str): single quotes unless the text holds one and no double quote.
func pyStrRepr(s string) string {
	q := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = '"'
	}
	b := []byte{q}
	for _, r := range s {
		switch {
		case r == '\\':
			b = append(b, `\\`...)
		case r == rune(q):
			b = append(b, '\\', q)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			b = fmt.Appendf(b, `\x%02x`, r)
		case !unicode.IsPrint(r) && r > 0xffff:
			b = fmt.Appendf(b, `\U%08x`, r)
		case !unicode.IsPrint(r):
			b = fmt.Appendf(b, `\u%04x`, r)
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return string(append(b, q))
}
