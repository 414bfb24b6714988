package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/specsweep/specsweep/internal/textdist"
)

// A profile file (SGLANGSIM_PROFILE=/path/profile.json) is one JSON object
// whose fields are Profile's json tags. Decoding is strict: unknown fields,
// duplicate or null fields, values of the wrong type and trailing data are
// errors; then Validate checks the ranges. docs/sglangsim.md lists every
// field with its unit and default.

// profileDefaults returns the values a profile file's omitted optional
// fields take. It is the one declaration of those defaults (docs/sglangsim.md
// lists them); fields not set here default to zero, which for a cost, a
// memory share or a table means "none".
func profileDefaults() Profile {
	return Profile{
		ModelType:    "llama",
		Architecture: "LlamaForCausalLM",
		TPExp:        0.8,
		TopKBeta:     0.7,
		TempAlpha:    1.5,
		// Content: code's odds x2 and prose's x0.2 put prose 1.23x below neutral and code 1.27x
		// above prose at EAGLE-3 steps 3 on the default profile (SPEED-Bench, EAGLE-3's head).
		ContentCode:  2,
		ContentProse: 0.2,
		// Context: odds x0.2 from 32K prompt tokens on, the decay of vLLM issue 47602.
		CtxKnee:       4096,
		CtxFull:       32768,
		CtxFloor:      0.2,
		ActGB:         2,
		GraphBaseGB:   1,
		GraphPerTokGB: 0.003,
		NaturalLen:    600,
	}
}

// requiredProfileFields are the fields a profile file must give.
var requiredProfileFields = [...]string{"name", "context_len", "ref_tp", "t0", "per_token", "accept", "weights_gb", "kv_bytes_per_token"}

// ProfileError is what is wrong with a profile: the file (or, for a built-in
// one, its name), the field (a JSON path such as accept.EAGLE3[2]; a
// position "line L, col C" for a syntax error; "" for the whole file) and
// the message.
type ProfileError struct {
	File, Field, Msg string
}

func (e *ProfileError) Error() string {
	var b strings.Builder
	b.WriteString("profile ")
	b.WriteString(e.File)
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// IsProfilePath reports whether an SGLANGSIM_PROFILE value names a file
// rather than a built-in profile: it holds a "/" or ends in ".json".
func IsProfilePath(v string) bool {
	return strings.Contains(v, "/") || strings.HasSuffix(v, ".json")
}

// LoadProfile reads, decodes and validates the profile file at path and
// returns a new Profile (its Source is path). Every error is a
// *ProfileError naming the file and the field.
func LoadProfile(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &ProfileError{File: path, Msg: err.Error()}
	}
	p, err := parseProfile(path, data)
	if err != nil {
		return nil, err
	}
	p.Source = path
	return p, nil
}

// parseProfile decodes and validates the content of the profile file named
// file (for the errors).
func parseProfile(file string, data []byte) (*Profile, error) {
	p, err := decodeProfile(data)
	if err != nil {
		var pe *ProfileError
		if errors.As(err, &pe) {
			pe.File = file
		}
		return nil, err
	}
	return p, nil
}

func decodeProfile(data []byte) (*Profile, error) {
	p := profileDefaults()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, decodeError(data, err)
	}
	if off := skipSpace(data, dec.InputOffset()); off < int64(len(data)) {
		return nil, &ProfileError{Field: position(data, off), Msg: "trailing data after the profile object"}
	}
	if err := checkKeys(data); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// profileFields lists the json names of Profile's fields, in order.
func profileFields() []string {
	t := reflect.TypeFor[Profile]()
	var out []string
	for i := range t.NumField() {
		if n, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); n != "" && n != "-" {
			out = append(out, n)
		}
	}
	return out
}

func decodeError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return &ProfileError{Msg: "empty file, want a JSON object"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &ProfileError{Msg: "unexpected end of file (an object or list is not closed)"}
	case errors.As(err, &se):
		return &ProfileError{Field: position(data, se.Offset-1), Msg: se.Error()}
	case errors.As(err, &te):
		field := pathAt(data, te.Offset)
		if field == "" {
			return &ProfileError{Msg: fmt.Sprintf("got %s, want a JSON object", te.Value)}
		}
		return &ProfileError{Field: field, Msg: fmt.Sprintf("got %s, want %s", te.Value, typeWord(te.Type))}
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, uerr := strconv.Unquote(f)
		if uerr != nil {
			name = f
		}
		return &ProfileError{Field: name, Msg: unknownField(name)}
	}
	return &ProfileError{Msg: err.Error()}
}

