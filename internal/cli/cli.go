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
	"sort"
	"strings"
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
	name    string
	args    string // positional synopsis for the usage line
	summary string
	opts    func() options
	run     func(ctx context.Context, env Env, o options) error
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
		exportCmd(),
		restoreCmd(),
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
	if args[0] == "version" || args[0] == "--version" {
		fmt.Fprintln(env.Stdout, "specsweep", Version())
		return ExitOK
	}
	var cmd *command
	for i := range cmds {
		if cmds[i].name == args[0] {
			cmd = &cmds[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(env.Stderr, "specsweep: unknown command %q\n\n", args[0])
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
		fmt.Fprintf(env.Stderr, "specsweep %s: %v\n", cmd.name, err)
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
	fmt.Fprintln(w, "\nRun 'specsweep COMMAND --help' for a command's flags. Exit codes: 0 ok, 1 failure, 2 usage.")
}

func printCmdUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: specsweep %s [flags] %s\n\n%s\n", c.name, c.args, c.summary)
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	fmt.Fprintln(w, "\nFlags:")
	for _, n := range names {
		f := fs.Lookup(n)
		typ, usage := flag.UnquoteUsage(f)
		head := "--" + n
		if typ != "" {
			head += " " + typ
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" {
			def = fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintf(w, "  %-22s %s%s\n", head, usage, def)
	}
}

// dbUsage is the text of most commands' --db.
const dbUsage = "database file (default $SPECSWEEP_DB or ./specsweep.db)"

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
