package cli

import (
	"context"
	"flag"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
)

func exportCmd() command {
	return command{
		name:    "export",
		args:    "SWEEP",
		summary: "Write a sweep's runs as bench_serving-compatible JSON lines (plus each point's configuration).",
		setup: func(fs *flag.FlagSet) func(context.Context, Env, []string) error {
			db := fs.String("db", "", "database file (default $SPECSWEEP_DB or ./specsweep.db)")
			format := fs.String("format", "jsonl", "output format: jsonl")
			return func(ctx context.Context, env Env, pos []string) error {
				ref, err := oneArg(pos, "SWEEP")
				if err != nil {
					return err
				}
				if *format != "jsonl" {
					return usagef("unknown --format %q (want jsonl)", *format)
				}
				st, err := store.OpenReadOnly(ctx, dbPath(env, *db))
				if err != nil {
					return err
				}
				defer st.Close()
				s, err := st.FindSweep(ctx, ref)
				if err != nil {
					return err
				}
				_, err = report.ExportJSONL(ctx, st, s.ID, env.Stdout)
				return err
			}
		},
	}
}