// unknownField words an unknown field: the nearest known name when one is
// close (an edit distance of at most 2), else the list of known ones.
func unknownField(name string) string {
	best, bestD := "", 3
	for _, f := range profileFields() {
		if d := textdist.Distance(strings.ToLower(name), f); d < bestD {
			best, bestD = f, d
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown field; did you mean %q?", best)
	}
	return "unknown field (known: " + strings.Join(profileFields(), ", ") + ")"
}

func typeWord(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Float64:
		return "a number"
	case reflect.Int:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list of " + strings.TrimPrefix(strings.TrimPrefix(typeWord(t.Elem()), "a "), "an ") + "s"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// checkKeys walks the top-level object: a field name not spelt exactly as
// its tag (encoding/json matches names ignoring case), a field given twice
// or as null (the decoder would keep the last one, or the default) and a
// required field left out are errors.
func checkKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // '{', checked by the decode
		return &ProfileError{Msg: err.Error()}
	}
	known := map[string]bool{}
	for _, f := range profileFields() {
		known[f] = true
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return &ProfileError{Msg: err.Error()}
		}
		key, _ := tok.(string)
		if !known[key] { // encoding/json matched it ignoring case
			return &ProfileError{Field: key, Msg: fmt.Sprintf("unknown field (field names are lower case: %q)", strings.ToLower(key))}
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return &ProfileError{Field: key, Msg: err.Error()}
		}
		if seen[key] {
			return &ProfileError{Field: key, Msg: "given twice"}
		}
		seen[key] = true
		if string(raw) == "null" {
			return &ProfileError{Field: key, Msg: "null; give a value or leave the field out"}
		}
	}
	for _, k := range requiredProfileFields {
		if !seen[k] {
			return &ProfileError{Field: k, Msg: "required field missing"}
		}
	}
	return nil
}

// pathAt returns the JSON path (a.b[2]) of the value whose first token ends
// at byte offset off: where encoding/json reports a type error.
func pathAt(data []byte, off int64) string {
	type frame struct {
		obj     bool
		key     string
		idx     int
		wantKey bool
	}
	var st []frame
	path := func() string {
		var b strings.Builder
		for _, f := range st {
			if f.obj {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			} else {
				fmt.Fprintf(&b, "[%d]", f.idx)
			}
		}
		return b.String()
	}
	next := func() { // a value of the innermost container ended
		if n := len(st); n > 0 {
			if st[n-1].obj {
				st[n-1].wantKey = true
			} else {
				st[n-1].idx++
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return path()
		}
		d, isDelim := tok.(json.Delim)
		if n := len(st); n > 0 && st[n-1].obj && st[n-1].wantKey {
			if isDelim && d == '}' {
				st = st[:n-1]
				next()
				continue
			}
			st[n-1].key, st[n-1].wantKey = fmt.Sprint(tok), false
			continue
		}
		if isDelim && d == ']' {
			st = st[:len(st)-1]
			next()
			continue
		}
		if dec.InputOffset() >= off {
			return path()
		}
		switch {
		case isDelim && d == '{':
			st = append(st, frame{obj: true, wantKey: true})
		case isDelim && d == '[':
			st = append(st, frame{})
		default:
			next()
		}
	}
}

func skipSpace(data []byte, off int64) int64 {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n", data[off]) >= 0 {
		off++
	}
	return off
}

// position is "line L, col C" (1-based) of byte offset off.
func position(data []byte, off int64) string {
	off = max(0, min(off, int64(len(data))))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(data[:off], '\n'))
	return fmt.Sprintf("line %d, col %d", line, col)
}

