package cli

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/specsweep/specsweep/internal/tabular"
	"github.com/specsweep/specsweep/report"
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
			best := fs.Bool("best", false, "one row per sweep, tp and concurrency: the configuration with the best median output tok/s over the repeats of the ok runs --where selects, with speedup, runner-up, margin and noise verdict")
			columns := fs.String("columns", "", "comma-separated columns to show, in this order (default: all of the view's, or of --best's)")
			return func(ctx context.Context, env Env, pos []string) error {
				if len(pos) > 0 {
					return usagef("unexpected argument %q (use --sweep or --where)", pos[0])
				}
				if *best && *sortBy != "" {
					return usagef("--sort does not apply to --best (its rows come by sweep, tp and concurrency)")
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
				q := store.RunsQuery{Sweep: *sw, Where: *where, OrderBy: *sortBy, Limit: *limit}
				var cols []string
				var vals [][]any
				var skipped []string // mismatching points --best left out
				if *best {
					q.Limit = 0
					sweeps, err := report.FromRuns(ctx, st, q)
					if err != nil {
						return err
					}
					cols, vals = bestRows(sweeps)
					skipped = measuredMismatches(sweeps)
					if *limit > 0 && len(vals) > *limit {
						vals = vals[:*limit]
					}
				} else {
					rows, err := st.QueryRuns(ctx, q)
					if err != nil {
						return err
					}
					cols, vals = rows.Columns, rows.Values
				}
				if *columns != "" {
					if cols, vals, err = selectColumns(cols, vals, *columns); err != nil {
						return err
					}
				}
				if err := tabular.Write(env.Stdout, *format, cols, vals); err != nil {
					return err
				}
				if len(skipped) > 0 {
					// A note for people: under the table, or on stderr beside CSV and JSON.
					note := env.Stdout
					if *format != "table" {
						note = env.Stderr
					}
					fmt.Fprintf(note, "note: skipped %d mismatching point(s) (their outputs differ from the baseline's: the lossless output check failed; `specsweep status SWEEP` shows where): %s\n",
						len(skipped), strings.Join(skipped, ", "))
				}
				return nil
			}
		},
	}
}

// measuredMismatches names the points report.BestPerLevel leaves out of the sweeps' ranking because
// their output check failed: "eagle3 s=5 k=1 n=6 tp=4 (sweep climb)".
func measuredMismatches(sweeps []*report.Sweep) []string {
	var out []string
	for _, s := range sweeps {
		for _, p := range s.Mismatches() {
			if len(p.Cells) > 0 {
				out = append(out, fmt.Sprintf("%s tp=%d (sweep %s)", p.Label(), p.TP, s.Name))
			}
		}
	}
	return out
}

// bestColumns are the columns of `runs --best`.
var bestColumns = []string{"sweep", "sweep_id", "tp", "concurrency", "point_id", "method", "num_steps", "topk",
	"num_draft_tokens", "output_tok_s", "output_tok_s_min", "output_tok_s_max", "repeats", "speedup",
	"runner_up", "runner_up_tok_s", "margin_pct", "noise", "candidates"}

// bestRows ranks the configurations of each sweep, tp and concurrency level (report.BestPerLevel:
// medians over repeats; a point whose output check failed never competes) and returns one row per
// level.
func bestRows(sweeps []*report.Sweep) ([]string, [][]any) {
	opt := func(v int, baseline bool) any {
		if baseline {
			return nil
		}
		return int64(v)
	}
	var vals [][]any
	for _, s := range sweeps {
		for _, b := range report.BestPerLevel(s) {
			p := b.Best.Point
			row := []any{s.Name, s.ID, int64(b.TP), int64(b.Concurrency), p.ID, p.Method, opt(p.NumSteps, p.Baseline),
				opt(p.TopK, p.Baseline), opt(p.NumDraftTokens, p.Baseline), b.Best.TokS.Median, b.Best.TokS.Min,
				b.Best.TokS.Max, int64(b.Best.TokS.N), nil, nil, nil, nil, string(b.Noise), int64(b.Candidates)}
			if b.Best.Speedup.OK() {
				row[13] = b.Best.Speedup.Median
			}
			if r := b.RunnerUp; r != nil {
				row[14], row[15], row[16] = r.Point.Label(), r.TokS.Median, b.MarginPct
			}
			vals = append(vals, row)
		}
	}
	return bestColumns, vals
}

// selectColumns keeps the named columns (comma-separated), in the order given.
func selectColumns(cols []string, vals [][]any, list string) ([]string, [][]any, error) {
	idx := map[string]int{}
	for i, c := range cols {
		idx[c] = i
	}
	var pick []int
	var names []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		i, ok := idx[n]
		if !ok {
			return nil, nil, usagef("--columns: unknown column %q (available: %s)", n, strings.Join(cols, ", "))
		}
		pick = append(pick, i)
		names = append(names, n)
	}
	if len(pick) == 0 {
		return nil, nil, usagef("--columns: no column named")
	}
	out := make([][]any, len(vals))
	for r, v := range vals {
		row := make([]any, len(pick))
		for j, i := range pick {
			row[j] = v[i]
		}
		out[r] = row
	}
	return names, out, nil
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
				// waiting and pruned only a search gives: their columns appear when some sweep has them.
				searched := slices.ContainsFunc(list, func(s store.Sweep) bool { return s.Waiting+s.Pruned > 0 })
				cols := []string{"id", "name", "state", "points", "done", "failed", "pending", "running", "cancelled"}
				if searched {
					cols = append(cols, "waiting", "pruned")
				}
				cols = append(cols, "spec_hash", "created_at")
				vals := make([][]any, 0, len(list))
				for _, s := range list {
					row := []any{s.ID, s.Name, string(s.State), s.Points, s.Done, s.Failed, s.Pending, s.Running, s.Cancelled}
					if searched {
						row = append(row, s.Waiting, s.Pruned)
					}
					vals = append(vals, append(row, shortHash(s.SpecHash), formatTime(s.CreatedAt, *format)))
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
