package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/specsweep/specsweep/sweep"
)

// Prompt sources (issue 27; docs/report.md, "Prompt sets and lengths"): a sweep measured on several
// prompt sets or lengths ranks configurations by the weighted mix (Point.Cells), and shows beside it
// each source's own answer and how acceptance moves with content and context length.

// sourceLabel names a source as the tables do, with its weight when there are several.
func sourceLabel(src sweep.Source) string { return src.Label() }

// weightText is a source's share of the traffic, in percent.
func weightText(w float64) string {
	return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", 100*w), "0"), ".") + "%"
}

// sourcesTable is "Best configuration per prompt source": each source's own winner at each tp and
// level, its figures on that source, and how the weighted answer fares there.
func sourcesTable(s *Sweep) Table {
	t := Table{Title: "Best configuration per prompt source",
		Head: []string{"prompt source", "weight", "tp", "concurrency", "best", "output tok/s", "speedup", "accept length", "weighted answer", "its tok/s here"},
		Num:  []bool{false, true, true, true, false, true, true, true, false, true}, Wide: true}
	if !s.Mixed() {
		return t
	}
	weighted := map[[2]int]Best{}
	for _, b := range BestPerLevel(s) {
		weighted[[2]int{b.TP, b.Concurrency}] = b
	}
	for _, src := range s.Sources {
		for _, b := range BestPerLevelOn(s, src.Key()) {
			row := []string{sourceLabel(src), weightText(src.Weight), fmt.Sprint(b.TP), fmt.Sprint(b.Concurrency), b.Best.Point.Label(),
				fmtTok(b.Best.TokS), fmtX(b.Best.Speedup), fmtStat(b.Best.Accept, 2, dash), "-", "-"}
			if w, ok := weighted[[2]int{b.TP, b.Concurrency}]; ok {
				row[8] = w.Best.Point.Label()
				if w.Best.Point == b.Best.Point {
					row[8] = "same"
				}
				if c := w.Best.Point.BySource[src.Key()][b.Concurrency]; c != nil {
					row[9] = fmtTok(c.TokS)
				}
			}
			t.Rows = append(t.Rows, row)
		}
	}
	t.Note = "Each prompt source's own winner; the weighted answer (\"Best configuration per concurrency level\") ranks the traffic mix: its output tok/s is the mix's tokens over the time they take, the sources weighed by their share."
	return t
}

// acceptConfig is the configuration whose acceptance the matrices show at a tp and level: the
// weighted answer, or the fastest speculative configuration when a baseline won.
func acceptConfig(s *Sweep, tp, level int) *Point {
	var best *Point
	bv := math.Inf(-1)
	for _, p := range s.Points {
		c := p.Cells[level]
		if p.TP != tp || p.Baseline || p.Mismatch() || c == nil || !c.TokS.OK() {
			continue
		}
		if c.TokS.Median > bv {
			best, bv = p, c.TokS.Median
		}
	}
	return best
}

// acceptTables are the acceptance matrices: prompt source x concurrency, and (with several
// lengths) prompt set x context length at the lowest level, each of the speculative configuration
// that serves the mix best.
func acceptTables(s *Sweep) []Table {
	if !s.Mixed() || len(s.Levels) == 0 {
		return nil
	}
	var out []Table
	for _, tp := range s.TPs {
		t := Table{Title: fmt.Sprintf("Accept length by prompt source and concurrency (tp %d)", tp),
			Head: []string{"prompt source"}, Num: []bool{false}}
		var configs []string
		for _, c := range s.Levels {
			t.Head = append(t.Head, fmt.Sprintf("c=%d", c))
			t.Num = append(t.Num, true)
			if p := acceptConfig(s, tp, c); p != nil {
				configs = append(configs, fmt.Sprintf("c=%d %s", c, p.Label()))
			}
		}
		if len(configs) == 0 {
			continue
		}
		for _, src := range s.Sources {
			row := []string{sourceLabel(src)}
			for _, c := range s.Levels {
				v := "-"
				if p := acceptConfig(s, tp, c); p != nil {
					if cell := p.BySource[src.Key()][c]; cell != nil && cell.Accept.OK() {
						v = fmtStat(cell.Accept, 2, dash)
					}
				}
				row = append(row, v)
			}
			t.Rows = append(t.Rows, row)
		}
		t.Note = "Each level's fastest speculative configuration on the mix: " + strings.Join(configs, "; ") + "."
		out = append(out, t)
		if lt, ok := lengthTable(s, tp); ok {
			out = append(out, lt)
		}
	}
	return out
}

