package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/store"
)

func runCmd() command {
	return newCommand("run", "SPEC",
		"Run a sweep now, in the foreground; re-running an unfinished sweep of the same spec resumes it.", runRun).
		withExamples("specsweep run examples/quickstart.yaml      # run it; the same command again resumes it (after Ctrl-C, a crash)",
			"specsweep run --new sweep.yaml               # a new sweep of the name, beside the finished one",
			"specsweep run --db /var/lib/specsweep/specsweep.db sweep.yaml")
}

type runOptions struct {
	DB                string // --db
	New               bool   // --new
	AcceptNewHostKeys bool   // --accept-new-host-keys
	LogDir            string // --log-dir
	LogFormat         string // --log-format: text or json
	Spec              string // SPEC
}

func (o *runOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", dbUsage)
	fs.BoolVar(&o.New, "new", false, "start a new sweep even if one of this name exists (a changed spec, or a rerun)")
	fs.BoolVar(&o.AcceptNewHostKeys, "accept-new-host-keys", false, "add unknown SSH host keys to known_hosts (a changed key is always refused)")
	fs.StringVar(&o.LogDir, "log-dir", "", "local driver: write each host's server log to `DIR`/HOST.log")
	fs.StringVar(&o.LogFormat, "log-format", "text", "`FORMAT` of the log lines on stderr when it is not a terminal: text or json")
}

func (o *runOptions) args(pos []string) (err error) {
	o.Spec, err = oneArg(pos, "SPEC")
	return err
}

// runRun runs the sweep of o.Spec in the foreground, or resumes it.
func runRun(ctx context.Context, env Env, o *runOptions) error {
	if o.LogFormat != "text" && o.LogFormat != "json" {
		return usagef("unknown --log-format %q (want text or json)", o.LogFormat)
	}
	spec, err := loadSpec(o.Spec)
	if err != nil {
		return err
	}
	dbFile := dbPath(env, o.DB)
	st, err := store.Open(ctx, dbFile)
	if err != nil {
		return err
	}
	defer st.Close()
	unlock, err := lockSweep(dbFile, spec.Name)
	if err != nil {
		return err
	}
	defer unlock()

	prep, err := orchestrator.Prepare(ctx, st, spec, o.New)
	if errors.Is(err, orchestrator.ErrFinished) {
		return printFinished(ctx, env, st, prep.Prior, dbFile)
	}
	if err != nil {
		return prepareWords("run", err)
	}
	if o.LogDir != "" {
		if err := os.MkdirAll(o.LogDir, 0o700); err != nil {
			return fmt.Errorf("log dir: %w", err)
		}
	}

	tty := isTerminal(env.Stderr)
	log := newLogger(env.Stderr, o.LogFormat, tty)
	prog := newProgress(env.Stderr, tty, spec, spec.Hosts)
	if prep.Resumed {
		what := "its points not done yet run now"
		if prep.Recovered > 0 {
			what = fmt.Sprintf("%d interrupted point(s) will re-run from the start", prep.Recovered)
		}
		prog.printf("resuming sweep %s (id %d)%s: %s\n", spec.Name, prep.SweepID, resumedFrom(prep.Prior), what)
	} else {
		if prep.Prior.ID != 0 {
			prog.printf("%s\n", afreshWords(prep.Prior))
		}
		searched := ""
		if spec.Searched() {
			searched = " (the search decides which run)"
		}
		prog.printf("sweep %s (id %d): %d points%s on %d host(s), database %s\n",
			spec.Name, prep.SweepID, len(spec.Plan().Points), searched, len(spec.Hosts), dbFile)
	}
	if err := prog.load(ctx, st, prep.SweepID); err != nil {
		return err
	}

	hosts := sweepHosts(ctx, st, spec, prep.SweepID, hostOptions{acceptNewHostKeys: o.AcceptNewHostKeys, logDir: o.LogDir, getenv: env.Getenv, specDir: specDir(o.Spec)})
	ohosts := make([]orchestrator.Host, 0, len(hosts))
	for _, h := range hosts {
		defer h.Close()
		ohosts = append(ohosts, h)
	}
	runner, err := orchestrator.New(orchestrator.Config{Store: st, Hosts: ohosts, Log: log, Observe: prog.update, Holder: store.HolderRun})
	if err != nil {
		return err
	}
	out, runErr := runner.Run(ctx, prep.SweepID, spec)
	prog.finish()
	if out.Interrupted {
		fmt.Fprintf(env.Stdout, "sweep %s (id %d) interrupted: %d done, %d failed, %d pending%s; units restored. "+
			"Run the same command again to resume.\n", spec.Name, prep.SweepID, out.Done, out.Failed, out.Pending, searchCounts(out.PointCounts))
		if runErr != nil {
			return runErr
		}
		return nil
	}
	if out.State == store.SweepCancelled {
		fmt.Fprintf(env.Stdout, "sweep %s (id %d) was cancelled: %d done, %d failed, %d cancelled%s; units restored. "+
			"Run the same command again to resume it here, or `specsweep resume %d` queues it for the daemon.\n",
			spec.Name, prep.SweepID, out.Done, out.Failed, out.Cancelled, searchCounts(out.PointCounts), prep.SweepID)
		return runErr
	}
	if err := printResults(ctx, env.Stdout, st, prep.SweepID, dbFile); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	if out.State != store.SweepDone {
		return exitError{code: ExitFailure, err: fmt.Errorf("sweep %s ended %s", spec.Name, out.State)}
	}
	return nil
}

