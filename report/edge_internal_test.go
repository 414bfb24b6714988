package report

import (
	"fmt"
	"strings"
	"testing"
)

// edgeSweep is a sweep at tp 4 and concurrency 1 of a baseline (100 tok/s) and the given eagle3
// points, each "steps/topk/draft:tok" (tok 0: failed, no figure).
func edgeSweep(pts ...string) *Sweep {
	s := &Sweep{TPs: []int{4}, Levels: []int{1}}
	add := func(c Config, tok float64) {
		p := &Point{ID: fmt.Sprint(len(s.Points)), Config: c, State: "done", Cells: map[int]*Cell{}}
		if tok > 0 {
			p.Cells[1] = &Cell{Point: p, Concurrency: 1, TokS: Stat{N: 1, Median: tok, Min: tok, Max: tok}}
		} else {
			p.State = "failed"
		}
		s.Points = append(s.Points, p)
	}
	add(Config{Method: "baseline", Baseline: true, TP: 4}, 100)
	for _, v := range pts {
		var steps, topk, draft int
		var tok float64
		fmt.Sscanf(v, "%d/%d/%d:%g", &steps, &topk, &draft, &tok)
		add(Config{Method: "eagle3", NumSteps: steps, TopK: topk, NumDraftTokens: draft, TP: 4}, tok)
	}
	return s
}

// TestEdgeOfTheSweptRange: a best at the largest (or smallest) value its method and tp planned on
// an axis with at least two values measured at that level is flagged with what to sweep next;
// one inside the range, one beside a larger value that failed, an axis of one value and a
// baseline are not.
func TestEdgeOfTheSweptRange(t *testing.T) {
	for _, c := range []struct {
		name string
		s    *Sweep
		want []string // the long texts, in axis order
	}{
		{"largest steps", edgeSweep("1/1/2:150", "2/1/3:180", "3/1/4:200"),
			[]string{"num_steps 3 is the largest swept (1, 2, 3): sweep 3..6 to see whether more steps help"}},
		{"inside", edgeSweep("1/1/2:150", "2/1/3:210", "3/1/4:200"), nil},
		{"a larger one failed", edgeSweep("1/1/2:150", "2/1/3:180", "3/1/4:0"), nil},
		{"smallest steps", edgeSweep("3/1/4:200", "4/1/5:190", "5/1/6:170"),
			[]string{"num_steps 3 is the smallest swept (3, 4, 5): sweep 1..3 to see whether fewer steps do as well"}},
		{"smallest is 1", edgeSweep("1/1/2:200", "2/1/3:190"), nil},
		{"one value", edgeSweep("3/1/4:200"), nil},
		{"baseline wins", edgeSweep("1/1/2:90", "2/1/3:95"), nil},
		{"largest topk and draft", edgeSweep("3/1/4:150", "3/2/8:170", "3/4/8:180", "3/4/16:210"),
			[]string{"topk 4 is the largest swept (1, 2, 4): sweep 4..8 to see whether a wider tree helps",
				"num_draft_tokens 16 is the largest swept (8, 16): sweep 16..32 to see whether more draft tokens help"}},
	} {
		b := BestPerLevel(c.s)
		if len(b) != 1 {
			t.Fatalf("%s: %d bests", c.name, len(b))
		}
		var got []string
		for _, e := range edgesOf(c.s, b[0]) {
			got = append(got, e.long())
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: edges %q, want %q", c.name, got, c.want)
		}
	}
}
