package sweep

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/specsweep/specsweep/internal/textdist"
)

// Load reads the spec file at path and parses it (see Parse).
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load spec: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes a spec, applies defaults and validates it. file names the
// spec in error positions. On any problem it returns a nil Spec and an
// ErrorList holding every problem found, sorted by position.
func Parse(file string, data []byte) (*Spec, error) {
	p := &parser{file: file}
	if l := p.limit(LimitSpecBytes); int64(len(data)) > l.Max {
		return nil, ErrorList{{File: file, Line: 1, Col: 1, Msg: fmt.Sprintf("spec: %d bytes, above the limit %d (%s)", len(data), l.Max, l.Why)}}
	}
	root, yerr := decodeYAML(file, data)
	if yerr != nil {
		return nil, ErrorList{yerr}
	}
	s := p.spec(root)
	p.crossCheck(s)
	if len(p.errs) == 0 {
		p.planCheck(s)
	}
	if len(p.errs) > 0 {
		p.errs.sort()
		return nil, p.errs
	}
	p.repeatCheck(s)
	p.warns.sort()
	s.Warnings = p.warns
	s.File = file
	s.Source = bytes.Clone(data)
	return s, nil
}

// yamlLine finds the line number yaml.v3 puts in its syntax errors (it does
// not expose the column).
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// decodeYAML parses exactly one YAML document into a node tree.
func decodeYAML(file string, data []byte) (root *yaml.Node, e *Error) {
	defer func() {
		// The YAML library has panicked on malformed input in the past; a spec
		// file must never crash the CLI or the daemon.
		if r := recover(); r != nil {
			root, e = nil, &Error{File: file, Line: 1, Col: 1, Msg: fmt.Sprintf("YAML: cannot parse the spec: %v", r)}
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: file, Line: 1, Col: 1, Msg: "empty spec: expected a mapping with version, name, hosts, server, methods, matrix and workload"}
		}
		return nil, syntaxError(file, err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, syntaxError(file, err)
	default:
		line, col := max(extra.Line, 1), max(extra.Column, 1)
		return nil, &Error{File: file, Line: line, Col: col, Msg: "a spec file holds one YAML document; found a second one (---)"}
	}
	return &doc, nil
}

func syntaxError(file string, err error) *Error {
	msg := err.Error()
	line := 1
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil && n > 0 {
			line = n
		}
		msg = msg[len(m[0]):]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	return &Error{File: file, Line: line, Col: 1, Msg: "YAML syntax error: " + msg}
}

// parser walks the node tree, filling a Spec and collecting every problem
// instead of stopping at the first.
type parser struct {
	file string
	errs ErrorList

	// Nodes and facts kept for checks that span sections, since keys may come
	// in any order.
	cmd0       *yaml.Node // server.command[0]
	matrixNode *yaml.Node
	methodRefs []ref        // parallel to Matrix.Methods
	ownLists   []ownList    // methods with their own num_steps, topk or num_draft_tokens
	tpRefs     []*yaml.Node // parallel to Matrix.TP when tp is given
	matrixKeys map[string]bool
	searchNode *yaml.Node
	watchNode  *yaml.Node   // the watch block, for its cross-checks
	probeRefs  []*yaml.Node // parallel to Search.Probe
	hostsOK    bool         // every host decoded cleanly: GPU counts and drivers are known
	methodsOK  bool         // methods is a mapping: its names are known
	// The nodes of server.args and of each method's args (parallel to the lists), for warnings.
	serverArgNodes []*yaml.Node
	methodArgNodes map[string]argNodes
	warns          ErrorList

	limits map[string]Limit // Limits by key, built on first use
}

// ref is a list item's node and its index in the YAML list.
// ownList is a method that gives itself matrix lists, where it does.
type ownList struct {
	name string
	node *yaml.Node
}

type ref struct {
	node  *yaml.Node
	index int
}

func (p *parser) errf(n *yaml.Node, format string, args ...any) {
	line, col := 1, 1
	if n != nil && n.Line > 0 {
		line, col = n.Line, n.Column
	}
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)})
}

// warnf records a warning: the spec is valid, but may not do what it reads as.
func (p *parser) warnf(n *yaml.Node, format string, args ...any) {
	line, col := 1, 1
	if n != nil && n.Line > 0 {
		line, col = n.Line, n.Column
	}
	p.warns = append(p.warns, &Error{File: p.file, Line: line, Col: col, Msg: "warning: " + fmt.Sprintf(format, args...)})
}

// resolve follows an alias (*name) to the anchored node.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 8; i++ {
		n = n.Alias
	}
	return n
}

// describe names a node's kind and value for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!int", "!!float":
			return "the number " + clip(n.Value)
		case "!!bool":
			return "the boolean " + clip(n.Value)
		}
		return strconv.Quote(clip(n.Value))
	}
	return "an unexpected node"
}