// Validate checks a profile's ranges (built-in or decoded from a file) and
// returns the first problem as a *ProfileError naming the field by its json
// name (File is the profile's name; LoadProfile puts the file there).
func (p *Profile) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ProfileError{File: p.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	if strings.TrimSpace(p.Name) == "" {
		return bad("name", "empty")
	}
	for i, m := range p.Match {
		if m == "" || m != strings.ToLower(m) {
			return bad(fmt.Sprintf("match[%d]", i), "%q is not a non-empty lower-case substring", m)
		}
	}
	if p.ModelType == "" {
		return bad("model_type", "empty")
	}
	if p.Architecture == "" {
		return bad("architecture", "empty")
	}
	if p.ContextLen < 1 {
		return bad("context_len", "%d is not a token count >= 1", p.ContextLen)
	}
	if p.RefTP < 1 {
		return bad("ref_tp", "%d is not a GPU count >= 1", p.RefTP)
	}
	if p.TPExp < 0 || p.TPExp > 2 {
		return bad("tp_exp", "%s is not an exponent in [0, 2]", num(p.TPExp))
	}
	if !(p.T0 > 0) {
		return bad("t0", "%s is not a time > 0 (ms)", num(p.T0))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"per_token", p.PerToken}, {"per_kctx", p.PerKCtx}, {"draft_fixed", p.DraftFixed}, {"draft_step", p.DraftStep},
		{"draft_per_tok", p.DraftPerTok}, {"prefill_fixed", p.PrefillFixed}, {"prefill_per_k", p.PrefillPerK},
	} {
		if f.v < 0 {
			return bad(f.name, "%s is not a time >= 0 (ms)", num(f.v))
		}
	}
	for i, v := range p.StepsExtraMs {
		if v < 0 {
			return bad(fmt.Sprintf("steps_extra_ms[%d]", i), "%s is not a time >= 0 (ms)", num(v))
		}
	}
	if len(p.Accept) == 0 {
		return bad("accept", "no algorithm; give at least one table, e.g. \"EAGLE3\": [0.8, 0.7]")
	}
	for _, k := range sortedKeys(p.Accept) {
		if err := algoKeyError(k); err != "" {
			return bad("accept", "%s", err)
		}
		if len(p.Accept[k]) == 0 {
			return bad("accept."+k, "empty table; give the acceptance of draft position 1 at least")
		}
		for i, v := range p.Accept[k] {
			if v < 0 || v > 1 {
				return bad(fmt.Sprintf("accept.%s[%d]", k, i), "%s is not a probability in [0, 1]", num(v))
			}
		}
	}
	if p.TopKBeta < 0 {
		return bad("topk_beta", "%s is not an exponent >= 0", num(p.TopKBeta))
	}
	if p.TempAlpha < 0 {
		return bad("temp_alpha", "%s is not a rate >= 0", num(p.TempAlpha))
	}
	if !(p.ContentCode >= 1) || math.IsInf(p.ContentCode, 0) {
		return bad("content_code", "%s is not a factor >= 1 (code-like text accepts at least as much as neutral text)", num(p.ContentCode))
	}
	if !(p.ContentProse > 0 && p.ContentProse <= 1) {
		return bad("content_prose", "%s is not a factor in (0, 1] (prose-like text accepts at most as much as neutral text)", num(p.ContentProse))
	}
	if p.CtxKnee < 1 {
		return bad("ctx_knee", "%d is not a token count >= 1", p.CtxKnee)
	}
	if p.CtxFull <= p.CtxKnee {
		return bad("ctx_full", "%d is not a token count above ctx_knee (%d)", p.CtxFull, p.CtxKnee)
	}
	if !(p.CtxFloor > 0 && p.CtxFloor <= 1) {
		return bad("ctx_floor", "%s is not a factor in (0, 1]", num(p.CtxFloor))
	}
	if p.Noise < 0 || p.Noise >= 0.5 {
		return bad("noise", "%s is not a relative standard deviation in [0, 0.5)", num(p.Noise))
	}
	if !(p.WeightsGB > 0) {
		return bad("weights_gb", "%s is not a size > 0 (GB)", num(p.WeightsGB))
	}
	for _, k := range sortedKeys(p.DraftGB) {
		if err := algoKeyError(k); err != "" {
			return bad("draft_gb", "%s", err)
		}
		if v := p.DraftGB[k]; v < 0 {
			return bad("draft_gb."+k, "%s is not a size >= 0 (GB)", num(v))
		}
	}
	if !(p.KVBytesPerToken > 0) {
		return bad("kv_bytes_per_token", "%s is not a size > 0 (bytes)", num(p.KVBytesPerToken))
	}
	for _, f := range []struct {
		name, unit string
		v          float64
	}{
		{"state_mb_per_req", "MB", p.StateMBPerReq}, {"act_gb", "GB", p.ActGB}, {"graph_base_gb", "GB", p.GraphBaseGB},
		{"graph_per_tok_gb", "GB", p.GraphPerTokGB},
	} {
		if f.v < 0 {
			return bad(f.name, "%s is not a size >= 0 (%s)", num(f.v), f.unit)
		}
	}
	if p.NaturalLen < 1 {
		return bad("natural_len", "%d is not a token count >= 1", p.NaturalLen)
	}
	return nil
}

// algoKeyError says what is wrong with an algorithm name used as a key of
// accept or draft_gb ("" if nothing): the model looks tables up by the
// effective algorithm, upper case, NEXTN resolved to EAGLE, DSPARK to DFLASH.
func algoKeyError(k string) string {
	switch {
	case k == "" || k != strings.ToUpper(k) || strings.ContainsAny(k, " \t.[]\""):
		return fmt.Sprintf("%q is not an algorithm name (upper case, as --speculative-algorithm resolves it: EAGLE, EAGLE3, STANDALONE, NGRAM, DFLASH or a plugin's name)", k)
	case k == "NEXTN":
		return `"NEXTN" runs as EAGLE: give its table as "EAGLE"`
	case k == "DSPARK":
		return `"DSPARK" uses the DFLASH table: give it as "DFLASH"`
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
