package report

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
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

// chartSweep is a baseline and eagle3 at 1 to 4 steps, tp 4, at four concurrency levels with two
// repeats: speedups from 1.05 (4 steps at 64) to 2.0 (4 steps at 1), accept lengths, TPOT and TTFT,
// so every chart of a sweep is drawn.
func chartSweep() *Sweep {
	s := &Sweep{TPs: []int{4}, Levels: []int{1, 4, 16, 64}, Repeats: 2}
	stat := func(v float64) Stat { return Stat{N: 2, Median: v, Min: v * 0.99, Max: v * 1.01} }
	for steps := 0; steps <= 4; steps++ {
		p := &Point{ID: fmt.Sprint(steps), State: "done", Cells: map[int]*Cell{},
			Config: Config{Method: "eagle3", NumSteps: steps, TopK: 1, NumDraftTokens: steps + 1, TP: 4}}
		if steps == 0 {
			p.Config = Config{Method: "baseline", Baseline: true, TP: 4}
		}
		for i, c := range s.Levels {
			// The gain grows with steps and shrinks with load: 2.0 at 4 steps and c=1, 1.05 at 1 step and c=64.
			sp := 1 + float64(steps)/4*(1-0.3*float64(i))
			if steps == 1 && c == 64 {
				sp = 1.05
			}
			base := 100 * float64(c) / (1 + 0.1*float64(i))
			cell := &Cell{Point: p, Concurrency: c, TokS: stat(base * sp), TPOTP50: stat(1000 / (base * sp / float64(c))),
				TTFTP99: stat(40 * float64(c))}
			if steps > 0 {
				cell.Speedup, cell.Accept = stat(sp), stat(1+0.8*float64(steps))
			}
			p.Cells[c] = cell
		}
		s.Points = append(s.Points, p)
	}
	return s
}

// pngDir is where the chart tests render their PNGs: $SPECSWEEP_CHART_PNG to look at them, else a
// temporary directory.
func pngDir(t *testing.T) string {
	if d := os.Getenv("SPECSWEEP_CHART_PNG"); d != "" {
		return d
	}
	return t.TempDir()
}

// labelled are the labelled ticks an axis draws within its range.
func labelled(a plot.Axis) []plot.Tick {
	var out []plot.Tick
	for _, tk := range a.Tick.Marker.Ticks(a.Min, a.Max) {
		if tk.Label != "" && tk.Value >= a.Min && tk.Value <= a.Max {
			out = append(out, tk)
		}
	}
	return out
}

// TestSpeedupAxisReadable: the speedup axis of a chart whose speedups span 1.05 to 2.0 is labelled
// at least 4 times, evenly, every 0.1, 0.2, 0.25 or 0.5 (gonum's default labelled it at 1 and 2 only).
func TestSpeedupAxisReadable(t *testing.T) {
	charts, err := Charts(chartSweep())
	if err != nil {
		t.Fatal(err)
	}
	var sp *Chart
	for _, c := range charts {
		if c.Name == "speedup-eagle3-tp4" {
			sp = c
		}
	}
	if sp == nil {
		t.Fatal("no speedup chart")
	}
	ts := labelled(sp.plot.Y)
	var labels []string
	for _, tk := range ts {
		labels = append(labels, tk.Label)
	}
	if len(ts) < 4 {
		t.Fatalf("speedup axis [%.2f, %.2f] labelled %q: want at least 4 labels", sp.plot.Y.Min, sp.plot.Y.Max, labels)
	}
	step := ts[1].Value - ts[0].Value
	if !slices.ContainsFunc([]float64{0.1, 0.2, 0.25, 0.5}, func(v float64) bool { return math.Abs(v-step) < 1e-9 }) {
		t.Errorf("speedup axis labelled %q: step %g, want 0.1, 0.2, 0.25 or 0.5", labels, step)
	}
	for i := 1; i < len(ts); i++ {
		if math.Abs(ts[i].Value-ts[i-1].Value-step) > 1e-9 {
			t.Errorf("speedup axis labelled unevenly: %q", labels)
		}
	}
	for _, l := range labels {
		if len(l) > 4 {
			t.Errorf("tick label %q", l)
		}
	}
	b, err := sp.Render("png")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pngDir(t), sp.Name+".png"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAxisLabelsFit: every chart's axis labels fit along their axes with a fifth to spare (a
// browser that shows the SVG in a wider fallback font still shows all of it), and each linear value
// axis is labelled at least 4 times. The Pareto chart's y label ran past the plot's height and was
// cut off.
func TestAxisLabelsFit(t *testing.T) {
	charts, err := Charts(chartSweep())
	if err != nil {
		t.Fatal(err)
	}
	dir := pngDir(t)
	names := map[string]bool{}
	for _, c := range charts {
		names[strings.SplitN(c.Name, "-", 2)[0]] = true
		canvas := vgimg.New(c.w, c.h)
		dc := draw.New(canvas)
		da := c.plot.DataCanvas(dc)
		for _, ax := range []struct {
			name  string
			axis  plot.Axis
			along vg.Length
		}{{"y", c.plot.Y, da.Max.Y - da.Min.Y}, {"x", c.plot.X, da.Max.X - da.Min.X}} {
			w := ax.axis.Label.TextStyle.Width(ax.axis.Label.Text)
			if w > 0.8*ax.along {
				t.Errorf("%s: the %s label %q is %.0f pt long, along an axis of %.0f pt (at most 80%%: %.0f pt)",
					c.Name, ax.name, ax.axis.Label.Text, w.Points(), ax.along.Points(), 0.8*ax.along.Points())
			}
		}
		if _, linear := c.plot.Y.Scale.(plot.LinearScale); linear {
			if n := len(labelled(c.plot.Y)); n < 4 {
				t.Errorf("%s: the y axis [%.3g, %.3g] has %d labels, want at least 4", c.Name, c.plot.Y.Min, c.plot.Y.Max, n)
			}
		}
		c.plot.Draw(dc)
		f, err := os.Create(filepath.Join(dir, c.Name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (vgimg.PngCanvas{Canvas: canvas}).WriteTo(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for _, want := range []string{"throughput", "speedup", "accept", "pareto", "ttft"} {
		if !names[want] {
			t.Errorf("no %s chart among %v", want, names)
		}
	}
}
