package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
)

// printResults writes a sweep's results: first, when points do not answer as the baseline does,
// the output check's block (printMismatches); one row per point with output tok/s and speedup at
// each concurrency level and the accept length, each the median over the repeats of a level that
// counts, as the report aggregates them (report.LoadID, sweep.Repeats), with a CHECK column when some point has an output check;
// then the failed points with their class and first line of evidence, then where the data is.
func printResults(ctx context.Context, w io.Writer, st *store.DB, sweepID int64, dbFile string) error {
	s, err := report.LoadID(ctx, st, sweepID)
	if err != nil {
		return err
	}
	label := func(p *report.Point) []string {
		return []string{p.Method, optional(p.Requested[0]), optional(p.Requested[1]), optional(p.Requested[2]), strconv.Itoa(p.TP)}
	}
	if ms := sweepMismatches(s); len(ms) > 0 {
		if err := printMismatches(w, ms); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	checked := s.Checked()
	fmt.Fprintln(w, "Results (output tok/s and speedup over the baseline at the same tp and concurrency):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"METHOD", "STEPS", "TOPK", "DRAFT", "TP"}
	if checked {
		head = append(head, "CHECK")
	}
	for _, c := range s.Levels {
		head = append(head, fmt.Sprintf("c=%d tok/s", c), "speedup")
	}
	head = append(head, "ACCEPT", "")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, p := range s.Points {
		if len(p.Cells) == 0 {
			continue
		}
		cells := label(p)
		if checked {
			cells = append(cells, checkCell(p.OutputCheck))
		}
		for _, c := range s.Levels {
			x, ok := p.Cells[c]
			if !ok {
				cells = append(cells, "-", "-")
				continue
			}
			tok := fmtStat(x.TokS, 1)
			if s.Precision != nil {
				tok += " " + report.IntervalWords(x)
			}
			cells = append(cells, tok, fmtSpeedup(x.Speedup))
		}
		cells = append(cells, fmtStat(p.Accept(), 2))
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if s.Precision != nil {
		fmt.Fprintf(w, "±: the half-width of the level's confidence interval of output tok/s (%s); *: the level ran to the cap before reaching it.\n",
			s.Precision.Words(s.MaxRequests))
	}
	if checked {
		fmt.Fprintln(w, "CHECK: the lossless output check against the baseline of the same tp (ref: that baseline; MISMATCH: does not answer as it does; -: not checked).")
	}
	if err := printSources(w, s); err != nil {
		return err
	}

	var pruned []prunedPoint
	for _, p := range s.Pruned() {
		pruned = append(pruned, prunedPoint{label: fmt.Sprintf("%s tp=%d", p.Label(), p.TP), reason: p.Reason})
	}
	if err := printPruned(w, pruned); err != nil {
		return err
	}

	var failed []failedPoint
	for _, p := range s.Points {
		if p.State == string(store.PointFailed) {
			failed = append(failed, failedPoint{label: fmt.Sprintf("%s tp=%d", p.Label(), p.TP), class: p.FailureClass, detail: p.FailureDetail})
		}
	}
	printFailures(w, failed)
	last := 1
	if len(s.Levels) > 0 {
		last = s.Levels[len(s.Levels)-1]
	}
	fmt.Fprintf(w, "\nStored in %s (sweep id %d). Query it, e.g.:\n  specsweep runs --db %s --sweep %d --where \"concurrency = %d\" --sort \"output_tok_s DESC\"\n",
		dbFile, sweepID, dbFile, sweepID, last)
	return nil
}

// failedPoint is a failed point's label and its stored failure: the class, and the detail (the cause
// on its first line, then the evidence lines from the server's log, orchestrator.failureDetail).
type failedPoint struct{ label, class, detail string }

// printFailures lists the failed points in plan order, each with its cause (its failure class and
// the first line of its detail) and, indented under it, its first evidence line (the server's log
// line that shows it, when there is one); nothing when no point failed.
func printFailures(w io.Writer, pts []failedPoint) {
	if len(pts) == 0 {
		return
	}
	width := 0
	for _, p := range pts {
		width = max(width, len(p.label))
	}
	fmt.Fprintf(w, "\nFailed points (%d): cause, then the first evidence line from the server's log:\n", len(pts))
	for _, p := range pts {
		cause, evidence, _ := strings.Cut(p.detail, "\n")
		if cause == "" {
			cause = "(no detail recorded)"
		}
		class := p.class
		if class == "" {
			class = "failed"
		}
		fmt.Fprintf(w, "  %-*s  %s: %s\n", width, p.label, class, cause)
		if evidence = strings.TrimSpace(firstLine(evidence)); evidence != "" {
			fmt.Fprintf(w, "  %-*s    %s\n", width, "", evidence)
		}
	}
}

// prunedPoint is a point the search decided need not run, with its reason.
type prunedPoint struct{ label, reason string }

// printPruned lists the points the search pruned, one line each: label and reason; nothing when
// there are none (a grid sweep).
func printPruned(w io.Writer, pts []prunedPoint) error {
	if len(pts) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nPruned by the search (%d):\n", len(pts))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, p := range pts {
		why := p.reason
		if why == "" {
			why = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", p.label, firstLine(why))
	}
	return tw.Flush()
}

// searchCounts are the counts only a search gives, each when not zero: ", 3 waiting, 5 pruned"
// ("" for a grid sweep).
func searchCounts(c store.PointCounts) string {
	var s string
	if c.Waiting > 0 {
		s += fmt.Sprintf(", %d waiting", c.Waiting)
	}
	if c.Pruned > 0 {
		s += fmt.Sprintf(", %d pruned", c.Pruned)
	}
	return s
}

// optional is a nullable parameter: "-" when not given.
func optional(p *int) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(*p)
}

// fmtStat is a median over repeats, "-" when nothing was recorded.
func fmtStat(s report.Stat, digits int) string {
	if !s.OK() {
		return "-"
	}
	return strconv.FormatFloat(s.Median, 'f', digits, 64)
}

func fmtSpeedup(s report.Stat) string {
	if !s.OK() {
		return "-"
	}
	return strconv.FormatFloat(s.Median, 'f', 2, 64) + "x"
}

func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printSources writes, for a sweep measured on several prompt sources (or a named set), that the
// table above is their weighted mix, each source's own winner per tp and level, and where the
// winners differ (report.SourceSentences).
func printSources(w io.Writer, s *report.Sweep) error {
	if !s.Mixed() {
		return nil
	}
	fmt.Fprintln(w, "\nBest per prompt source (the table above is their weighted mix, the answer to deploy):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tWEIGHT\tTP\tCONCURRENCY\tBEST\tTOK/S\tACCEPT\t")
	for _, src := range s.Sources {
		for _, b := range report.BestPerLevelOn(s, src.Key()) {
			fmt.Fprintf(tw, "%s\t%.0f%%\t%d\t%d\t%s\t%s\t%s\t\n", src.Label(), 100*src.Weight, b.TP, b.Concurrency,
				b.Best.Point.Label(), fmtStat(b.Best.TokS, 1), fmtStat(b.Best.Accept, 2))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, line := range report.SourceSentences(s)[1:] {
		fmt.Fprintln(w, line)
	}
	return nil
}
