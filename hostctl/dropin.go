package hostctl

import (
	"bytes"
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

// EnvFileName is the file name of the point's environment file in <unit>.d/
// (systemd reads only *.conf there as drop-ins; the drop-in names this file
// in EnvironmentFile=).
const EnvFileName = "50-specsweep.env"

// EnvFilePath is the environment file's path for unit: root's alone (0600),
// so that values such as HF_TOKEN are not readable by every user of the
// host, as Environment= lines of a 0644 drop-in and `systemctl show` are.
func EnvFilePath(unitName string) string {
	return "/etc/systemd/system/" + unitName + ".d/" + EnvFileName
}

// LaunchFileName is the file name of the point's launch script in <unit>.d/: the drop-in's
// ExecStart= runs it with /bin/sh and it execs the server, so that a point's command line is a
// file written before its start, not a unit setting that needs a daemon-reload (systemd reads
// only *.conf there as drop-ins).
const LaunchFileName = "50-specsweep.launch"

// LaunchFilePath is the launch script's path for unit (0644, as the drop-in: it holds no secret,
// only references ${NAME} to the environment file's variables).
func LaunchFilePath(unitName string) string {
	return "/etc/systemd/system/" + unitName + ".d/" + LaunchFileName
}

// MarkerPath is the restore marker's path for unit.
func MarkerPath(unitName string) string { return MarkerDir + "/restore-" + unitName + ".json" }

// AppliedDropInName is the file name of the applied configuration's drop-in in <unit>.d/
// (`specsweep apply`): it sorts before DropInName, so a sweep's drop-in overrides it.
const AppliedDropInName = "40-specsweep-applied.conf"

// AppliedEnvFileName is the file name of the applied configuration's environment file in <unit>.d/.
const AppliedEnvFileName = "40-specsweep-applied.env"

// AppliedDropInPath is the applied configuration's drop-in for unit (0644).
func AppliedDropInPath(unitName string) string {
	return "/etc/systemd/system/" + unitName + ".d/" + AppliedDropInName
}

// AppliedEnvFilePath is the applied configuration's environment file for unit (0600, as EnvFilePath).
func AppliedEnvFilePath(unitName string) string {
	return "/etc/systemd/system/" + unitName + ".d/" + AppliedEnvFileName
}

// AppliedRecordPath is where the host keeps what is applied to unit (an AppliedRecord).
func AppliedRecordPath(unitName string) string { return MarkerDir + "/applied-" + unitName + ".json" }

// ApplyRollbackPath is the rollback record of an apply in progress for unit (0600: it holds the
// previous environment file).
func ApplyRollbackPath(unitName string) string {
	return MarkerDir + "/apply-rollback-" + unitName + ".json"
}

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
	return quoteExecArgRefs(s, nil)
}

// checkExecArg refuses what no ExecStart= argument can carry.
func checkExecArg(s string) error {
	if strings.ContainsAny(s, "\n\r\x00") {
		return fmt.Errorf("argument %q holds a newline or NUL", s)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("argument %q is not valid UTF-8", s)
	}
	return nil
}

