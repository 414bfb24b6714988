package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/specsweep/specsweep/sweep"
)

// NextSweep is the sweep to run next when the recommended configuration sits at the edge of the
// swept range (report/edge.go's rule) at some level of the mix: the optimum of the mix may lie
// beyond what was swept.
type NextSweep struct {
	// Levels are the mix's levels at which the winner is at the edge.
	Levels []int
	// Why holds edge.go's sentence per axis: "num_steps 3 is the largest swept (1, 2, 3): sweep
	// 3..6 to see whether more steps help".
	Why []string
	// Spec is the next sweep as a spec fragment (YAML: matrix and workload.concurrency) to merge
	// into the sweep's spec.
	Spec string
}

// maxNextValues bounds the values the fragment lists per axis (evenly spread over the range, its
// ends kept): each value is a point, a server restart of minutes.
const maxNextValues = 6

// nextSweep is r's next sweep, or nil when its winner is at no edge at any level of the mix.
func nextSweep(s *Sweep, r *Recommendation) *NextSweep {
	w := r.Winner.Point
	if w.Baseline {
		return nil
	}
	ns := &NextSweep{}
	ranges := map[string]edge{}
	for i, sh := range r.Traffic {
		es := edgesOf(s, Best{TP: w.TP, Concurrency: sh.Concurrency, Best: r.Winner.Cells[i]})
		if len(es) == 0 {
			continue
		}
		ns.Levels = append(ns.Levels, sh.Concurrency)
		for _, e := range es {
			if _, ok := ranges[e.axis.name]; !ok {
				ranges[e.axis.name] = e
				ns.Why = append(ns.Why, e.long())
			}
		}
	}
	if len(ns.Levels) == 0 {
		return nil
	}
	methods := []string{}
	for _, p := range s.Points {
		if p.Baseline && p.TP == w.TP {
			methods = append(methods, p.Method) // its speedups and output check need the baseline
			break
		}
	}
	methods = append(methods, w.Method)
	var b strings.Builder
	fmt.Fprintf(&b, "# The next sweep around %s tp=%d, recommended for %s in sweep %s (id %d):\n", w.Label(), w.TP, MixWords(r.Traffic, r.DefaultTraffic), s.Name, s.ID)
	for _, why := range ns.Why {
		fmt.Fprintf(&b, "# %s.\n", why)
	}
	b.WriteString("# Merge into that sweep's spec (its hosts, server and methods), then run it.\n")
	fmt.Fprintf(&b, "matrix:\n  method: [%s]\n", strings.Join(methods, ", "))
	// A chain of the EAGLE family (topk 1): SGLang sets its draft tokens to num_steps + 1.
	chain := isChain(w) && slices.Contains([]string{"", "EAGLE", "EAGLE3", "NEXTN", "STANDALONE"}, strings.ToUpper(w.Algorithm))
	for i, ax := range edgeAxes {
		v := ax.value(w)
		var vals []string
		switch {
		case ax.name == "num_draft_tokens" && chain:
			vals = []string{"auto"} // a chain's draft tokens follow num_steps
		case ranges[ax.name].axis.name != "":
			e := ranges[ax.name]
			for _, x := range spread(e.from, min(e.to, axisLimit(ax.name)), maxNextValues) {
				vals = append(vals, strconv.Itoa(x))
			}
		case w.Requested[i] != nil && v > 0:
			vals = []string{strconv.Itoa(v)}
		default:
			continue // left to the server, as in the sweep
		}
		fmt.Fprintf(&b, "  %s: [%s]\n", ax.name, strings.Join(vals, ", "))
	}
	fmt.Fprintf(&b, "  tp: [%d]\nworkload:\n  concurrency: [%s]\n", w.TP, joinInts(r.Traffic.Levels()))
	ns.Spec = b.String()
	return ns
}

// axisLimit is the largest value a spec may give the matrix key (sweep.Limits).
func axisLimit(name string) int {
	key := map[string]string{"num_steps": sweep.LimitNumSteps, "topk": sweep.LimitTopK, "num_draft_tokens": sweep.LimitDraftTokens}[name]
	for _, l := range sweep.Limits() {
		if l.Key == key {
			return int(l.Max)
		}
	}
	return 1 << 30
}

// spread is at most n integers from lo to hi, both included, evenly spaced.
func spread(lo, hi, n int) []int {
	if hi < lo {
		return []int{lo}
	}
	if hi-lo+1 <= n {
		out := make([]int, 0, hi-lo+1)
		for v := lo; v <= hi; v++ {
			out = append(out, v)
		}
		return out
	}
	out := make([]int, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, lo+int(float64(i)*float64(hi-lo)/float64(n-1)+0.5))
	}
	return slices.Compact(out)
}