// resumedFrom says, for the line of a resumed sweep, what state it was found in when that is worth
// saying: ", cancelled before: its cancelled points run again", ", which was queued for the daemon:
// it runs here now", ", whose process died (...)".
func resumedFrom(prior store.Sweep) string {
	switch shown, note := shownState(prior, orchestrator.LocalLiveness(time.Now())); {
	case prior.State == store.SweepCancelled:
		return ", cancelled before: its cancelled points run again"
	case prior.State == store.SweepQueued:
		return ", which was queued for the daemon: it runs here now"
	case note != "":
		return fmt.Sprintf(", %s: %s", shown, strings.SplitN(note, ";", 2)[0])
	}
	return ""
}

// printFinished answers `run` of a spec whose sweep already finished: a done sweep's results (exit
// 0), or a failed sweep's results with each failed point's cause (exit 1), with how to start afresh.
func printFinished(ctx context.Context, env Env, st *store.DB, sw store.Sweep, dbFile string) error {
	if sw.State == store.SweepDone {
		fmt.Fprintf(env.Stdout, "sweep %s (id %d) already finished (done, %s); its results follow. "+
			"`specsweep run --new SPEC` runs it again as a new sweep of this name.\n\n", sw.Name, sw.ID, countsText(sw))
		return printResults(ctx, env.Stdout, st, sw.ID, dbFile)
	}
	fmt.Fprintf(env.Stdout, "sweep %s (id %d) already finished: it failed (%s); its results and each failed point's cause follow. "+
		"`specsweep run --new SPEC` starts afresh (a new sweep of this name); `specsweep resume %d` queues this one for the daemon "+
		"(its failed points stay failed).\n\n", sw.Name, sw.ID, countsText(sw), sw.ID)
	if err := printResults(ctx, env.Stdout, st, sw.ID, dbFile); err != nil {
		return err
	}
	return exitError{code: ExitFailure, err: fmt.Errorf("sweep %s (id %d) is failed; nothing was run", sw.Name, sw.ID)}
}

// lockSweep keeps two processes from running the same sweep of one database at once (each would
// take the other's running points for crashed ones). The lock dies with the process.
func lockSweep(dbFile, name string) (func(), error) {
	// One lock file per database and name, whatever path the database was named by.
	if abs, err := filepath.Abs(dbFile); err == nil {
		dbFile = abs
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			dbFile = real
		}
	}
	p := dbFile + ".lock-" + name
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock sweep %s: %w", name, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("sweep %s is being run by another specsweep process on %s (lock %s)", name,
				filepath.Base(dbFile), p)
		}
		return nil, fmt.Errorf("lock sweep %s: %w", name, err)
	}
	return func() { f.Close() }, nil
}

func newLogger(w io.Writer, format string, tty bool) *slog.Logger {
	if tty {
		// The live display says what happens; only warnings and errors get log lines.
		return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}

// firstLine is the first line of a multi-line detail.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
