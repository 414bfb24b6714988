// Package cli wires specsweep's commands: it parses flags, calls the domain packages and maps their
// errors to exit codes. It holds no domain logic of its own.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/specsweep/specsweep/internal/textdist"
)

// Exit codes of the specsweep command (docs/cli.md: 0 ok, 1 failure, 2 usage, 3 the daemon cannot
// listen on its address).
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
	ExitListen  = 3
)

// Env is what a command may touch of the outside world; main passes the real one, tests their own.
type Env struct {
	Stdout, Stderr io.Writer
	Stdin          io.Reader
	Getenv         func(string) string
}

// command is one subcommand: an options struct that holds its flags and positional arguments, and
// a plain run function of that struct (gh's pattern). Main makes a new struct (opts), binds the
// flags to its fields (flags), parses the command line, stores the positional arguments (args) and
// calls run; a test may fill the struct itself and call the run function directly.
type command struct {
	name     string
	args     string // positional synopsis for the usage line
	summary  string
	examples []string // command lines, each with a "# what it does" comment, for --help
	opts     func() options
	run      func(ctx context.Context, env Env, o options) error
}

// withExamples gives the command the examples its --help shows: each a command line, optionally
// followed by "  # what it does".
func (c command) withExamples(ex ...string) command {
	c.examples = ex
	return c
}

// options is a command's options struct.
type options interface {
	// flags declares the command's flags on fs, each bound to a field of the struct (its default
	// set there).
	flags(fs *flag.FlagSet)
	// args checks the positional arguments (a usageError when they do not fit) and stores them.
	args(pos []string) error
}

// givenFlags is implemented by options whose meaning depends on which flags the command line gave,
// not only on their values (bench's --concurrency with --request-rate): Main calls given with the
// names of the flags set, before args.
type givenFlags interface {
	given(set map[string]bool)
}

// newCommand makes the command whose options struct is O and whose run function is run.
func newCommand[O any, P interface {
	*O
	options
}](name, args, summary string, run func(ctx context.Context, env Env, o P) error) command {
	return command{name: name, args: args, summary: summary,
		opts: func() options { return P(new(O)) },
		run:  func(ctx context.Context, env Env, o options) error { return run(ctx, env, o.(P)) },
	}
}

// noArgs is the args step of a command without positional arguments.
func noArgs(pos []string) error {
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	return nil
}

// usageError marks an error that should exit 2 and print the command's usage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// exitError carries an explicit exit code with an error already reported to the user.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// commands are specsweep's commands, in the order of the top usage. A new one is a NAMECmd in its
// file (newCommand with the name, the synopsis, the summary and the run function), its options
// struct NAMEOptions (flags, args) and its run function NAMERun, and a line here.
func commands() []command {
	return []command{
		validateCmd(),
		planCmd(),
		runCmd(),
		submitCmd(),
		daemonCmd(),
		dashboardCmd(),
		apiCmd(),
		statusCmd(),
		cancelCmd(),
		resumeCmd(),
		runsCmd(),
		sweepsCmd(),
		schedulesCmd(),
		benchCmd(),
		doctorCmd(),
		reportCmd(),
		adaptiveCmd(),
		verifyCmd(),
		applyCmd(),
		watchCmd(),
		recommendCmd(),
		observeCmd(),
		exportCmd(),
		restoreCmd(),
		versionCmd(),
	}
}

// Main runs specsweep with args (without the program name) and returns the exit code.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		w := env.Stdout
		code := ExitOK
		if len(args) == 0 {
			w, code = env.Stderr, ExitUsage
		}
		printTopUsage(w, cmds)
		return code
	}
	if args[0] == "--version" {
		args = append([]string{"version"}, args[1:]...)
	}
	var cmd *command
	var names []string
	for i := range cmds {
		names = append(names, cmds[i].name)
		if cmds[i].name == args[0] {
			cmd = &cmds[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(env.Stderr, "specsweep: unknown command %q%s\n\n", args[0], didYouMean(args[0], names, ""))
		printTopUsage(env.Stderr, cmds)
		return ExitUsage
	}
	fs := flag.NewFlagSet("specsweep "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := cmd.opts()
	o.flags(fs)
	pos, err := parseInterleaved(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		printCmdUsage(env.Stdout, cmd, fs)
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "specsweep %s: %v%s\n", cmd.name, err, flagHint(err, fs))
		printCmdUsage(env.Stderr, cmd, fs)
		return ExitUsage
	}
	if g, ok := o.(givenFlags); ok {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		g.given(set)
	}
	err = o.args(pos)
	if err == nil {
		err = cmd.run(ctx, env, o)
	}
	var ue usageError
	var ee exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(env.Stderr, "specsweep %s: %v\n", cmd.name, ue.msg)
		printCmdUsage(env.Stderr, cmd, fs)
		return ExitUsage
	case errors.As(err, &ee):
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(env.Stderr, ee.err)
		}
		return ee.code
	default:
		fmt.Fprintf(env.Stderr, "specsweep %s: %v\n", cmd.name, err)
		return ExitFailure
	}
}

// parseInterleaved lets flags come before or after positional arguments (the stdlib flag package
// stops at the first positional); "--" ends flag parsing.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// flag.Parse consumed a "--" itself if it saw one before any positional; detect it so the
		// remainder is taken verbatim.
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func printTopUsage(w io.Writer, cmds []command) {
	fmt.Fprintln(w, "specsweep: speculative-decoding parameter sweeps of SGLang servers")
	fmt.Fprintln(w, "\nUsage: specsweep COMMAND [flags] [args]")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'specsweep COMMAND --help' for a command's flags and examples. Exit codes: 0 ok, 1 failure, 2 usage.")
}