// clip shortens a value quoted in a message.
func clip(s string) string {
	const max = 60
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

func where(path string) string {
	if path == "" {
		return "at top level"
	}
	return "in " + path
}

func label(path string) string {
	if path == "" {
		return "spec"
	}
	return path
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// field is one key of a mapping with a fixed schema.
type field struct {
	key      string
	required bool
	decode   func(v *yaml.Node)
}

// object decodes a mapping against its schema: unknown, duplicate and missing
// keys are reported. It returns the keys present and whether n is a mapping.
func (p *parser) object(n *yaml.Node, path string, fields []field) (map[string]bool, bool) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		p.errf(n, "%s: expected a mapping, got %s", label(path), describe(n))
		return nil, false
	}
	present := map[string]bool{}
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		key, ok := p.key(k, path)
		if !ok {
			continue
		}
		if line, dup := first[key]; dup {
			p.errf(k, "duplicate key %q %s (first at line %d)", key, where(path), line)
			continue
		}
		first[key] = k.Line
		if path == "" && strings.HasPrefix(key, "x-") {
			continue // extension keys hold YAML anchors for reuse, as in Compose files
		}
		var f *field
		for j := range fields {
			if fields[j].key == key {
				f = &fields[j]
			}
		}
		if f == nil {
			p.errf(k, "unknown key %q %s%s", key, where(path), suggest(key, fields))
			continue
		}
		present[key] = true
		f.decode(v)
	}
	for _, f := range fields {
		if f.required && !present[f.key] {
			p.errf(n, "missing required key %q %s", f.key, where(path))
		}
	}
	return present, true
}

// key returns a mapping key as a string.
func (p *parser) key(k *yaml.Node, path string) (string, bool) {
	if k.Kind != yaml.ScalarNode {
		p.errf(k, "%s: keys must be strings, got %s", label(path), describe(k))
		return "", false
	}
	if k.ShortTag() == "!!merge" {
		p.errf(k, "%s: merge keys (<<) are not supported; write the keys out", label(path))
		return "", false
	}
	return k.Value, true
}

// suggest names the closest known key, or lists them all.
func suggest(key string, fields []field) string {
	best, bestD := "", 3
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.key
		if d := textdist.Distance(key, f.key); d < bestD {
			best, bestD = f.key, d
		}
	}
	if best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return " (known keys: " + strings.Join(names, ", ") + ")"
}

// str decodes a string. Any scalar but null is accepted as written (so
// --port, 30000 works unquoted). Newlines and NUL are refused everywhere:
// values end up in systemd unit files, where they would inject lines.
func (p *parser) str(n *yaml.Node, path string) (string, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		p.errf(n, "%s: expected a string, got %s", path, describe(n))
		return "", false
	}
	switch {
	case strings.ContainsAny(n.Value, "\n\r"):
		p.errf(n, "%s: must not contain a newline (it would inject a line into the systemd unit)", path)
		return "", false
	case strings.IndexByte(n.Value, 0) >= 0:
		p.errf(n, "%s: must not contain a NUL byte", path)
		return "", false
	case !utf8.ValidString(n.Value):
		// systemd refuses a unit whose lines are not UTF-8.
		p.errf(n, "%s: must be valid UTF-8", path)
		return "", false
	}
	return n.Value, true
}

// boolean decodes true or false.
func (p *parser) boolean(n *yaml.Node, path string) (bool, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		p.errf(n, "%s: expected true or false, got %s", path, describe(n))
		return false, false
	}
	return n.Value == "true" || n.Value == "True" || n.Value == "TRUE", true
}

// maxNumber bounds every integer so arithmetic on them (steps*topk+1, run
// counts) cannot overflow.
const maxNumber = 1<<31 - 1

// integer decodes an integer scalar (quoted numbers are strings and refused).
func (p *parser) integer(n *yaml.Node, path string) (int64, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		p.errf(n, "%s: expected an integer, got %s", path, describe(n))
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		p.errf(n, "%s: integer %s out of range", path, clip(n.Value))
		return 0, false
	}
	return v, true
}

// maxTemperature bounds workload.temperature (OpenAI's API allows up to 2; higher only makes noise).
const maxTemperature = 2

// number decodes an integer or a float scalar (NaN and infinities refused).
func (p *parser) number(n *yaml.Node, path string) (float64, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		p.errf(n, "%s: expected a number, got %s", path, describe(n))
		return 0, false
	}
	var v float64
	if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		p.errf(n, "%s: %s is not a finite number", path, clip(n.Value))
		return 0, false
	}
	return v, true
}

// count decodes an integer in [lo, maxNumber].
func (p *parser) count(n *yaml.Node, path string, lo int64) (int, bool) {
	v, ok := p.integer(n, path)
	if !ok {
		return 0, false
	}
	switch {
	case v < lo && lo == 1:
		p.errf(resolve(n), "%s: must be positive, got %d", path, v)
		return 0, false
	case v < lo:
		p.errf(resolve(n), "%s: must be at least %d, got %d", path, lo, v)
		return 0, false
	case v > maxNumber:
		p.errf(resolve(n), "%s: %d is too large (max %d)", path, v, maxNumber)
		return 0, false
	}
	return int(v), true
}

