package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/specsweep/specsweep/store"
)

// printResults writes a sweep's results: one row per point with output tok/s and speedup at each
// concurrency level (mean over repeats of the ok runs) and the mean accept length, then the failed
// points with their class and first line of evidence, then where the data is.
func printResults(ctx context.Context, w io.Writer, st *store.DB, sweepID int64, dbFile string) error {
	rows, err := st.Query(ctx, `SELECT point_id, method, num_steps, topk, num_draft_tokens, tp, concurrency,
			avg(output_tok_s), avg(speedup), avg(accept_length)
		FROM run_detail WHERE sweep_id = ? AND status = 'ok'
		GROUP BY point_id, concurrency ORDER BY min(plan_order), concurrency`, sweepID)
	if err != nil {
		return err
	}
	type cell struct{ tok, speedup any }
	type row struct {
		label    []string
		byLevel  map[int64]cell
		accept   float64
		accepts  int
		pointID  string
		hasLevel bool
	}
	var (
		order  []*row
		byID   = map[string]*row{}
		levels []int64
		seen   = map[int64]bool{}
	)
	for _, v := range rows.Values {
		id := v[0].(string)
		r, ok := byID[id]
		if !ok {
			r = &row{pointID: id, byLevel: map[int64]cell{},
				label: []string{fmt.Sprint(v[1]), nullable(v[2]), nullable(v[3]), nullable(v[4]), fmt.Sprint(v[5])}}
			byID[id] = r
			order = append(order, r)
		}
		c := v[6].(int64)
		if !seen[c] {
			seen[c] = true
			levels = append(levels, c)
		}
		r.byLevel[c] = cell{v[7], v[8]}
		if a, ok := v[9].(float64); ok {
			r.accept += a
			r.accepts++
		}
	}
	slices.Sort(levels)
	fmt.Fprintln(w, "Results (output tok/s and speedup over the baseline at the same tp and concurrency):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"METHOD", "STEPS", "TOPK", "DRAFT", "TP"}
	for _, c := range levels {
		head = append(head, fmt.Sprintf("c=%d tok/s", c), "speedup")
	}
	head = append(head, "ACCEPT", "")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range order {
		cells := append([]string(nil), r.label...)
		for _, c := range levels {
			x, ok := r.byLevel[c]
			if !ok {
				cells = append(cells, "-", "-")
				continue
			}
			cells = append(cells, fmtFloat(x.tok, 1), fmtSpeedup(x.speedup))
		}
		if r.accepts > 0 {
			cells = append(cells, strconv.FormatFloat(r.accept/float64(r.accepts), 'f', 2, 64))
		} else {
			cells = append(cells, "-")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	failed, err := st.Query(ctx, `SELECT method, num_steps, topk, num_draft_tokens, tp, failure_class, failure_detail
		FROM point_summary WHERE sweep_id = ? AND state = 'failed' ORDER BY point_id`, sweepID)
	if err != nil {
		return err
	}
	if len(failed.Values) > 0 {
		fmt.Fprintf(w, "\nFailed points (%d):\n", len(failed.Values))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "METHOD\tSTEPS\tTOPK\tDRAFT\tTP\tCLASS\tWHY")
		for _, v := range failed.Values {
			fmt.Fprintf(tw, "%v\t%s\t%s\t%s\t%v\t%v\t%s\n", v[0], nullable(v[1]), nullable(v[2]), nullable(v[3]), v[4], v[5],
				firstLine(fmt.Sprint(nullable(v[6]))))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nStored in %s (sweep id %d). Query it, e.g.:\n  specsweep runs --db %s --sweep %d --where \"concurrency = %d\" --sort \"output_tok_s DESC\"\n",
		dbFile, sweepID, dbFile, sweepID, lastOr(levels, 1))
	return nil
}

func nullable(v any) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(v)
}

func fmtFloat(v any, digits int) string {
	f, ok := v.(float64)
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(f, 'f', digits, 64)
}

func fmtSpeedup(v any) string {
	f, ok := v.(float64)
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(f, 'f', 2, 64) + "x"
}

func lastOr(s []int64, def int64) int64 {
	if len(s) == 0 {
		return def
	}
	return s[len(s)-1]
}

func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
