package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A best at the edge of the swept range (docs/report.md): when the winner of a level has the
// largest num_steps (topk, draft tokens) its method and tp planned, the optimum may lie beyond
// what was swept, and the report says what to sweep next. The rule: an axis of the best's
// configuration is flagged when
//   - at least two of its values were measured at that level (points of the best's method and tp
//     with a figure there whose output check did not fail): the best beat another value of it;
//   - the best's value is the largest the sweep planned on that axis for its method and tp (a
//     larger one that failed, was pruned by the search or has not run yet is planned: no flag), or
//     the smallest, when a smaller value exists (num_steps and topk above 1, draft tokens above 2);
//   - for draft tokens, the best is not a chain (topk 1 with num_steps + 1 draft tokens), whose
//     draft tokens follow num_steps.
// The suggestion doubles the range beyond the edge: v..2v for the largest, v/2..v (at least the
// smallest valid value) for the smallest.

// edgeAxis is one speculative parameter a sweep may vary.
type edgeAxis struct {
	name       string // the spec's matrix key
	value      func(*Point) int
	low        int    // the smallest valid value
	more, less string // what a larger (smaller) value might do
}

var edgeAxes = []edgeAxis{
	{"num_steps", func(p *Point) int { return p.NumSteps }, 1, "more steps help", "fewer steps do as well"},
	{"topk", func(p *Point) int { return p.TopK }, 1, "a wider tree helps", "a narrower tree does as well"},
	{"num_draft_tokens", func(p *Point) int { return p.NumDraftTokens }, 2, "more draft tokens help", "fewer draft tokens do as well"},
}

// edge is one axis on which a level's best sits at the edge of the swept range.
type edge struct {
	axis    edgeAxis
	value   int
	largest bool  // the largest swept; else the smallest
	swept   []int // the values planned, ascending
	from    int   // the suggested range, from..to
	to      int
}

// short is the best table's cell: "num_steps 3 largest swept: sweep 3..6".
func (e edge) short() string {
	return fmt.Sprintf("%s %d %s swept: sweep %d..%d", e.axis.name, e.value, e.side(), e.from, e.to)
}

// long is the summary's clause: "num_steps 3 is the largest swept (1, 2, 3): sweep 3..6 to see
// whether more steps help".
func (e edge) long() string {
	vals := make([]string, len(e.swept))
	for i, v := range e.swept {
		vals[i] = strconv.Itoa(v)
	}
	why := e.axis.less
	if e.largest {
		why = e.axis.more
	}
	return fmt.Sprintf("%s %d is the %s swept (%s): sweep %d..%d to see whether %s", e.axis.name, e.value, e.side(),
		strings.Join(vals, ", "), e.from, e.to, why)
}

func (e edge) side() string {
	if e.largest {
		return "largest"
	}
	return "smallest"
}

// isChain reports whether a point is a chain: topk 1 and num_steps + 1 draft tokens.
func isChain(p *Point) bool { return p.TopK <= 1 && p.NumDraftTokens == p.NumSteps+1 }

// edgesOf are the axes on which b's best sits at the edge of the swept range, in axis order; none
// for a baseline.
func edgesOf(s *Sweep, b Best) []edge {
	if b.Best == nil || b.Best.Point.Baseline {
		return nil
	}
	bp := b.Best.Point
	var out []edge
	for _, ax := range edgeAxes {
		v := ax.value(bp)
		if v == 0 || (ax.name == "num_draft_tokens" && isChain(bp)) {
			continue // not given, or following num_steps
		}
		var planned, measured []int
		for _, p := range s.Points {
			if p.Baseline || p.Method != bp.Method || p.TP != bp.TP {
				continue
			}
			pv := ax.value(p)
			if pv == 0 || (ax.name == "num_draft_tokens" && isChain(p)) {
				continue
			}
			if !slices.Contains(planned, pv) {
				planned = append(planned, pv)
			}
			if c := p.Cells[b.Concurrency]; c != nil && c.TokS.OK() && !p.Mismatch() && !slices.Contains(measured, pv) {
				measured = append(measured, pv)
			}
		}
		if len(measured) < 2 {
			continue
		}
		slices.Sort(planned)
		e := edge{axis: ax, value: v, swept: planned}
		switch {
		case v == planned[len(planned)-1]:
			e.largest, e.from, e.to = true, v, 2*v
		case v == planned[0] && v > ax.low:
			e.from, e.to = max(ax.low, v/2), v
		default:
			continue
		}
		out = append(out, e)
	}
	return out
}

// edgeSummary is the summary's sentences on the levels whose best sits at the edge of the swept
// range, one per best configuration and edge (its levels listed); none when no best does.
func edgeSummary(s *Sweep, bests []Best) []string {
	type key struct {
		tp    int
		point *Point
		what  string
	}
	var order []key
	levels := map[key][]string{}
	for _, b := range bests {
		for _, e := range edgesOf(s, b) {
			k := key{b.TP, b.Best.Point, e.long()}
			if levels[k] == nil {
				order = append(order, k)
			}
			levels[k] = append(levels[k], strconv.Itoa(b.Concurrency))
		}
	}
	var out []string
	for _, k := range order {
		out = append(out, fmt.Sprintf("At tp=%d c=%s the best, %s, is at the edge of the swept range: %s.",
			k.tp, strings.Join(levels[k], ", "), k.point.Label(), k.what))
	}
	return out
}
