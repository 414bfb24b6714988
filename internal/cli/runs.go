package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/specsweep/specsweep/internal/tabular"
	"github.com/specsweep/specsweep/orchestrator"
	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
)

func runsCmd() command {
	return newCommand("runs", "",
		"Past runs from the store (the run_summary view), filtered with a SQL expression.", runsRun).
		withExamples("specsweep runs --sweep quickstart --where \"concurrency = 16\" --sort \"output_tok_s DESC\"",
			"specsweep runs --best --columns concurrency,method,num_steps,speedup,noise",
			"specsweep runs --format csv > runs.csv")
}

type runsOptions struct {
	DB      string // --db
	Sweep   string // --sweep: an id or a name
	Where   string // --where: an SQL expression over run_summary
	Format  string // --format: one of tabular.Formats
	Sort    string // --sort: an SQL ORDER BY list
	Limit   int    // --limit: 0 for all
	Best    bool   // --best
	Columns string // --columns: comma-separated
	Wide    bool   // --wide: every column in the table
}

// runsTableColumns are the columns `runs` shows in a table by default: the configuration, the level
// and the figures a person compares first. --wide shows all of run_summary's, csv and json keep
// them all.
var runsTableColumns = []string{"sweep", "method", "num_steps", "topk", "num_draft_tokens", "tp", "concurrency", "repeat",
	"status", "output_tok_s", "speedup", "accept_length", "ttft_p99_ms", "tpot_p50_ms", "started_at"}

// defaultRunsColumns are runsTableColumns, with the prompt source's columns (dataset,
// input_tokens) after repeat when the rows were measured on more than one, or on a named set.
func defaultRunsColumns(cols []string, vals [][]any) []string {
	ds, in := slices.Index(cols, "dataset"), slices.Index(cols, "input_tokens")
	if ds < 0 || in < 0 {
		return runsTableColumns
	}
	seen := map[string]bool{}
	named := false
	for _, v := range vals {
		seen[fmt.Sprint(v[ds], "|", v[in])] = true
		named = named || v[ds] != nil
	}
	if len(seen) < 2 && !named {
		return runsTableColumns
	}
	out := slices.Clone(runsTableColumns)
	i := slices.Index(out, "repeat") + 1
	return slices.Insert(out, i, "dataset", "input_tokens")
}

func (o *runsOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", dbUsage)
	fs.StringVar(&o.Sweep, "sweep", "", "only this `SWEEP`: its id, or its name (the newest sweep of that name)")
	fs.StringVar(&o.Where, "where", "", "`SQL` expression over run_summary's columns, e.g. \"concurrency = 16 AND tp = 4\"")
	fs.StringVar(&o.Format, "format", "table", formatUsage(tabular.Formats, false))
	fs.StringVar(&o.Sort, "sort", "", "`SQL` ORDER BY list over run_summary's columns, e.g. \"output_tok_s DESC\"")
	fs.IntVar(&o.Limit, "limit", 0, "at most `N` rows (0: all)")
	fs.BoolVar(&o.Best, "best", false, "one row per sweep, tp and concurrency: the configuration with the best median output tok/s over the repeats of the ok runs --where selects, with speedup, runner-up, margin and noise verdict")
	fs.StringVar(&o.Columns, "columns", "", "comma-separated `LIST` of the columns to show, in this order (default: in a table, "+
		strings.Join(runsTableColumns, ",")+"; in csv and json, all of the view's; with --best, all of its)")
	fs.BoolVar(&o.Wide, "wide", false, "a table of every column of run_summary (times stay local)")
}

func (o *runsOptions) args(pos []string) error {
	if len(pos) > 0 {
		return usagef("unexpected argument %q (use --sweep or --where)", pos[0])
	}
	return nil
}

