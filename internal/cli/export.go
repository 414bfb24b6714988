package cli

import (
	"context"
	"flag"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
)

func exportCmd() command {
	return newCommand("export", "SWEEP",
		"Write a sweep's runs as bench_serving-compatible JSON lines (plus each point's configuration).", exportRun)
}

type exportOptions struct {
	DB     string // --db
	Format string // --format: jsonl
	Sweep  string // SWEEP
}

func (o *exportOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", dbUsage)
	fs.StringVar(&o.Format, "format", "jsonl", "output format: jsonl")
}

func (o *exportOptions) args(pos []string) (err error) {
	o.Sweep, err = oneArg(pos, "SWEEP")
	return err
}

// exportRun writes the runs of o.Sweep as JSON lines.
func exportRun(ctx context.Context, env Env, o *exportOptions) error {
	if o.Format != "jsonl" {
		return usagef("unknown --format %q (want jsonl)", o.Format)
	}
	st, err := store.OpenReadOnly(ctx, dbPath(env, o.DB))
	if err != nil {
		return err
	}
	defer st.Close()
	s, err := st.FindSweep(ctx, o.Sweep)
	if err != nil {
		return err
	}
	_, err = report.ExportJSONL(ctx, st, s.ID, env.Stdout)
	return err
}