// lengthTable is prompt set x context length at the lowest level: how acceptance decays with context.
func lengthTable(s *Sweep, tp int) (Table, bool) {
	var lengths []int
	var names []string
	for _, src := range s.Sources {
		if src.InputTokens > 0 && !containsInt(lengths, src.InputTokens) {
			lengths = append(lengths, src.InputTokens)
		}
		if !containsStr(names, src.Dataset) {
			names = append(names, src.Dataset)
		}
	}
	c := s.Levels[0]
	p := acceptConfig(s, tp, c)
	if len(lengths) < 2 || p == nil {
		return Table{}, false
	}
	t := Table{Title: fmt.Sprintf("Accept length by context length (tp %d, c=%d, %s)", tp, c, p.Label()),
		Head: []string{"prompt set"}, Num: []bool{false}}
	for _, n := range lengths {
		t.Head = append(t.Head, fmt.Sprintf("%d tokens", n))
		t.Num = append(t.Num, true)
	}
	for _, name := range names {
		row := []string{sweep.Source{Dataset: name}.Label()}
		for _, n := range lengths {
			v := "-"
			if cell := p.BySource[sweep.SourceKey{Dataset: name, InputTokens: n}][c]; cell != nil && cell.Accept.OK() {
				v = fmtStat(cell.Accept, 2, dash)
			}
			row = append(row, v)
		}
		t.Rows = append(t.Rows, row)
	}
	return t, true
}

func containsInt(v []int, x int) bool {
	for _, y := range v {
		if y == x {
			return true
		}
	}
	return false
}

func containsStr(v []string, x string) bool {
	for _, y := range v {
		if y == x {
			return true
		}
	}
	return false
}

// SourceSentences are the report summary's sentences on the prompt sources of a sweep measured on
// several (the first says what they are and how they are weighed, then one per tp and level where
// the winner differs by source); none otherwise.
func SourceSentences(s *Sweep) []string {
	if !s.Mixed() {
		return nil
	}
	return sourcesSummary(s)
}

// sourcesSummary is the summary's sentences on prompt sources: where the winner differs by source,
// both winners and the weighted one; on random prompts, that they are not a traffic's.
func sourcesSummary(s *Sweep) []string {
	if !s.Mixed() {
		if len(s.Sources) == 1 && s.Sources[0].Dataset == "" {
			return []string{"Measured on random prompts: acceptance on random tokens is not a traffic's (code accepts more than prose, long contexts less than short); list prompt sets like your traffic under workload.datasets to measure on them."}
		}
		return nil
	}
	var parts []string
	for _, src := range s.Sources {
		parts = append(parts, fmt.Sprintf("%s %s", sourceLabel(src), weightText(src.Weight)))
	}
	out := []string{fmt.Sprintf("Measured on %d prompt sources weighed as the traffic (%s); the best configuration per level is the weighted mix's, each source's own under \"Best configuration per prompt source\".",
		len(s.Sources), strings.Join(parts, ", "))}
	weighted := map[[2]int]Best{}
	for _, b := range BestPerLevel(s) {
		weighted[[2]int{b.TP, b.Concurrency}] = b
	}
	per := map[[2]int][]string{}
	differs := map[[2]int]bool{}
	for _, src := range s.Sources {
		for _, b := range BestPerLevelOn(s, src.Key()) {
			k := [2]int{b.TP, b.Concurrency}
			per[k] = append(per[k], fmt.Sprintf("%s: %s", sourceLabel(src), b.Best.Point.Label()))
			if w, ok := weighted[k]; ok && w.Best.Point != b.Best.Point {
				differs[k] = true
			}
		}
	}
	for _, tp := range s.TPs {
		for _, c := range s.Levels {
			k := [2]int{tp, c}
			if !differs[k] {
				continue
			}
			out = append(out, fmt.Sprintf("At tp %d, c=%d the winner differs by prompt source (%s); weighted: %s.",
				tp, c, strings.Join(per[k], "; "), weighted[k].Best.Point.Label()))
		}
	}
	return out
}
