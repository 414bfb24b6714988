package cli

import (
	"context"
	"flag"
	"strings"
	"time"

	"github.com/specsweep/specsweep/internal/tabular"
	"github.com/specsweep/specsweep/store"
)

func runsCmd() command {
	return command{
		name:    "runs",
		args:    "",
		summary: "Past runs from the store (the run_summary view), filtered with a SQL expression.",
		setup: func(fs *flag.FlagSet) func(context.Context, Env, []string) error {
			db := fs.String("db", "", "database file (default $SPECSWEEP_DB or ./specsweep.db)")
			sw := fs.String("sweep", "", "only this sweep: its id, or its name (the latest sweep of that name)")
			where := fs.String("where", "", "SQL expression over run_summary's columns, e.g. \"concurrency = 16 AND tp = 4\"")
			format := fs.String("format", "table", "output format: "+strings.Join(tabular.Formats, ", "))
			sortBy := fs.String("sort", "", "SQL ORDER BY list over run_summary's columns, e.g. \"output_tok_s DESC\"")
			limit := fs.Int("limit", 0, "at most this many rows (0: all)")
			return func(ctx context.Context, env Env, pos []string) error {
				if len(pos) > 0 {
					return usagef("unexpected argument %q (use --sweep or --where)", pos[0])
				}
				if err := checkFormat(*format); err != nil {
					return err
				}
				if *limit < 0 {
					return usagef("--limit must not be negative")
				}
				st, err := store.OpenReadOnly(ctx, dbPath(env, *db))
				if err != nil {
					return err
				}
				defer st.Close()
				rows, err := st.QueryRuns(ctx, store.RunsQuery{Sweep: *sw, Where: *where, OrderBy: *sortBy, Limit: *limit})
				if err != nil {
					return err
				}
				return tabular.Write(env.Stdout, *format, rows.Columns, rows.Values)
			}
		},
	}
}

func sweepsCmd() command {
	return command{
		name:    "sweeps",
		args:    "",
		summary: "List the sweeps in the store with their state and point counts.",
		setup: func(fs *flag.FlagSet) func(context.Context, Env, []string) error {
			db := fs.String("db", "", "database file (default $SPECSWEEP_DB or ./specsweep.db)")
			format := fs.String("format", "table", "output format: "+strings.Join(tabular.Formats, ", "))
			return func(ctx context.Context, env Env, pos []string) error {
				if len(pos) > 0 {
					return usagef("unexpected argument %q", pos[0])
				}
				if err := checkFormat(*format); err != nil {
					return err
				}
				st, err := store.OpenReadOnly(ctx, dbPath(env, *db))
				if err != nil {
					return err
				}
				defer st.Close()
				list, err := st.ListSweeps(ctx)
				if err != nil {
					return err
				}
				cols := []string{"id", "name", "state", "points", "done", "failed", "pending", "running", "cancelled", "spec_hash", "created_at"}
				vals := make([][]any, 0, len(list))
				for _, s := range list {
					vals = append(vals, []any{s.ID, s.Name, string(s.State), s.Points, s.Done, s.Failed, s.Pending, s.Running,
						s.Cancelled, shortHash(s.SpecHash), formatTime(s.CreatedAt, *format)})
				}
				return tabular.Write(env.Stdout, *format, cols, vals)
			}
		},
	}
}

func checkFormat(f string) error {
	for _, ok := range tabular.Formats {
		if f == ok {
			return nil
		}
	}
	return usagef("unknown --format %q (want one of %s)", f, strings.Join(tabular.Formats, ", "))
}

// formatTime shows a time as UTC text for people; machine formats keep unix milliseconds, the
// store's one representation of time.
func formatTime(t time.Time, format string) any {
	if t.IsZero() {
		return nil
	}
	if format != "table" {
		return t.UnixMilli()
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}
