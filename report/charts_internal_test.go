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

// A searched chain gets a search-path chart that marks its pruned and failed num_steps on the
// axis; a searched method without num_steps (DFLASH) and the same points run as a grid get none.
func TestSearchChartMarksPrunedSteps(t *testing.T) {
	build := func(searched bool) *Sweep {
		s := &Sweep{TPs: []int{4}, Levels: []int{1, 8}}
		add := func(method string, steps, draft int, state string, tok float64) {
			p := &Point{ID: fmt.Sprint(len(s.Points)), State: state, Searched: searched, Cells: map[int]*Cell{},
				Config: Config{Method: method, NumSteps: steps, TopK: 1, NumDraftTokens: draft, TP: 4}}
			if state == "done" {
				for _, c := range s.Levels {
					v := tok * float64(c)
					p.Cells[c] = &Cell{Point: p, Concurrency: c, TokS: Stat{N: 1, Median: v, Min: v, Max: v}}
				}
			}
			s.Points = append(s.Points, p)
		}
		add("eagle3", 1, 2, "done", 100)
		add("eagle3", 2, 3, "done", 120)
		add("eagle3", 4, 5, "done", 125)
		add("eagle3", 8, 9, "failed", 0)
		add("dflash", 0, 16, "done", 110)
		if searched {
			add("eagle3", 3, 4, "pruned", 0)
			add("eagle3", 5, 6, "pruned", 0)
			add("dflash", 0, 8, "pruned", 0)
		}
		return s
	}
	charts, err := Charts(build(true))
	if err != nil {
		t.Fatal(err)
	}
	var search []*Chart
	for _, c := range charts {
		if strings.HasPrefix(c.Name, "search-") {
			search = append(search, c)
		}
	}
	if len(search) != 1 || search[0].Name != "search-eagle3-tp4-k1" {
		t.Fatalf("search charts %v, want one: search-eagle3-tp4-k1", search)
	}
	c := search[0]
	if fmt.Sprint(c.axisMarks["pruned"]) != "[3 5]" || fmt.Sprint(c.axisMarks["failed"]) != "[8]" {
		t.Errorf("marks on the axis %v, want pruned [3 5] and failed [8]", c.axisMarks)
	}
	if !strings.Contains(c.Answers, "Pruned: num_steps 3, 5.") || !strings.Contains(c.Answers, "Failed: num_steps 8.") {
		t.Errorf("the caption does not name the steps not run: %s", c.Answers)
	}
	if c.plot.X.Min > 1 || c.plot.X.Max < 8 || c.plot.Y.Min >= 0 {
		t.Errorf("axes x [%g, %g], y from %g: want every num_steps shown and a strip below 0 for the marks",
			c.plot.X.Min, c.plot.X.Max, c.plot.Y.Min)
	}
	svg, err := c.Render("svg")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pruned by the search (not run)", "failed (no result)", "concurrency 8"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the chart lacks %q", want)
		}
	}

	grid, err := Charts(build(false))
	if err != nil {
		t.Fatal(err)
	}
	if len(grid) != len(charts)-1 {
		t.Errorf("%d charts as a grid, %d searched: want only the search path more", len(grid), len(charts))
	}
	for _, c := range grid {
		if strings.HasPrefix(c.Name, "search-") {
			t.Errorf("a grid sweep has the chart %s", c.Name)
		}
	}
}