// didYouMean is " (did you mean X?)" for the known word nearest to word, when one is near enough to
// be a slip (an edit distance of at most 2, and less than half the word); "" otherwise. prefix is
// put before the suggestion ("--" for a flag).
func didYouMean(word string, known []string, prefix string) string {
	best, dist := "", 3
	for _, k := range known {
		if d := textdist.Distance(word, k); d < dist && 2*d < len(word) {
			best, dist = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s%s?)", prefix, best)
}

// flagHint suggests the nearest flag for the flag package's "flag provided but not defined: -x".
func flagHint(err error, fs *flag.FlagSet) string {
	const undefined = "flag provided but not defined: "
	msg := err.Error()
	if !strings.HasPrefix(msg, undefined) {
		return ""
	}
	name := strings.TrimLeft(strings.TrimPrefix(msg, undefined), "-")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	hint := didYouMean(name, names, "--")
	if hint != "" && len(name) > 0 {
		if f := fs.Lookup(strings.TrimSuffix(strings.TrimPrefix(hint, " (did you mean --"), "?)")); f != nil && len(f.Name) == 1 {
			hint = strings.Replace(hint, "--", "-", 1)
		}
	}
	return hint
}

// hiddenFlag: --json is not listed where the command has --format (it is --format json, kept for
// the scripts written before --format; the --format line says so).
func hiddenFlag(fs *flag.FlagSet, name string) bool {
	return name == "json" && fs.Lookup("format") != nil
}

// flagHead is a flag as users type it: "-o DIR" for a one-letter flag, "--db PATH" otherwise (the
// placeholder from the usage's `backquoted` word, else the value's type; none for a bool).
func flagHead(f *flag.Flag) string {
	typ, _ := flag.UnquoteUsage(f)
	head := "--" + f.Name
	if len(f.Name) == 1 {
		head = "-" + f.Name
	}
	if typ != "" {
		head += " " + typ
	}
	return head
}

// flagDefault is " (default X)" for a flag whose default is not its type's zero value: a string
// quoted (unless it is numbers, as "1,4,16"), a number or a duration as is.
func flagDefault(f *flag.Flag) string {
	if f.DefValue == "" {
		return ""
	}
	if t := reflect.TypeOf(f.Value); t.Kind() == reflect.Pointer {
		if z, ok := reflect.New(t.Elem()).Interface().(flag.Value); ok && z.String() == f.DefValue {
			return "" // the type's zero value: 0, false, 0s
		}
		if t.Elem().Kind() == reflect.String && strings.Trim(f.DefValue, "0123456789.,") != "" {
			return fmt.Sprintf(" (default %q)", f.DefValue)
		}
	}
	return " (default " + f.DefValue + ")"
}

func printCmdUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "%s\n\n%s\n", strings.TrimSpace("Usage: specsweep "+c.name+" [flags] "+c.args), c.summary)
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if !hiddenFlag(fs, f.Name) {
			names = append(names, f.Name)
		}
	})
	if len(names) > 0 {
		sort.Strings(names)
		width := 0
		for _, n := range names {
			if h := len(flagHead(fs.Lookup(n))); h <= maxFlagHead {
				width = max(width, h)
			}
		}
		fmt.Fprintln(w, "\nFlags:")
		for _, n := range names {
			f := fs.Lookup(n)
			_, usage := flag.UnquoteUsage(f)
			head := flagHead(f)
			if len(head) > width {
				// A long flag: its text goes on the next line, where the others' start.
				fmt.Fprintf(w, "  %s\n  %-*s  %s%s\n", head, width, "", usage, flagDefault(f))
				continue
			}
			fmt.Fprintf(w, "  %-*s  %s%s\n", width, head, usage, flagDefault(f))
		}
	}
	if len(c.examples) > 0 {
		fmt.Fprintln(w, "\nExamples:")
		printExamples(w, c.examples)
	}
}

// printExamples writes command lines, their "# comments" aligned in one column.
func printExamples(w io.Writer, examples []string) {
	type line struct{ cmd, comment string }
	lines := make([]line, len(examples))
	width := 0
	for i, e := range examples {
		cmd, comment, ok := strings.Cut(e, " # ")
		lines[i] = line{strings.TrimSpace(cmd), strings.TrimSpace(comment)}
		if ok {
			width = max(width, len(lines[i].cmd))
		}
	}
	for _, l := range lines {
		if l.comment == "" {
			fmt.Fprintf(w, "  %s\n", l.cmd)
			continue
		}
		fmt.Fprintf(w, "  %-*s  # %s\n", width, l.cmd, l.comment)
	}
}

// maxFlagHead is the widest flag head that shares its line with its text.
const maxFlagHead = 24

// dbUsage is the text of most commands' --db.
const dbUsage = "database `PATH` (default $SPECSWEEP_DB or ./specsweep.db)"

// dbPath resolves --db: the flag, then $SPECSWEEP_DB, then ./specsweep.db.
func dbPath(env Env, flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if v := env.Getenv("SPECSWEEP_DB"); v != "" {
		return v
	}
	return "specsweep.db"
}

func oneArg(pos []string, what string) (string, error) {
	switch len(pos) {
	case 1:
		return pos[0], nil
	case 0:
		return "", usagef("missing %s", what)
	default:
		return "", usagef("expected one %s, got %d arguments: %s", what, len(pos), strings.Join(pos, " "))
	}
}
