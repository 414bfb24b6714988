package cli

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
)

func reportCmd() command {
	return command{
		name:    "report",
		args:    "SWEEP",
		summary: "A report of a sweep with charts: best configuration per concurrency, Pareto front, failures, provenance (HTML, Markdown or LaTeX).",
		setup: func(fs *flag.FlagSet) func(context.Context, Env, []string) error {
			db := fs.String("db", "", "database file (default $SPECSWEEP_DB or ./specsweep.db)")
			format := fs.String("format", "html", "report format: "+strings.Join(report.Formats, ", "))
			out := fs.String("o", "", "output directory (default report-NAME-ID)")
			cmp := fs.String("compare", "", "a second sweep (id or name) to compare against SWEEP, point by point and best by best")
			fragment := fs.Bool("fragment", false, "tex: write a fragment to \\input into a paper instead of a whole document")
			return func(ctx context.Context, env Env, pos []string) error {
				ref, err := oneArg(pos, "SWEEP")
				if err != nil {
					return err
				}
				if !isReportFormat(*format) {
					return usagef("unknown --format %q (want one of %s)", *format, strings.Join(report.Formats, ", "))
				}
				if *fragment && *format != "tex" {
					return usagef("--fragment needs --format tex")
				}
				st, err := store.OpenReadOnly(ctx, dbPath(env, *db))
				if err != nil {
					return err
				}
				defer st.Close()
				s, err := report.Load(ctx, st, ref)
				if err != nil {
					return err
				}
				opt := report.Options{Format: *format, Dir: *out, Fragment: *fragment, Generator: "specsweep " + Version()}
				if opt.Dir == "" {
					opt.Dir = fmt.Sprintf("report-%s-%d", s.Name, s.ID)
				}
				if *cmp != "" {
					if opt.Compare, err = report.Load(ctx, st, *cmp); err != nil {
						return err
					}
				}
				files, err := report.Write(s, opt)
				if err != nil {
					return err
				}
				if len(files) > 1 {
					fmt.Fprintf(env.Stdout, "%s (and %d chart files in %s)\n", files[0], len(files)-1, filepath.Join(opt.Dir, "charts"))
				} else {
					fmt.Fprintln(env.Stdout, files[0])
				}
				return nil
			}
		},
	}
}

func isReportFormat(f string) bool {
	for _, ok := range report.Formats {
		if f == ok {
			return true
		}
	}
	return false
}