// runsRun prints the runs o selects, or with o.Best the best configuration of each level.
func runsRun(ctx context.Context, env Env, o *runsOptions) error {
	if o.Best && o.Sort != "" {
		return usagef("--sort does not apply to --best (its rows come by sweep, tp and concurrency)")
	}
	if err := checkFormat(o.Format); err != nil {
		return err
	}
	if o.Wide && (o.Columns != "" || o.Format != "table") {
		return usagef("--wide is every column in a table: not with --columns or --format %s", o.Format)
	}
	if o.Limit < 0 {
		return usagef("--limit must not be negative")
	}
	st, err := store.OpenReadOnly(ctx, dbPath(env, o.DB))
	if err != nil {
		return err
	}
	defer st.Close()
	q := store.RunsQuery{Where: o.Where, OrderBy: o.Sort, Limit: o.Limit}
	if o.Sweep != "" {
		sw, err := findSweep(ctx, st, o.Sweep)
		if err != nil {
			return err
		}
		q.SweepID = sw.ID
	}
	var cols []string
	var vals [][]any
	var skipped []string // mismatching points --best left out
	if o.Best {
		q.Limit = 0
		sweeps, err := report.FromRuns(ctx, st, q)
		if err != nil {
			return badQueryWords(err, o.Where, o.Sort)
		}
		cols, vals = bestRows(sweeps)
		skipped = measuredMismatches(sweeps)
		if o.Limit > 0 && len(vals) > o.Limit {
			vals = vals[:o.Limit]
		}
	} else {
		rows, err := st.QueryRuns(ctx, q)
		if err != nil {
			return badQueryWords(err, o.Where, o.Sort)
		}
		cols, vals = rows.Columns, rows.Values
	}
	columns := o.Columns
	if columns == "" && o.Format == "table" && !o.Best && !o.Wide {
		columns = strings.Join(defaultRunsColumns(cols, vals), ",")
	}
	if columns != "" {
		if cols, vals, err = selectColumns(cols, vals, columns); err != nil {
			return err
		}
	}
	if o.Format == "table" {
		localTimes(cols, vals, "started_at", "finished_at")
	}
	if err := tabular.Write(env.Stdout, o.Format, cols, vals); err != nil {
		return err
	}
	if len(skipped) > 0 {
		// A note for people: under the table, or on stderr beside CSV and JSON.
		note := env.Stdout
		if o.Format != "table" {
			note = env.Stderr
		}
		fmt.Fprintf(note, "note: skipped %d mismatching point(s) (their outputs differ from the baseline's: the lossless output check failed; `specsweep status SWEEP` shows where): %s\n",
			len(skipped), strings.Join(skipped, ", "))
	}
	return nil
}

// localTimes shows the named time columns (unix ms, the store's one representation of time) as local
// times for a person, with the zone's name.
func localTimes(cols []string, vals [][]any, names ...string) {
	for i, c := range cols {
		if !slices.Contains(names, c) {
			continue
		}
		for _, row := range vals {
			if ms, ok := row[i].(int64); ok {
				row[i] = formatTime(time.UnixMilli(ms), "table")
			}
		}
	}
}

// badQueryWords words a --where or --sort the store refused: the expression, SQLite's reason and,
// for an unknown column, the columns there are.
func badQueryWords(err error, where, sort string) error {
	if !errors.Is(err, store.ErrBadQuery) {
		return err
	}
	why := err.Error()
	if m, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range m.Unwrap() {
			if !errors.Is(e, store.ErrBadQuery) {
				why = e.Error()
			}
		}
	}
	var given []string
	if where != "" {
		given = append(given, fmt.Sprintf("--where %q", where))
	}
	if sort != "" {
		given = append(given, fmt.Sprintf("--sort %q", sort))
	}
	what := strings.Join(given, " ")
	msg := fmt.Sprintf("bad query: %s: %s", what, why)
	if strings.Contains(why, "no such column") {
		summary, detail := store.RunColumns()
		msg += fmt.Sprintf("; the columns are run_summary's: %s; and run_detail's: %s (docs/schema.md)",
			strings.Join(summary, ", "), strings.Join(detail, ", "))
	}
	return wordedError{msg: msg, err: err}
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
	return newCommand("sweeps", "",
		"List the sweeps in the store with their state and point counts.", sweepsRun).
		withExamples("specsweep sweeps", "specsweep sweeps --format json | jq '.[] | select(.state == \"failed\")'")
}

// listOptions are the options of a command that lists a table of the store (sweeps, schedules).
type listOptions struct {
	DB     string // --db
	Format string // --format: one of tabular.Formats
}

func (o *listOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", dbUsage)
	fs.StringVar(&o.Format, "format", "table", formatUsage(tabular.Formats, false))
}

func (o *listOptions) args(pos []string) error { return noArgs(pos) }

type sweepsOptions = listOptions

// sweepsRun lists the sweeps of the store.
func sweepsRun(ctx context.Context, env Env, o *sweepsOptions) error {
	if err := checkFormat(o.Format); err != nil {
		return err
	}
	st, err := store.OpenReadOnly(ctx, dbPath(env, o.DB))
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
	live := orchestrator.LocalLiveness(time.Now())
	for _, s := range list {
		state, _ := shownState(s, live) // a running sweep whose process died reads interrupted
		row := []any{s.ID, s.Name, state, s.Points, s.Done, s.Failed, s.Pending, s.Running, s.Cancelled}
		if searched {
			row = append(row, s.Waiting, s.Pruned)
		}
		vals = append(vals, append(row, shortHash(s.SpecHash), formatTime(s.CreatedAt, o.Format)))
	}
	return tabular.Write(env.Stdout, o.Format, cols, vals)
}

func checkFormat(f string) error {
	_, err := outputFormat(f, false, tabular.Formats...)
	return err
}

// formatTime shows a time as local text for people, with the zone's name ("2026-12-01 23:00:05
// CET"); machine formats keep unix milliseconds, the store's one representation of time.
func formatTime(t time.Time, format string) any {
	if t.IsZero() {
		return nil
	}
	if format != "table" {
		return t.UnixMilli()
	}
	return t.Local().Format("2006-01-02 15:04:05 MST")
}