// escapeExec writes s for the inside of a double-quoted ExecStart= word.
func escapeExec(b *strings.Builder, s string) {
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
				fmt.Fprintf(b, `\x%02x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
}

// envRefs splits s into literal text and references ${NAME} to variables
// of env: fn gets each piece in order (name "" for literal text). Only the
// braced form naming a variable of env is a reference; any other $ is
// literal, as before references existed.
func envRefs(s string, env map[string]string, fn func(lit, name string)) {
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i+2:], '}')
		if j < 0 {
			break
		}
		name := s[i+2 : i+2+j]
		if _, ok := env[name]; !ok || !envName(name) {
			fn(s[:i+2], "")
			s = s[i+2:]
			continue
		}
		if i > 0 {
			fn(s[:i], "")
		}
		fn("", name)
		s = s[i+3+j:]
	}
	if s != "" {
		fn(s, "")
	}
}

// envName reports whether n can be referenced as ${n} in ExecStart=.
func envName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ExpandArgv replaces the references ${NAME} to variables of env in every
// argument but the command (as systemd does in ExecStart=): what the server
// process sees. Secrets such as --api-key ${SGLANG_API_KEY} stay out of the
// unit, the spec's args and the database this way.
func ExpandArgv(argv []string, env map[string]string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if i == 0 || !strings.Contains(a, "${") {
			out[i] = a
			continue
		}
		var b strings.Builder
		envRefs(a, env, func(lit, name string) {
			if name != "" {
				b.WriteString(env[name])
			} else {
				b.WriteString(lit)
			}
		})
		out[i] = b.String()
	}
	return out
}

// quoteExecArgRefs is QuoteExecArg, but references to variables of env are
// written as ${NAME} for systemd to substitute (inside "...", one argument).
func quoteExecArgRefs(s string, env map[string]string) (string, error) {
	if err := checkExecArg(s); err != nil {
		return "", err
	}
	if s == ";" {
		return `\;`, nil
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	envRefs(s, env, func(lit, name string) {
		if name != "" {
			b.WriteString("${" + name + "}")
		} else {
			escapeExec(&b, lit)
		}
	})
	b.WriteByte('"')
	return b.String(), nil
}

// ExecStartLine renders argv as an ExecStart= value. The first argument must
// be an absolute path; it is written unquoted when it needs no quoting (a
// quoted path is valid too, but operators read these files). In the other
// arguments, ${NAME} naming a variable of env is left for systemd to
// substitute (ExpandArgv); every other $ and % is literal.
func ExecStartLine(argv []string, env map[string]string) (string, error) {
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
		refs := env
		if i == 0 {
			refs = nil // systemd substitutes nothing in the command
		}
		q, err := quoteExecArgRefs(a, refs)
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

// RenderEnvFile renders env as an EnvironmentFile= file: one KEY="value"
// line per variable, sorted, with \ " $ and ` escaped by a backslash (the
// escapes systemd's env-file parser undoes inside double quotes, so a value
// arrives byte for byte, never expanded).
func RenderEnvFile(env map[string]string) ([]byte, error) {
	return renderEnvFile("# Written by specsweep for one sweep point (root only); removed with the drop-in.\n", env)
}

// renderEnvFile is RenderEnvFile under the header comment head.
func renderEnvFile(head string, env map[string]string) ([]byte, error) {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.WriteString(head)
	for _, k := range keys {
		v := env[k]
		if !envName(k) {
			return nil, fmt.Errorf("bad environment variable name %q", k)
		}
		if strings.ContainsAny(v, "\n\r\x00") {
			return nil, fmt.Errorf("environment %s holds a newline or NUL", k)
		}
		if !utf8.ValidString(v) {
			return nil, fmt.Errorf("environment %s is not valid UTF-8", k)
		}
		b.WriteString(k)
		b.WriteString(`="`)
		for i := 0; i < len(v); i++ {
			if strings.IndexByte("\\\"$`", v[i]) >= 0 {
				b.WriteByte('\\')
			}
			b.WriteByte(v[i])
		}
		b.WriteString("\"\n")
	}
	return b.Bytes(), nil
}

// systemdSpan renders d as a systemd time span, exact to the millisecond.
func systemdSpan(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
}

// RenderDropIn renders a sweep's drop-in of unitName for l: ExecStart= (reset) then /bin/sh
// running the launch script beside it (RenderLaunchScript: the point's command line),
// EnvironmentFile= naming EnvFilePath when l has an environment (the values are in that file,
// never in the drop-in), TimeoutStopSec=, KillSignal=. The points of a sweep share it, so that a
// point's start needs no daemon-reload. Serialised with go-systemd's unit package.
func RenderDropIn(unitName string, l Launch) ([]byte, error) {
	return renderDropIn(l, sweepDropInText(unitName))
}

func sweepDropInText(unitName string) dropInText {
	return dropInText{head: sweepDropInHead(unitName), envFile: EnvFilePath(unitName), launchFile: LaunchFilePath(unitName)}
}

func sweepDropInHead(unitName string) string {
	return "# Written by specsweep for a sweep; removed by `specsweep` when the sweep ends. ExecStart= runs the\n" +
		"# point's command line from " + LaunchFileName + " beside it.\n" +
		"# The operator's unit is untouched. To undo: `specsweep restore SPEC`, or by hand: delete this file,\n" +
		"# " + EnvFileName + " and " + LaunchFileName + " beside it and " + MarkerPath(unitName) + ", then `systemctl daemon-reload`.\n"
}

// launchExit is the launch script's exit status when the command cannot be executed: systemd's own
// status for a program it could not start (203/EXEC), so a missing command reads the same as with
// the command in ExecStart= (classify.go).
const launchExit = 203

// RenderLaunchScript renders l's command line as the launch script the sweep's drop-in runs: a
// POSIX sh script that execs the command (the same process: MainPID is the server's) with every
// argument single-quoted, byte for byte, and each reference ${NAME} to a variable of l.Env (not in
// the command, as systemd substitutes in ExecStart=: ExpandArgv) as "${NAME}", expanded by sh from
// the environment systemd gave it, so secrets stay in the environment file. What a drop-in refuses
// is refused here too (Launch.Validate: a newline or NUL, invalid UTF-8, a relative command).
func RenderLaunchScript(l Launch) ([]byte, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString("# Written by specsweep for one sweep point: its command line, run by the ExecStart= of " + DropInName + ".\n")
	for i, a := range l.Argv {
		if i == 0 {
			q := ShellQuote(a)
			msg := ShellQuote("specsweep: Failed to execute " + a + ": not an executable file")
			fmt.Fprintf(&b, "[ -f %s ] && [ -x %s ] || { printf '%%s\\n' %s >&2; exit %d; }\nexec %s", q, q, msg, launchExit, q)
			continue
		}
		b.WriteString(" \\\n\t")
		if !strings.Contains(a, "${") {
			b.WriteString(ShellQuote(a))
			continue
		}
		var lit strings.Builder // literal text up to the next reference, quoted as one word
		envRefs(a, l.Env, func(text, name string) {
			if name == "" {
				lit.WriteString(text)
				return
			}
			if lit.Len() > 0 {
				b.WriteString(ShellQuote(lit.String()))
				lit.Reset()
			}
			b.WriteString(`"${` + name + `}"`)
		})
		if lit.Len() > 0 {
			b.WriteString(ShellQuote(lit.String()))
		}
	}
	b.WriteString("\n")
	return []byte(b.String()), nil
}

// dropInText is what differs between specsweep's drop-ins: a sweep point's and the applied
// configuration's.
type dropInText struct {
	head    string // the comment at the top
	envFile string // named in EnvironmentFile= when the launch has an environment
	// resetEnv empties EnvironmentFile= first and names keepEnv again: a sweep's point on a host with
	// an applied configuration, whose environment file would otherwise add to the point's.
	resetEnv bool
	keepEnv  []string // the unit's own environment files ("-" first: missing is fine)
	// launchFile, when set, is the launch script ExecStart= runs (a sweep's drop-in); unset, the
	// launch's command line is ExecStart= itself (the applied configuration's).
	launchFile string
}

// renderDropIn renders l's drop-in as t says: ExecStart= (reset) then the launch,
// EnvironmentFile= (reset and the unit's own with t.resetEnv; then t.envFile when l has an
// environment), TimeoutStopSec=, and KillSignal=SIGKILL for a launch that is killed at its stop.
func renderDropIn(l Launch, t dropInText) ([]byte, error) {
	l = l.withDefaults()
	if err := l.Validate(); err != nil {
		return nil, err
	}
	argv, env := l.Argv, l.Env
	if t.launchFile != "" {
		argv, env = []string{"/bin/sh", t.launchFile}, nil
	}
	exec, err := ExecStartLine(argv, env)
	if err != nil {
		return nil, err
	}
	opts := []*unit.UnitOption{
		unit.NewUnitOption("Service", "ExecStart", ""),
		unit.NewUnitOption("Service", "ExecStart", exec),
	}
	if t.resetEnv {
		opts = append(opts, unit.NewUnitOption("Service", "EnvironmentFile", ""))
		for _, f := range t.keepEnv {
			if strings.ContainsAny(f, "\n\r\x00") {
				return nil, fmt.Errorf("environment file %q of the unit: a newline or NUL in its name", f)
			}
			// systemd expands specifiers in the path it shows: written back, % stays literal.
			opts = append(opts, unit.NewUnitOption("Service", "EnvironmentFile", strings.ReplaceAll(f, "%", "%%")))
		}
	}
	if len(l.Env) > 0 {
		opts = append(opts, unit.NewUnitOption("Service", "EnvironmentFile", t.envFile))
	}
	opts = append(opts, unit.NewUnitOption("Service", "TimeoutStopSec", systemdSpan(l.StopTimeout)))
	if l.Kill {
		// systemd sends the KillSignal to the unit's whole control group in its stop job: the
		// server ends at once, and as a stop, never as a crash a Restart= policy would answer.
		opts = append(opts, unit.NewUnitOption("Service", "KillSignal", "SIGKILL"))
	}
	body, err := io.ReadAll(unit.Serialize(opts))
	if err != nil {
		return nil, err
	}
	return append([]byte(t.head), body...), nil
}

// Marker records what Restore must bring back; it is written on the host
// before the first change and removed by Restore, so a restore after a
// crash of specsweep still knows.
type Marker struct {
	Unit        string    `json:"unit"`
	WasActive   bool      `json:"was_active"`
	UnitCreated bool      `json:"unit_created,omitempty"` // the unit file was created by specsweep
	SlotOf      string    `json:"slot_of,omitempty"`      // a packed sweep's slot unit: the operator's unit it copies
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
