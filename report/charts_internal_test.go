package report

import (
	"fmt"
	"strings"
	"testing"
)

// A panel with many tree shapes draws the chain and the shapes closest to the best; the chart says
// how many were left out. Tick labels carry no float noise.
func TestManyShapesAreTrimmed(t *testing.T) {
	s := &Sweep{TPs: []int{4}, Levels: []int{1, 8}}
	add := func(topk, draft, steps int, tok float64) {
		p := &Point{ID: fmt.Sprint(len(s.Points)), Config: Config{Method: "m", NumSteps: steps, TopK: topk, NumDraftTokens: draft, TP: 4}, Cells: map[int]*Cell{}}
		for _, c := range s.Levels {
			p.Cells[c] = &Cell{Point: p, Concurrency: c, TokS: Stat{N: 1, Median: tok * float64(c), Min: tok * float64(c), Max: tok * float64(c)}}
		}
		s.Points = append(s.Points, p)
	}
	for steps := 1; steps <= 3; steps++ {
		add(1, steps+1, steps, 50) // the chain, slow
	}
	for d := 5; d < 17; d++ {
		add(4, d, 3, float64(d)) // the larger the draft, the faster here
	}
	pns := panels(s)
	if len(pns) != 1 {
		t.Fatalf("%d panels", len(pns))
	}
	pn := pns[0]
	if len(pn.Groups) != maxGroups || pn.Omitted != 13-maxGroups {
		t.Fatalf("%d groups drawn, %d omitted", len(pn.Groups), pn.Omitted)
	}
	if g := pn.Groups[0]; g.TopK != 1 || g.Draft != 0 || len(g.Points) != 3 {
		t.Errorf("the chain is not kept first: %+v", g)
	}
	var drafts []int
	for _, g := range pn.Groups[1:] {
		drafts = append(drafts, g.Draft)
	}
	if fmt.Sprint(drafts) != "[14 15 16]" {
		t.Errorf("kept drafts %v, want the three fastest [14 15 16]", drafts)
	}
	charts, err := Charts(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(charts[0].Answers, "Only 4 of the 13 tree shapes") {
		t.Errorf("no note of the omitted shapes: %s", charts[0].Answers)
	}
	for _, tk := range (cleanTicks{}).Ticks(0.9, 2.8) {
		if len(tk.Label) > 4 {
			t.Errorf("tick label %q", tk.Label)
		}
	}
}
