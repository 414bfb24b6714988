package cli

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/specsweep/specsweep/report"
)

func reportCmd() command {
	return newCommand("report", "SWEEP",
		"A report of a sweep with charts: best configuration per concurrency, Pareto front, failures, provenance (HTML, Markdown or LaTeX).", reportRun).
		withExamples("specsweep report quickstart                 # report-quickstart-ID/report.html",
			"specsweep report --format md -o results 3",
			"specsweep report --compare 4 3               # sweep 4 against sweep 3, point by point",
			"specsweep report --format tex --fragment -o paper 3")
}

type reportOptions struct {
	DB       string // --db
	Format   string // --format: one of report.Formats
	Out      string // -o: the output directory, "" for report-NAME-ID
	Compare  string // --compare: a second sweep
	Fragment bool   // --fragment
	Sweep    string // SWEEP
}

func (o *reportOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", dbUsage)
	fs.StringVar(&o.Format, "format", "html", "report `FORMAT`: "+strings.Join(report.Formats, ", "))
	fs.StringVar(&o.Out, "o", "", "output `DIR` (default report-NAME-ID)")
	fs.StringVar(&o.Compare, "compare", "", "a second `SWEEP` (id or name) to compare against SWEEP, point by point and best by best")
	fs.BoolVar(&o.Fragment, "fragment", false, "tex: write a fragment to \\input into a paper instead of a whole document")
}

func (o *reportOptions) args(pos []string) (err error) {
	o.Sweep, err = oneArg(pos, "SWEEP")
	return err
}

// reportRun writes the report of o.Sweep and prints its main file's path.
func reportRun(ctx context.Context, env Env, o *reportOptions) error {
	if !isReportFormat(o.Format) {
		return usagef("unknown --format %q (want one of %s)%s", o.Format, strings.Join(report.Formats, ", "), didYouMean(o.Format, report.Formats, ""))
	}
	if o.Fragment && o.Format != "tex" {
		return usagef("--fragment needs --format tex")
	}
	st, sw, err := openRecorded(ctx, env, o.DB, o.Sweep, "report")
	if err != nil {
		return err
	}
	defer st.Close()
	s, err := report.LoadID(ctx, st, sw.ID)
	if err != nil {
		return err
	}
	note, err := recordedWords("report", sw, countRuns(s))
	if err != nil {
		return err
	}
	opt := report.Options{Format: o.Format, Dir: o.Out, Fragment: o.Fragment, Generator: "specsweep " + Version()}
	if opt.Dir == "" {
		opt.Dir = fmt.Sprintf("report-%s-%d", s.Name, s.ID)
	}
	if o.Compare != "" {
		other, err := findSweep(ctx, st, o.Compare)
		if err != nil {
			return err
		}
		if other.Template() {
			_, err := recordedWords("report", other, 0)
			return err
		}
		if opt.Compare, err = report.LoadID(ctx, st, other.ID); err != nil {
			return err
		}
	}
	files, err := report.Write(s, opt)
	if err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintln(env.Stderr, note)
	}
	if len(files) > 1 {
		fmt.Fprintf(env.Stdout, "%s (and %d chart files in %s)\n", files[0], len(files)-1, filepath.Join(opt.Dir, "charts"))
	} else {
		fmt.Fprintln(env.Stdout, files[0])
	}
	return nil
}

// countRuns counts the runs a loaded sweep's cells aggregate.
func countRuns(s *report.Sweep) int {
	n := 0
	for _, p := range s.Points {
		for _, c := range p.Cells {
			n += c.TokS.N
		}
	}
	return n
}

func isReportFormat(f string) bool {
	for _, ok := range report.Formats {
		if f == ok {
			return true
		}
	}
	return false
}