func (p *parser) positive(n *yaml.Node, path string) (int, bool) { return p.count(n, path, 1) }

// bounded decodes an integer within the limit of key (docs/spec.md, "Limits").
func (p *parser) bounded(n *yaml.Node, path, key string) (int, bool) {
	l := p.limit(key)
	v, ok := p.count(n, path, l.Min)
	if !ok || !p.withinLimit(resolve(n), path, l, int64(v)) {
		return 0, false
	}
	return v, true
}

// boundedList decodes a non-empty list of integers, each within the limit of key.
func (p *parser) boundedList(n *yaml.Node, path, key string) ([]int, []*yaml.Node) {
	items, _ := p.nonEmpty(n, path)
	vals, nodes := []int{}, []*yaml.Node{}
	for i, it := range items {
		if v, ok := p.bounded(it, index(path, i), key); ok {
			vals = append(vals, v)
			nodes = append(nodes, resolve(it))
		}
	}
	return vals, nodes
}

// boundedLen reports a list at n holding more items than the limit of key allows.
func (p *parser) boundedLen(n *yaml.Node, path, key, noun string, count int) bool {
	l := p.limit(key)
	if int64(count) > l.Max {
		p.errf(resolve(n), "%s: %d %s, above the limit %d (%s)", path, count, noun, l.Max, l.Why)
		return false
	}
	return true
}

// boundedDuration decodes a positive duration within the limit of key.
func (p *parser) boundedDuration(n *yaml.Node, path, key string) (time.Duration, bool) {
	d, ok := p.duration(n, path)
	if !ok || !p.withinLimit(resolve(n), path, p.limit(key), int64(d)) {
		return 0, false
	}
	return d, true
}

// list decodes a sequence node into its items.
func (p *parser) list(n *yaml.Node, path string) ([]*yaml.Node, bool) {
	n = resolve(n)
	if n.Kind != yaml.SequenceNode {
		p.errf(n, "%s: expected a list, got %s", path, describe(n))
		return nil, false
	}
	return n.Content, true
}

// nonEmpty decodes a sequence that must hold at least one item.
func (p *parser) nonEmpty(n *yaml.Node, path string) ([]*yaml.Node, bool) {
	items, ok := p.list(n, path)
	if ok && len(items) == 0 {
		p.errf(resolve(n), "%s: must not be empty", path)
		return nil, false
	}
	return items, ok
}

func (p *parser) duration(n *yaml.Node, path string) (d time.Duration, ok bool) {
	s, ok := p.str(n, path)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		p.errf(resolve(n), "%s: bad duration %q: want a Go duration such as 90s, 20m or 1h30m", path, clip(s))
		return 0, false
	case d <= 0:
		p.errf(resolve(n), "%s: must be positive, got %s", path, s)
		return 0, false
	}
	return d, true
}

// oneOf decodes a string that must be one of the allowed values.
func (p *parser) oneOf(n *yaml.Node, path string, allowed ...string) (string, bool) {
	s, ok := p.str(n, path)
	if !ok {
		return "", false
	}
	for _, a := range allowed {
		if s == a {
			return s, true
		}
	}
	want := strings.Join(allowed, " or ")
	if len(allowed) > 2 {
		want = "one of " + strings.Join(allowed, ", ")
	}
	p.errf(resolve(n), "%s: must be %s, got %q%s", path, want, clip(s), closestOf(s, allowed))
	return "", false
}

// closestOf is "; did you mean X?" for the allowed value nearest to s (an edit or two away), else "".
func closestOf(s string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := textdist.Distance(strings.ToLower(s), a); d < bestD {
			best, bestD = a, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// env decodes an environment mapping; keys must be shell identifiers, the
// only names systemd's Environment= and every shell agree on.
func (p *parser) env(n *yaml.Node, path string) map[string]string {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		p.errf(n, "%s: expected a mapping of variable to value, got %s", path, describe(n))
		return nil
	}
	env := map[string]string{}
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		key, ok := p.key(k, path)
		if !ok {
			continue
		}
		if line, dup := first[key]; dup {
			p.errf(k, "duplicate key %q in %s (first at line %d)", key, path, line)
			continue
		}
		first[key] = k.Line
		if !envName.MatchString(key) {
			p.errf(k, "%s: %q is not a valid environment variable name (want [A-Za-z_][A-Za-z0-9_]*)", path, clip(key))
			continue
		}
		if val, ok := p.str(v, join(path, key)); ok {
			env[key] = val
		}
	}
	if len(env) == 0 {
		return nil
	}
	return env
}

// Name patterns. Sweep names go into file names and URLs, hence lower case.
var (
	sweepName = regexp.MustCompile(`^[a-z0-9._-]+$`)
	identName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	envName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	unitName  = regexp.MustCompile(`^[A-Za-z0-9:_.@\\-]+\.service$`)
)
