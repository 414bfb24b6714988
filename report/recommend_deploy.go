package report

import (
	"cmp"
	"regexp"
	"slices"
	"strings"

	"github.com/specsweep/specsweep/internal/argparse"
	"github.com/specsweep/specsweep/sweep"
)

// Deploy is how to run a recommended configuration: the point's server argv as planned (the
// spec's server args, the method's args and the swept flags, then --tp-size), after the command,
// and its environment (the server's with the method's over it), with every secret redacted.
type Deploy struct {
	// Command is the spec's server.command (nil when the sweep stored no spec that parses: Args
	// is then the whole argv).
	Command []string
	// Args are SGLang's arguments after the command; nil when the point's argv is not known.
	Args []string
	// Env is the environment (nil when none).
	Env map[string]string
	// Redacted counts the values replaced by Redacted.
	Redacted int
}

// Redacted stands for a secret's value, as in the orchestrator's redacted evidence.
const Redacted = sweep.Redacted

// deployOf is how to run p, its secrets redacted.
func deployOf(s *Sweep, p *Point) Deploy {
	var d Deploy
	if len(p.Argv) == 0 {
		return d
	}
	argv := slices.Clone(p.Argv)
	if spec := s.Spec(); spec != nil && len(spec.Server.Command) <= len(argv) && slices.Equal(argv[:len(spec.Server.Command)], spec.Server.Command) {
		d.Command, argv = argv[:len(spec.Server.Command)], argv[len(spec.Server.Command):]
	}
	var secrets []string
	for _, v := range p.Env {
		if sweep.IsSecret(v) {
			secrets = append(secrets, strings.TrimSpace(v))
		}
	}
	// Every occurrence of a credential option (SGLang reads the last; all are shown).
	for _, name := range sweep.CredentialFlags {
		rest := argv
		for {
			at, v, ok := argparse.LastAt(rest, name)
			if at < 0 {
				break
			}
			if ok && v != "" && !strings.HasPrefix(v, "${") {
				if len(v) >= sweep.MinSecret { // a shorter one is hidden where it is given, not in every word
					secrets = append(secrets, v)
				}
				if tok, _, inline := strings.Cut(argv[at], "="); inline {
					argv[at] = tok + "=" + Redacted
				} else {
					argv[at+1] = Redacted
				}
				d.Redacted++
			}
			rest = rest[:at]
		}
	}
	// Longest first, so a secret that contains another is replaced whole.
	slices.SortFunc(secrets, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	hide := func(tok string) string {
		for _, sec := range secrets {
			if strings.Contains(tok, sec) {
				tok = strings.ReplaceAll(tok, sec, Redacted)
				d.Redacted++
			}
		}
		return tok
	}
	for i := range d.Command {
		d.Command[i] = hide(d.Command[i])
	}
	for i := range argv {
		argv[i] = hide(argv[i])
	}
	d.Args = argv
	if len(p.Env) > 0 {
		d.Env = map[string]string{}
		for k, v := range p.Env {
			if sweep.IsSecret(v) {
				v = Redacted
				d.Redacted++
			}
			d.Env[k] = v
		}
	}
	return d
}

// ArgsLine is the args as one shell line (each argument quoted when the shell would split or
// expand it; a `${NAME}` reference is kept for the shell or systemd to substitute).
func (d Deploy) ArgsLine() string { return shellLine(d.Args) }

// EnvLine is the environment as NAME=VALUE words, by name.
func (d Deploy) EnvLine() string {
	var out []string
	for _, k := range sortedKeys(d.Env) {
		out = append(out, k+"="+shellWord(d.Env[k]))
	}
	return strings.Join(out, " ")
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func shellLine(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = shellWord(a)
	}
	return strings.Join(out, " ")
}

// safeWord matches the words a POSIX shell takes as they are; "${NAME}" is kept as written.
var safeWord = regexp.MustCompile(`^([A-Za-z0-9_@%+=:,./-]+|\$\{[A-Za-z_][A-Za-z0-9_]*\})$`)

func shellWord(s string) string {
	if safeWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
