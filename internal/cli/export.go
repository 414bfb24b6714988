package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/specsweep/specsweep/report"
)

func exportCmd() command {
	return newCommand("export", "SWEEP",
		"Write a sweep's runs as bench_serving-compatible JSON lines (plus each point's configuration).", exportRun).
		withExamples("specsweep export quickstart > runs.jsonl")
}

type exportOptions struct {
	DB     string // --db
	Format string // --format: jsonl
	Sweep  string // SWEEP
}

func (o *exportOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", dbUsage)
	fs.StringVar(&o.Format, "format", "jsonl", formatUsage(exportFormats, false)+" (bench_serving's lines)")
}

func (o *exportOptions) args(pos []string) (err error) {
	o.Sweep, err = oneArg(pos, "SWEEP")
	return err
}

// exportFormats are export's --format values.
var exportFormats = []string{"jsonl"}

// exportRun writes the runs of o.Sweep as JSON lines.
func exportRun(ctx context.Context, env Env, o *exportOptions) error {
	if _, err := outputFormat(o.Format, false, exportFormats...); err != nil {
		return err
	}
	st, s, err := openRecorded(ctx, env, o.DB, o.Sweep, "export")
	if err != nil {
		return err
	}
	defer st.Close()
	n, err := report.ExportJSONL(ctx, st, s.ID, env.Stdout)
	if err != nil {
		return err
	}
	// A note for people on stderr: stdout stays JSON lines.
	if note, _ := recordedWords("export", s, n); note != "" {
		fmt.Fprintln(env.Stderr, note)
	} else if n == 0 {
		fmt.Fprintf(env.Stderr, "note: sweep %s (id %d) is %s and has no ok run to export (%s)\n", s.Name, s.ID, stateWord(s), countsText(s))
	}
	return nil
}
