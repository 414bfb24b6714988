package hostctl

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coreos/go-systemd/v22/unit"
)

// DropInName is the file name of specsweep's drop-in in <unit>.d/.
const DropInName = "50-specsweep.conf"

// MarkerDir holds the restore markers on a host.
const MarkerDir = "/var/lib/specsweep"

// DropInPath is the drop-in's path for unit.
func DropInPath(unitName string) string {
	return "/etc/systemd/system/" + unitName + ".d/" + DropInName
}

// MarkerPath is the restore marker's path for unit.
func MarkerPath(unitName string) string { return MarkerDir + "/restore-" + unitName + ".json" }

// wrapAt is the ExecStart= line length beyond which arguments continue on
// the next line (a trailing backslash): systemd accepts long lines, but
// tools that read unit files (and go-systemd's parser, 2048 bytes) do not.
const wrapAt = 1000

// QuoteExecArg quotes one ExecStart= argument so that systemd passes it to
// the process byte for byte: inside "...", \ and " are escaped, % is doubled
// (specifiers) and $ is doubled (environment substitution). A lone ";"
// (systemd's command separator) is written \;. Newlines, NUL and invalid
// UTF-8 are refused (systemd passes unit properties over D-Bus, whose strings
// must be UTF-8: one such byte makes `systemctl show` of the unit fail).
func QuoteExecArg(s string) (string, error) {
	if strings.ContainsAny(s, "\n\r\x00") {
		return "", fmt.Errorf("argument %q holds a newline or NUL", s)
	}
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("argument %q is not valid UTF-8", s)
	}
	if s == ";" {
		return `\;`, nil
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '%':
			b.WriteString("%%")
		case '$':
			b.WriteString("$$")
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 || c == 0x7f {
				// control characters as C escapes (systemd unescapes them)
				fmt.Fprintf(&b, `\x%02x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}

// ExecStartLine renders argv as an ExecStart= value. The first argument must
// be an absolute path; it is written unquoted when it needs no quoting (a
// quoted path is valid too, but operators read these files).
func ExecStartLine(argv []string) (string, error) {
	if len(argv) == 0 {
		return "", errors.New("empty command")
	}
	if !strings.HasPrefix(argv[0], "/") {
		return "", fmt.Errorf("command %q: an absolute path is required", argv[0])
	}
	parts := make([]string, 0, len(argv))
	for i, a := range argv {
		if i == 0 && plainPath(a) {
			parts = append(parts, a)
			continue
		}
		q, err := QuoteExecArg(a)
		if err != nil {
			return "", err
		}
		parts = append(parts, q)
	}
	var b strings.Builder
	lineLen := len("ExecStart=")
	for i, p := range parts {
		if i > 0 {
			if lineLen+1+len(p) > wrapAt {
				b.WriteString(" \\\n    ")
				lineLen = 4
			} else {
				b.WriteByte(' ')
				lineLen++
			}
		}
		b.WriteString(p)
		lineLen += len(p)
	}
	return b.String(), nil
}

func plainPath(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("/._-+:,", c) >= 0) {
			return false
		}
	}
	return true
}

// QuoteEnvAssignment renders KEY=value for Environment=: the whole
// assignment in "...", \ and " escaped, % doubled ($ is not expanded there).
func QuoteEnvAssignment(k, v string) (string, error) {
	if k == "" || strings.ContainsAny(k, "=\n\r\x00 \t\"'\\$%") {
		return "", fmt.Errorf("bad environment variable name %q", k)
	}
	q, err := QuoteExecArg(k + "=" + v)
	if err != nil {
		return "", err
	}
	// $ needs no doubling in Environment=; undo it.
	return strings.ReplaceAll(q, "$$", "$"), nil
}

// systemdSpan renders d as a systemd time span, exact to the millisecond.
func systemdSpan(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
}

// RenderDropIn renders the drop-in for l: ExecStart= (reset) then the
// launch, one Environment= per variable (sorted), TimeoutStopSec=.
// Serialised with go-systemd's unit package.
func RenderDropIn(l Launch) ([]byte, error) {
	l = l.withDefaults()
	if err := l.Validate(); err != nil {
		return nil, err
	}
	exec, err := ExecStartLine(l.Argv)
	if err != nil {
		return nil, err
	}
	opts := []*unit.UnitOption{
		unit.NewUnitOption("Service", "ExecStart", ""),
		unit.NewUnitOption("Service", "ExecStart", exec),
	}
	keys := make([]string, 0, len(l.Env))
	for k := range l.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e, err := QuoteEnvAssignment(k, l.Env[k])
		if err != nil {
			return nil, err
		}
		opts = append(opts, unit.NewUnitOption("Service", "Environment", e))
	}
	opts = append(opts, unit.NewUnitOption("Service", "TimeoutStopSec", systemdSpan(l.StopTimeout)))
	body, err := io.ReadAll(unit.Serialize(opts))
	if err != nil {
		return nil, err
	}
	head := "# Written by specsweep for one sweep point; removed by `specsweep` when the sweep ends.\n" +
		"# The operator's unit is untouched: delete this file and run `systemctl daemon-reload` to undo.\n"
	return append([]byte(head), body...), nil
}

// Marker records what Restore must bring back; it is written on the host
// before the first change and removed by Restore, so a restore after a
// crash of specsweep still knows.
type Marker struct {
	Unit        string    `json:"unit"`
	WasActive   bool      `json:"was_active"`
	UnitCreated bool      `json:"unit_created,omitempty"` // the unit file was created by specsweep
	DropIn      string    `json:"dropin"`
	CreatedAt   time.Time `json:"created_at"`
	By          string    `json:"by,omitempty"`
}

// Encode renders m as JSON.
func (m Marker) Encode() []byte {
	b, _ := json.MarshalIndent(m, "", "  ")
	return append(b, '\n')
}

// DecodeMarker parses a marker file.
func DecodeMarker(b []byte) (Marker, error) {
	var m Marker
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("restore marker: %w", err)
	}
	if m.Unit == "" {
		return m, errors.New("restore marker: no unit")
	}
	return m, nil
}

// ManagedUnit renders a unit file for create_unit: true (a host without the
// unit); the drop-in supplies ExecStart=.
func ManagedUnit(unitName string) []byte {
	return []byte("# Created by specsweep (create_unit: true); removed when the sweep is restored.\n" +
		"[Unit]\nDescription=SGLang server managed by specsweep (" + unitName + ")\n\n" +
		"[Service]\nType=simple\nExecStart=/bin/false\nRestart=no\nKillMode=control-group\n")
}

func sha256hex(b []byte) string {
	if b == nil {
		return ""
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// unquoteExec splits an ExecStart= value the way systemd does for the
// subset QuoteExecArg produces (double quotes, \\ \" \t \xNN escapes, %%,
// $$, a lone \; and backslash-newline continuations). Used by tests and to
// report the argv of a drop-in.
func unquoteExec(s string) ([]string, error) {
	s = strings.ReplaceAll(s, "\\\n", " ")
	var out []string
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			return out, nil
		}
		var w bytes.Buffer
		if s[i] == '"' {
			i++
			for {
				if i >= len(s) {
					return nil, errors.New("unterminated quote")
				}
				c := s[i]
				if c == '"' {
					i++
					break
				}
				if c == '\\' && i+1 < len(s) {
					switch n := s[i+1]; n {
					case '\\', '"':
						w.WriteByte(n)
						i += 2
					case 't':
						w.WriteByte('\t')
						i += 2
					case 'x':
						if i+3 >= len(s) {
							return nil, errors.New("short \\x escape")
						}
						v, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
						if err != nil {
							return nil, err
						}
						w.WriteByte(byte(v))
						i += 4
					default:
						return nil, fmt.Errorf("unknown escape \\%c", n)
					}
					continue
				}
				if (c == '%' || c == '$') && i+1 < len(s) && s[i+1] == c {
					w.WriteByte(c)
					i += 2
					continue
				}
				if c == '%' || c == '$' {
					return nil, fmt.Errorf("unescaped %c", c)
				}
				w.WriteByte(c)
				i++
			}
			if i < len(s) && s[i] != ' ' {
				return nil, errors.New("text after a closing quote")
			}
		} else {
			for i < len(s) && s[i] != ' ' {
				if s[i] == '\\' && i+1 < len(s) && s[i+1] == ';' {
					w.WriteByte(';')
					i += 2
					continue
				}
				if s[i] == '"' || s[i] == '\\' || s[i] == '%' || s[i] == '$' {
					return nil, fmt.Errorf("unquoted %c", s[i])
				}
				w.WriteByte(s[i])
				i++
			}
		}
		out = append(out, w.String())
	}
}
