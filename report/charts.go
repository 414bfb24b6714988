package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Chart is one figure of a report.
type Chart struct {
	// Name is file-safe and unique within a report, e.g. "throughput-eagle3-tp4".
	Name string
	// Title is the figure's title; Answers is the question it answers (a caption).
	Title, Answers string
	plot           *plot.Plot
	w, h           vg.Length
	// axisMarks are the num_steps a search chart marks on its axis, by kind ("pruned", "failed").
	axisMarks map[string][]int
}

// Render writes the chart in format "svg", "pdf" or "png".
func (c *Chart) Render(format string) ([]byte, error) {
	wt, err := c.plot.WriterTo(c.w, c.h, format)
	if err != nil {
		return nil, fmt.Errorf("report: chart %s: %w", c.Name, err)
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("report: chart %s: %w", c.Name, err)
	}
	return b.Bytes(), nil
}

// panel is one chart against num_steps: one method at one tp. Its points fall in shape groups
// (topk and draft-token count): each group is drawn with its own line style, each concurrency level
// with its own colour.
type panel struct {
	Method string
	TP     int
	Groups []shape
	// Omitted counts the shape groups left out (maxGroups).
	Omitted int
}

// maxGroups is the most tree shapes a chart draws: the chain (topk 1) and the shapes that come
// closest to each level's best; the tables list all.
const maxGroups = 4

// score ranks points (or groups of them) by how close they come to the best output tok/s among
// all at each level: the sum over levels of their best median over the level's best.
func score(s *Sweep, levelBest map[int]float64, pts []*Point) float64 {
	total := 0.0
	for _, c := range s.Levels {
		best := 0.0
		for _, p := range pts {
			if cell := p.Cells[c]; cell != nil && cell.TokS.Median > best {
				best = cell.TokS.Median
			}
		}
		if levelBest[c] > 0 {
			total += best / levelBest[c]
		}
	}
	return total
}

func levelBests(s *Sweep, pts []*Point) map[int]float64 {
	m := map[int]float64{}
	for _, p := range pts {
		for c, cell := range p.Cells {
			m[c] = math.Max(m[c], cell.TokS.Median)
		}
	}
	return m
}

// shape is the points of one tree shape: topk and the draft-token count (0 when it is num_steps+1,
// the only choice SGLang allows at topk 1).
type shape struct {
	TopK, Draft int
	Points      []*Point // ascending num_steps
}

// shapeOf is the tree shape of a speculative point.
func shapeOf(p *Point) shape {
	g := shape{TopK: p.TopK}
	if p.NumDraftTokens != p.NumSteps+1 {
		g.Draft = p.NumDraftTokens
	}
	return g
}

func (g shape) same(o shape) bool { return g.TopK == o.TopK && g.Draft == o.Draft }

// name is the shape in a file name: "k1", "k4-d16".
func (g shape) name() string {
	if g.Draft == 0 {
		return fmt.Sprintf("k%d", g.TopK)
	}
	return fmt.Sprintf("k%d-d%d", g.TopK, g.Draft)
}

func (g shape) label() string {
	if g.Draft == 0 {
		return fmt.Sprintf("topk=%d", g.TopK)
	}
	return fmt.Sprintf("topk=%d, %d draft tokens", g.TopK, g.Draft)
}

func (p panel) label() string {
	s := fmt.Sprintf("%s, tp=%d", p.Method, p.TP)
	if len(p.Groups) == 1 {
		s += ", " + p.Groups[0].label()
	}
	return s
}

func (p panel) name() string { return safeName(fmt.Sprintf("%s-tp%d", p.Method, p.TP)) }

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

func safeName(s string) string { return unsafeChars.ReplaceAllString(s, "_") }

func panels(s *Sweep) []panel {
	var out []panel
	idx := map[string]int{}
	for _, p := range s.Points {
		if p.Baseline || len(p.Cells) == 0 {
			continue
		}
		k := fmt.Sprintf("%s|%d", p.Method, p.TP)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, panel{Method: p.Method, TP: p.TP})
		}
		g := shapeOf(p)
		pn := &out[i]
		j := slices.IndexFunc(pn.Groups, func(x shape) bool { return x.TopK == g.TopK && x.Draft == g.Draft })
		if j < 0 {
			j = len(pn.Groups)
			pn.Groups = append(pn.Groups, g)
		}
		pn.Groups[j].Points = append(pn.Groups[j].Points, p)
	}
	for i := range out {
		// The chain (topk 1) first, then by topk and draft tokens.
		sort.SliceStable(out[i].Groups, func(a, b int) bool {
			ga, gb := out[i].Groups[a], out[i].Groups[b]
			if ga.TopK != gb.TopK {
				return ga.TopK < gb.TopK
			}
			return ga.Draft < gb.Draft
		})
		for _, g := range out[i].Groups {
			sort.SliceStable(g.Points, func(a, b int) bool { return g.Points[a].NumSteps < g.Points[b].NumSteps })
		}
		if n := len(out[i].Groups); n > maxGroups {
			var all []*Point
			for _, g := range out[i].Groups {
				all = append(all, g.Points...)
			}
			lb := levelBests(s, all)
			keep := map[int]bool{}
			if g := out[i].Groups[0]; g.TopK == 1 && g.Draft == 0 {
				keep[0] = true
			}
			order := make([]int, n)
			for j := range order {
				order[j] = j
			}
			sc := make([]float64, n)
			for j, g := range out[i].Groups {
				sc[j] = score(s, lb, g.Points)
			}
			sort.SliceStable(order, func(a, b int) bool { return sc[order[a]] > sc[order[b]] })
			for _, j := range order {
				if len(keep) < maxGroups {
					keep[j] = true
				}
			}
			var kept []shape
			for j, g := range out[i].Groups {
				if keep[j] {
					kept = append(kept, g)
				}
			}
			out[i].Groups, out[i].Omitted = kept, n-len(kept)
		}
	}
	return out
}

// omittedNote tells a chart's reader that shapes were left out.
func (p panel) omittedNote() string {
	if p.Omitted == 0 {
		return ""
	}
	return fmt.Sprintf(" Only %d of the %d tree shapes are drawn: the chain and those closest to the best at each level; the tables list all.", len(p.Groups), len(p.Groups)+p.Omitted)
}

// groupDashes and groupShapes tell the shape groups of a panel apart.
var groupDashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}, {vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)}}

func groupDash(g int) []vg.Length { return groupDashes[g%len(groupDashes)] }

// stepsChart draws value(cell) against num_steps, one colour per concurrency level and one line
// style per shape group; withBase puts the baseline at x = 0 on the first group's lines.
func stepsChart(s *Sweep, pn panel, p *plot.Plot, value func(*Cell) (Stat, bool), withBase bool) (int, error) {
	base := BaselineAt(s, pn.TP)
	entries := 0
	minX, maxX := math.Inf(1), math.Inf(-1)
	for ci, c := range s.Levels {
		drawn := false
		for gi, g := range pn.Groups {
			var e xyErr
			if withBase && gi == 0 && base != nil && base.Cells[c] != nil {
				if st, ok := value(base.Cells[c]); ok {
					e.add(0, st)
				}
			}
			for _, pt := range g.Points {
				if cell := pt.Cells[c]; cell != nil {
					if st, ok := value(cell); ok {
						e.add(float64(pt.NumSteps), st)
					}
				}
			}
			if len(e.XYs) == 0 {
				continue
			}
			for _, xy := range e.XYs {
				minX, maxX = math.Min(minX, xy.X), math.Max(maxX, xy.X)
			}
			if err := drawSeries(p, plotutil.Color(ci), groupDash(gi), plotutil.Shape(gi), e); err != nil {
				return 0, err
			}
			drawn = true
		}
		if drawn {
			p.Legend.Add(fmt.Sprintf("concurrency %d", c), legendLine(plotutil.Color(ci), nil, nil))
			entries++
		}
	}
	if len(pn.Groups) > 1 {
		for gi, g := range pn.Groups {
			p.Legend.Add(g.label(), legendLine(color.Gray{Y: 70}, groupDash(gi), plotutil.Shape(gi)))
			entries++
		}
	}
	// A ring around each measured value of a point whose output check failed.
	var bad plotter.XYs
	for _, g := range pn.Groups {
		for _, pt := range g.Points {
			if !pt.Mismatch() {
				continue
			}
			for _, c := range s.Levels {
				if cell := pt.Cells[c]; cell != nil {
					if st, ok := value(cell); ok {
						bad = append(bad, plotter.XY{X: float64(pt.NumSteps), Y: st.Median})
					}
				}
			}
		}
	}
	if len(bad) > 0 {
		sc, err := plotter.NewScatter(bad)
		if err != nil {
			return 0, err
		}
		sc.Color, sc.Shape, sc.Radius = mismatchColor, draw.RingGlyph{}, vg.Points(6)
		p.Add(sc)
		p.Legend.Add("output MISMATCH (not lossless)", sc)
		entries++
	}
	if entries > 0 {
		p.X.Min, p.X.Max = minX-0.4, maxX+0.4
	}
	return entries, nil
}

// mismatchColor rings the points whose output check failed.
var mismatchColor = color.RGBA{R: 200, A: 255}

// mismatchNote is a chart caption's sentence on the panel's points whose output check failed; ""
// when none.
func (p panel) mismatchNote() string {
	var steps []string
	for _, g := range p.Groups {
		for _, pt := range g.Points {
			if pt.Mismatch() && len(pt.Cells) > 0 {
				steps = append(steps, shortLabel(pt, false))
			}
		}
	}
	if len(steps) == 0 {
		return ""
	}
	return fmt.Sprintf(" Red rings (%s): the output check failed, the point does not answer as the baseline does; it is never named best.", strings.Join(steps, ", "))
}

// legendLine is a legend sample: a line in a colour and dash, with a glyph when given.
func legendLine(c color.Color, dashes []vg.Length, glyph draw.GlyphDrawer) plot.Thumbnailer {
	l := &plotter.Line{LineStyle: draw.LineStyle{Color: c, Width: vg.Points(1.6), Dashes: dashes}}
	if glyph == nil {
		return l
	}
	return legendThumbs{l, &plotter.Scatter{GlyphStyle: draw.GlyphStyle{Color: c, Radius: vg.Points(3), Shape: glyph}}}
}

type legendThumbs []plot.Thumbnailer

func (t legendThumbs) Thumbnail(c *draw.Canvas) {
	for _, x := range t {
		x.Thumbnail(c)
	}
}

// drawSeries draws one line with glyphs, and error bars where a point has a range.
func drawSeries(p *plot.Plot, c color.Color, dashes []vg.Length, glyph draw.GlyphDrawer, e xyErr) error {
	l, pts, err := plotter.NewLinePoints(e.XYs)
	if err != nil {
		return err
	}
	l.Color, l.Width, l.Dashes = c, vg.Points(1.6), dashes
	pts.Color, pts.Shape, pts.Radius = c, glyph, vg.Points(3)
	p.Add(l, pts)
	for j := range e.XYs {
		if e.hi[j] > e.lo[j] {
			eb, err := plotter.NewYErrorBars(e)
			if err != nil {
				return err
			}
			eb.Color, eb.CapWidth = c, vg.Points(5)
			p.Add(eb)
			break
		}
	}
	return nil
}

// BaselineAt is the first baseline point at tp with runs, or nil (the charts; verify and watch compare with it).
func BaselineAt(s *Sweep, tp int) *Point {
	for _, p := range s.Points {
		if p.Baseline && p.TP == tp && len(p.Cells) > 0 {
			return p
		}
	}
	return nil
}

func init() {
	// Sans-serif text reads better at figure sizes than the default serif.
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	plotter.DefaultFont = plot.DefaultFont
}

// cleanTicks label a linear axis at least minLabels times, evenly, at a round step (1, 2, 2.5 or 5
// times a power of ten: the largest that gives minLabels labels), written without trailing zeros
// beyond the step's ("7500", not "7500.00"; "1.25"), with an unlabelled tick halfway between two
// labels for the grid. gonum's default aims at about 3 labels: a speedup axis from 0.9 to 2.4 got
// "1" and "2" only.
type cleanTicks struct{}

// minLabels is the fewest labels cleanTicks puts on an axis.
const minLabels = 4

func (cleanTicks) Ticks(min, max float64) []plot.Tick {
	step := roundStep(min, max)
	if step == 0 {
		return plot.DefaultTicks{}.Ticks(min, max)
	}
	decimals := 0
	for decimals < 6 {
		x := step * math.Pow10(decimals)
		if math.Abs(x-math.Round(x)) < 1e-6*x {
			break
		}
		decimals++
	}
	var ts []plot.Tick
	first := math.Ceil(min/step - 1e-9)
	if v := (first - 0.5) * step; v >= min {
		ts = append(ts, plot.Tick{Value: v})
	}
	for i := first; i*step <= max+1e-9*step; i++ {
		v := i * step
		if v == 0 {
			v = 0 // not -0
		}
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', decimals, 64)})
		if mid := (i + 0.5) * step; mid <= max {
			ts = append(ts, plot.Tick{Value: mid})
		}
	}
	return ts
}

// roundStep is the largest round step (1, 2, 2.5 or 5 times a power of ten) that puts minLabels
// multiples of itself in [min, max]; 0 for an empty or infinite range.
func roundStep(min, max float64) float64 {
	span := max - min
	if !(span > 0) || math.IsInf(span, 0) {
		return 0
	}
	labels := func(step float64) float64 {
		return math.Floor(max/step+1e-9) - math.Ceil(min/step-1e-9) + 1
	}
	e := math.Pow10(int(math.Floor(math.Log10(span))))
	for range 40 {
		for _, m := range []float64{5, 2.5, 2, 1} {
			if labels(m*e) >= minLabels {
				return m * e
			}
		}
		e /= 10
	}
	return 0
}

// nonNegativeTicks are cleanTicks from 0 up: the axis of a search chart reaches below 0 only to
// hold the marks of the points not run.
type nonNegativeTicks struct{}

func (nonNegativeTicks) Ticks(min, max float64) []plot.Tick {
	return cleanTicks{}.Ticks(math.Max(0, min), max)
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.X.Label.Text = x
	p.Y.Label.Text = y
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(11)
		a.Tick.Label.Font.Size = vg.Points(10)
	}
	p.Legend.TextStyle.Font.Size = vg.Points(9.5)
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(6)
	p.Legend.YOffs = -vg.Points(4)
	p.X.Tick.Marker, p.Y.Tick.Marker = cleanTicks{}, cleanTicks{}
	g := plotter.NewGrid()
	g.Vertical.Color = color.Gray{Y: 225}
	g.Horizontal.Color = color.Gray{Y: 225}
	p.Add(g)
	return p
}

// xyErr is points with a y range (min..max over repeats) for error bars.
type xyErr struct {
	plotter.XYs
	lo, hi []float64
}

func (e xyErr) YError(i int) (float64, float64) { return e.XYs[i].Y - e.lo[i], e.hi[i] - e.XYs[i].Y }

// addLine draws one series with glyphs (and error bars when some point has a range).
func addLine(p *plot.Plot, i int, name string, e xyErr, dashed bool) error {
	if len(e.XYs) == 0 {
		return nil
	}
	l, pts, err := plotter.NewLinePoints(e.XYs)
	if err != nil {
		return err
	}
	c := plotutil.Color(i)
	l.Color, l.Width = c, vg.Points(1.6)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	pts.Color, pts.Shape, pts.Radius = c, plotutil.Shape(i), vg.Points(3)
	p.Add(l, pts)
	ranged := false
	for j := range e.XYs {
		if e.hi[j] > e.lo[j] {
			ranged = true
		}
	}
	if ranged {
		eb, err := plotter.NewYErrorBars(e)
		if err != nil {
			return err
		}
		eb.Color = c
		eb.CapWidth = vg.Points(5)
		p.Add(eb)
	}
	p.Legend.Add(name, l, pts)
	return nil
}

func (e *xyErr) add(x float64, s Stat) {
	e.XYs = append(e.XYs, plotter.XY{X: x, Y: s.Median})
	e.lo = append(e.lo, s.Min)
	e.hi = append(e.hi, s.Max)
}

// stepTicks labels integer num_steps, 0 as the baseline.
type stepTicks struct{ baseline bool }

func (t stepTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for v := math.Ceil(min); v <= max; v++ {
		l := strconv.Itoa(int(v))
		if v == 0 && t.baseline {
			l = "base"
		}
		ts = append(ts, plot.Tick{Value: v, Label: l})
	}
	return ts
}

// headroom raises the y axis so the legend in the top-left corner does not cover the lines.
func headroom(p *plot.Plot, entries int, from0 bool) {
	if from0 {
		p.Y.Min = 0
	}
	span := p.Y.Max - p.Y.Min
	if span <= 0 {
		span = math.Abs(p.Y.Max) + 1
	}
	frac := 0.08 + 0.055*float64(entries)
	p.Y.Max += span * frac
}

const (
	chartW = 6.4 * vg.Inch
	chartH = 4 * vg.Inch
)

// Charts builds every chart of a sweep, in report order.
func Charts(s *Sweep) ([]*Chart, error) {
	var out []*Chart
	pns := panels(s)
	for _, pn := range pns {
		c, err := throughputChart(s, pn)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	for _, pn := range pns {
		c, err := speedupChart(s, pn)
		if err != nil {
			return nil, err
		}
		if c != nil {
			out = append(out, c)
		}
	}
	for _, pn := range pns {
		cs, err := searchCharts(s, pn)
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	if c, err := acceptChart(s, pns); err != nil {
		return nil, err
	} else if c != nil {
		out = append(out, c)
	}
	if cs, err := phaseCharts(s); err != nil {
		return nil, err
	} else {
		out = append(out, cs...)
	}
	if c, err := paretoChart(s); err != nil {
		return nil, err
	} else if c != nil {
		out = append(out, c)
	}
	for _, tp := range s.TPs {
		var pts []*Point
		for _, p := range s.Points {
			if p.TP == tp && len(p.Cells) > 0 {
				pts = append(pts, p)
			}
		}
		groups := [][]*Point{pts}
		names := []string{""}
		if len(pts) > maxTTFTLines {
			// One chart per method, each with the baseline, so the legend stays readable.
			groups, names = nil, nil
			base := BaselineAt(s, tp)
			for _, pn := range pns {
				if pn.TP != tp {
					continue
				}
				var g []*Point
				if base != nil {
					g = append(g, base)
				}
				for _, sh := range pn.Groups {
					g = append(g, sh.Points...)
				}
				groups, names = append(groups, g), append(names, pn.Method)
			}
		}
		for i, g := range groups {
			c, err := ttftChart(s, tp, names[i], g)
			if err != nil {
				return nil, err
			}
			if c != nil {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

func throughputChart(s *Sweep, pn panel) (*Chart, error) {
	p := newPlot("Output throughput: "+pn.label(), "num_steps (speculative steps; base = no speculation)", "output throughput (tok/s)")
	withBase := BaselineAt(s, pn.TP) != nil
	n, err := stepsChart(s, pn, p, func(c *Cell) (Stat, bool) { return c.TokS, c.TokS.OK() }, withBase)
	if err != nil || n == 0 {
		return nil, err
	}
	p.X.Tick.Marker = stepTicks{baseline: withBase}
	headroom(p, n, true)
	return &Chart{Name: "throughput-" + pn.name(), Title: "Output tok/s vs num_steps (" + pn.label() + ")",
		Answers: "Which num_steps gives the most output tokens per second at each concurrency, and where adding steps stops paying (the line flattens or falls). The leftmost point is the baseline without speculation; bars show the range over repeats; line styles tell tree shapes apart." + pn.omittedNote() + pn.mismatchNote(),
		plot:    p, w: chartW, h: chartH}, nil
}

func speedupChart(s *Sweep, pn panel) (*Chart, error) {
	p := newPlot("Speedup over the baseline: "+pn.label(), "num_steps (speculative steps)", "speedup (× baseline output tok/s)")
	n, err := stepsChart(s, pn, p, func(c *Cell) (Stat, bool) { return c.Speedup, c.Speedup.OK() }, false)
	if err != nil || n == 0 {
		return nil, err
	}
	one := plotter.NewFunction(func(float64) float64 { return 1 })
	one.Color = color.Gray{Y: 90}
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(one)
	p.Legend.Add("baseline (1×)", one)
	p.X.Tick.Marker = stepTicks{}
	if p.Y.Min > 0.9 {
		p.Y.Min = 0.9
	}
	if p.Y.Max < 1.1 {
		p.Y.Max = 1.1
	}
	headroom(p, n+1, false)
	return &Chart{Name: "speedup-" + pn.name(), Title: "Speedup vs num_steps (" + pn.label() + ")",
		Answers: "How far above the baseline (same tp, same concurrency) each num_steps is, and how the gain shrinks as concurrency grows. Below the dashed line speculation costs throughput." + pn.omittedNote() + pn.mismatchNote(),
		plot:    p, w: chartW, h: chartH}, nil
}

// searchCharts draws, for each tree shape of the panel that a search decided, the search's path:
// output tok/s against num_steps of the points it ran, one line per concurrency level, and on the
// axis a cross at each num_steps it pruned (and a ring at each that failed), so the reader sees
// where the search went and where it did not. Shapes without num_steps (DFLASH, DSPARK, NGRAM)
// and shapes the search ran nothing of have no chart.
func searchCharts(s *Sweep, pn panel) ([]*Chart, error) {
	var out []*Chart
	notRun := 0 // searched shapes of the panel of which nothing ran
	var shapes []shape
	for _, p := range s.Points {
		if p.Baseline || p.Method != pn.Method || p.TP != pn.TP || !p.Searched || p.NumSteps == 0 {
			continue
		}
		if g := shapeOf(p); !slices.ContainsFunc(shapes, g.same) {
			shapes = append(shapes, g)
		}
	}
	for _, g := range shapes {
		i := slices.IndexFunc(pn.Groups, g.same)
		if i < 0 {
			if !slices.ContainsFunc(s.Points, func(p *Point) bool {
				return !p.Baseline && p.Method == pn.Method && p.TP == pn.TP && shapeOf(p).same(g) && len(p.Cells) > 0
			}) {
				notRun++
			}
			continue // nothing ran, or the shape is left out of the panel (maxGroups)
		}
		c, err := searchChart(s, pn, pn.Groups[i])
		if err != nil {
			return nil, err
		}
		if c != nil {
			out = append(out, c)
		}
	}
	if notRun > 0 && len(out) > 0 {
		out[0].Answers += fmt.Sprintf(" The search ran nothing of %d more tree shape(s) of %s at tp=%d; the table of pruned points lists them.", notRun, pn.Method, pn.TP)
	}
	return out, nil
}

// searchChart is the search path of one shape: its measured points (g.Points) and the pruned and
// failed points of the same method, tp and shape.
func searchChart(s *Sweep, pn panel, g shape) (*Chart, error) {
	var pruned, failed []*Point
	for _, p := range s.Points {
		if p.Baseline || p.Method != pn.Method || p.TP != pn.TP || p.NumSteps == 0 || !shapeOf(p).same(g) {
			continue
		}
		switch {
		case p.State == "pruned":
			pruned = append(pruned, p)
		case p.State == "failed" && len(p.Cells) == 0:
			failed = append(failed, p)
		}
	}
	what := fmt.Sprintf("%s, tp=%d, %s", pn.Method, pn.TP, g.label())
	p := newPlot("Search path: "+what, "num_steps (speculative steps)", "output throughput (tok/s)")
	minX, maxX := math.Inf(1), math.Inf(-1)
	entries := 0
	for ci, c := range s.Levels {
		var e xyErr
		for _, pt := range g.Points {
			if cell := pt.Cells[c]; cell != nil && cell.TokS.OK() {
				e.add(float64(pt.NumSteps), cell.TokS)
			}
		}
		if len(e.XYs) == 0 {
			continue
		}
		for _, xy := range e.XYs {
			minX, maxX = math.Min(minX, xy.X), math.Max(maxX, xy.X)
		}
		if err := drawSeries(p, plotutil.Color(ci), nil, plotutil.Shape(ci), e); err != nil {
			return nil, err
		}
		p.Legend.Add(fmt.Sprintf("concurrency %d", c), legendLine(plotutil.Color(ci), nil, plotutil.Shape(ci)))
		entries++
	}
	if entries == 0 {
		return nil, nil
	}
	marks := []struct {
		kind   string
		pts    []*Point
		legend string
		glyph  draw.GlyphDrawer
		color  color.Color
	}{
		{"pruned", pruned, "pruned by the search (not run)", draw.CrossGlyph{}, color.Gray{Y: 40}},
		{"failed", failed, "failed (no result)", draw.RingGlyph{}, color.RGBA{R: 200, A: 255}},
	}
	axis := map[string][]int{}
	var onAxis []*plotter.Scatter
	var steps [2][]string
	for i, m := range marks {
		if len(m.pts) == 0 {
			continue
		}
		sort.SliceStable(m.pts, func(a, b int) bool { return m.pts[a].NumSteps < m.pts[b].NumSteps })
		var xy plotter.XYs
		for _, pt := range m.pts {
			x := float64(pt.NumSteps)
			xy = append(xy, plotter.XY{X: x, Y: 0})
			minX, maxX = math.Min(minX, x), math.Max(maxX, x)
			steps[i] = append(steps[i], strconv.Itoa(pt.NumSteps))
			axis[m.kind] = append(axis[m.kind], pt.NumSteps)
		}
		sc, err := plotter.NewScatter(xy)
		if err != nil {
			return nil, err
		}
		sc.Color, sc.Shape, sc.Radius = m.color, m.glyph, vg.Points(5)
		p.Add(sc)
		onAxis = append(onAxis, sc)
		p.Legend.Add(m.legend, sc)
		entries++
	}
	p.X.Min, p.X.Max = minX-0.4, maxX+0.4
	p.X.Tick.Marker = stepTicks{}
	headroom(p, entries, true)
	if len(onAxis) > 0 {
		// The marks sit in a strip below 0, on the num_steps axis, clear of a low line.
		span := p.Y.Max - p.Y.Min
		p.Y.Min = -0.07 * span
		p.Y.Tick.Marker = nonNegativeTicks{}
		for _, sc := range onAxis {
			for i := range sc.XYs {
				sc.XYs[i].Y = -0.035 * span
			}
		}
	}
	answers := "Where the search went: the output tok/s of each num_steps it ran, one line per concurrency level (bars: range over repeats)"
	if len(pruned) > 0 {
		answers += "; a cross on the num_steps axis marks a num_steps it decided not to run (the table of pruned points gives each reason)"
	}
	answers += "."
	if len(steps[0]) > 0 {
		answers += " Pruned: num_steps " + strings.Join(steps[0], ", ") + "."
	}
	if len(steps[1]) > 0 {
		answers += " Failed: num_steps " + strings.Join(steps[1], ", ") + "."
	}
	return &Chart{Name: "search-" + safeName(fmt.Sprintf("%s-tp%d-%s", pn.Method, pn.TP, g.name())),
		Title: "Search path (" + what + ")", Answers: answers, plot: p, w: chartW, h: chartH, axisMarks: axis}, nil
}

func acceptChart(s *Sweep, pns []panel) (*Chart, error) {
	p := newPlot("Accept length vs num_steps", "num_steps (speculative steps)", "mean accept length (tokens / step)")
	n, maxSteps := 0, 0
	type series struct {
		label  string
		points []*Point
	}
	// The accept length hardly depends on tp: one series per method and shape (at its first tp),
	// at most maxAcceptSeries.
	var all []series
	seen := map[string]bool{}
	omitted := 0
	for _, pn := range pns {
		for _, g := range pn.Groups {
			k := pn.Method + "|" + g.label()
			if seen[k] {
				continue
			}
			seen[k] = true
			if len(all) == maxAcceptSeries {
				omitted++
				continue
			}
			label := fmt.Sprintf("%s, %s", pn.Method, g.label())
			if len(s.TPs) > 1 {
				label += fmt.Sprintf(" (tp=%d)", pn.TP)
			}
			all = append(all, series{label, g.Points})
		}
	}
	for i, sr := range all {
		var e xyErr
		for _, pt := range sr.points {
			var vals []float64
			for _, cell := range pt.Cells {
				if cell.Accept.OK() {
					vals = append(vals, cell.Accept.Median)
				}
			}
			if len(vals) == 0 {
				continue
			}
			st := newStat(vals)
			e.add(float64(pt.NumSteps), st)
			maxSteps = max(maxSteps, pt.NumSteps)
		}
		if len(e.XYs) == 0 {
			continue
		}
		if err := addLine(p, i, sr.label, e, false); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, nil
	}
	ideal := plotter.NewFunction(func(x float64) float64 { return x + 1 })
	ideal.Color = color.Gray{Y: 90}
	ideal.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(ideal)
	p.Legend.Add("upper bound (num_steps + 1)", ideal)
	p.X.Tick.Marker = stepTicks{}
	p.X.Min, p.X.Max = 0.6, float64(maxSteps)+0.4
	p.Y.Max = math.Max(p.Y.Max, float64(maxSteps)+1)
	headroom(p, n+1, true)
	note := ""
	if omitted > 0 {
		note = fmt.Sprintf(" %d more method and tree-shape series are left out; the tables list them.", omitted)
	}
	return &Chart{Name: "accept-length", Title: "Accept length vs num_steps",
		Answers: "How many tokens each verification step accepts on average (median over the concurrency levels; bars: range over levels), against the upper bound of num_steps + 1. A curve that flattens means the draft model stops guessing right: more steps only add cost." + note,
		plot:    p, w: chartW, h: chartH}, nil
}

func paretoChart(s *Sweep) (*Chart, error) {
	pts := Pareto(s)
	if len(pts) == 0 {
		return nil, nil
	}
	p := newPlot("Per-user vs per-GPU throughput", "per-GPU throughput (output tok/s / tp)", "per-user tok/s (1000 / TPOT ms)")
	// One colour per concurrency level, the Pareto front as a line through the winners.
	for i, c := range s.Levels {
		var xy plotter.XYs
		for _, pt := range pts {
			if pt.Cell.Concurrency == c {
				xy = append(xy, plotter.XY{X: pt.PerGPU, Y: pt.PerUser})
			}
		}
		if len(xy) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(xy)
		if err != nil {
			return nil, err
		}
		sc.Color, sc.Shape, sc.Radius = plotutil.Color(i), plotutil.Shape(i), vg.Points(3.5)
		p.Add(sc)
		p.Legend.Add(fmt.Sprintf("concurrency %d", c), sc)
	}
	front := Front(pts)
	var fxy plotter.XYs
	var labels []string
	for _, f := range front {
		fxy = append(fxy, plotter.XY{X: f.PerGPU, Y: f.PerUser})
		l := fmt.Sprintf(" %s c=%d", shortLabel(f.Cell.Point, methods(s) > 1), f.Cell.Concurrency)
		if len(s.TPs) > 1 {
			l += fmt.Sprintf(" tp=%d", f.Cell.Point.TP)
		}
		labels = append(labels, l)
	}
	fl, err := plotter.NewLine(fxy)
	if err != nil {
		return nil, err
	}
	fl.Color, fl.Width = color.RGBA{R: 200, A: 255}, vg.Points(1.4)
	fl.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	p.Add(fl)
	p.Legend.Add("Pareto front", fl)
	lb, err := plotter.NewLabels(plotter.XYLabels{XYs: fxy, Labels: labels})
	if err != nil {
		return nil, err
	}
	for i := range lb.TextStyle {
		lb.TextStyle[i].Font.Size = vg.Points(9)
		lb.TextStyle[i].Color = color.Gray{Y: 40}
	}
	p.Add(lb)
	p.X.Min = 0
	p.X.Max *= 1.18 // room for the labels
	headroom(p, len(s.Levels)+1, true)
	return &Chart{Name: "pareto", Title: "Per-user vs per-GPU tok/s (Pareto front)",
		Answers: "The trade-off between what one user sees (decode speed) and what a GPU delivers in total. Points on the dashed front are the configurations worth running: for each, no other configuration is better on both axes. Read off the best configuration for a latency target." + paretoMismatchNote(s),
		plot:    p, w: chartW, h: chartH}, nil
}

// paretoMismatchNote says which measured points the Pareto chart leaves out for their failed output
// check; "" when none.
func paretoMismatchNote(s *Sweep) string {
	var labels []string
	for _, p := range s.Mismatches() {
		if len(p.Cells) > 0 {
			labels = append(labels, shortLabel(p, true))
		}
	}
	if len(labels) == 0 {
		return ""
	}
	return fmt.Sprintf(" Left out: %s, whose output check failed (not lossless).", strings.Join(labels, ", "))
}

// methods counts the speculative methods of a sweep.
func methods(s *Sweep) int {
	seen := map[string]bool{}
	for _, p := range s.Points {
		if !p.Baseline {
			seen[p.Method] = true
		}
	}
	return len(seen)
}

// shortLabel names a point in a crowded chart: "base", "s3", "eagle3 s4 k4 d16".
func shortLabel(p *Point, method bool) string {
	if p.Baseline {
		return "base"
	}
	s := fmt.Sprintf("s%d", p.NumSteps)
	if method {
		s = p.Method + " " + s
	}
	if p.TopK != 1 || p.NumDraftTokens != p.NumSteps+1 {
		s += fmt.Sprintf(" k%d d%d", p.TopK, p.NumDraftTokens)
	}
	return s
}

// levelTicks labels exactly the concurrency levels on a log axis.
type levelTicks []int

func (t levelTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for _, c := range t {
		if float64(c) >= min && float64(c) <= max {
			ts = append(ts, plot.Tick{Value: float64(c), Label: strconv.Itoa(c)})
		}
	}
	return ts
}

// maxTTFTLines is the most configurations one TTFT chart shows; beyond, one chart per method, each
// with the baseline and the configurations closest to the best output tok/s at each level.
const maxTTFTLines = 10

// maxAcceptSeries is the most series of the accept-length chart.
const maxAcceptSeries = 10

func ttftChart(s *Sweep, tp int, method string, pts []*Point) (*Chart, error) {
	what, name := fmt.Sprintf("tp=%d", tp), fmt.Sprintf("ttft-p99-tp%d", tp)
	if method != "" {
		what, name = fmt.Sprintf("%s, tp=%d", method, tp), safeName(fmt.Sprintf("ttft-p99-%s-tp%d", method, tp))
	}
	p := newPlot("TTFT p99 vs concurrency ("+what+")", "concurrency (concurrent requests)", "time to first token, p99 (ms)")
	omitted := 0
	if len(pts) > maxTTFTLines {
		lb := levelBests(s, pts)
		ranked := slices.Clone(pts)
		sort.SliceStable(ranked, func(a, b int) bool {
			if ranked[a].Baseline != ranked[b].Baseline {
				return ranked[a].Baseline
			}
			return score(s, lb, ranked[a:a+1]) > score(s, lb, ranked[b:b+1])
		})
		keep := map[*Point]bool{}
		for _, p := range ranked[:maxTTFTLines] {
			keep[p] = true
		}
		var kept []*Point
		for _, p := range pts {
			if keep[p] {
				kept = append(kept, p)
			}
		}
		omitted, pts = len(pts)-len(kept), kept
	}
	n := 0
	for _, pt := range pts {
		var e xyErr
		for _, c := range s.Levels {
			if cell := pt.Cells[c]; cell != nil && cell.TTFTP99.OK() {
				e.add(float64(c), cell.TTFTP99)
			}
		}
		if len(e.XYs) == 0 {
			continue
		}
		if err := addLine(p, n, pt.Label(), e, pt.Baseline); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, nil
	}
	if len(s.Levels) > 1 && s.Levels[0] > 0 && s.Levels[len(s.Levels)-1]/s.Levels[0] >= 8 {
		p.X.Scale = plot.LogScale{}
		p.X.Min, p.X.Max = float64(s.Levels[0])/1.3, float64(s.Levels[len(s.Levels)-1])*1.3
	}
	p.X.Tick.Marker = levelTicks(s.Levels)
	headroom(p, n, true)
	return &Chart{Name: name, Title: "TTFT p99 vs concurrency (" + what + ")",
		Answers: "How the slowest first tokens (99th percentile) grow with load for each configuration: speculation spends compute per step, so a configuration that wins on throughput may cost time to first token. The baseline is dashed." + ttftNote(omitted),
		plot:    p, w: chartW, h: chartH + vg.Points(14*float64(max(0, n-6)))}, nil
}

// svgForHTML turns gonum's SVG document into an element for inline use: no XML declaration, a
// scalable size.
func svgForHTML(b []byte) string {
	s := string(b)
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	s = regexp.MustCompile(`^<svg width="[^"]*" height="[^"]*"`).ReplaceAllString(s, `<svg class="chart" role="img"`)
	return s
}

// CompareCharts draws, per tp, the best median output tok/s of each sweep against concurrency.
func CompareCharts(c *Comparison) ([]*Chart, error) {
	var out []*Chart
	byTP := map[int][]BestPair{}
	var tps []int
	for _, p := range c.Bests {
		if byTP[p.TP] == nil {
			tps = append(tps, p.TP)
		}
		byTP[p.TP] = append(byTP[p.TP], p)
	}
	sort.Ints(tps)
	for _, tp := range tps {
		pairs := byTP[tp]
		p := newPlot(fmt.Sprintf("Best output throughput, two sweeps (tp=%d)", tp), "concurrency (concurrent requests)", "best output throughput (tok/s)")
		var levels []int
		for i, side := range []struct {
			name string
			best func(BestPair) Best
		}{
			{fmt.Sprintf("A: %s #%d", c.A.Name, c.A.ID), func(b BestPair) Best { return b.A }},
			{fmt.Sprintf("B: %s #%d", c.B.Name, c.B.ID), func(b BestPair) Best { return b.B }},
		} {
			var e xyErr
			for _, bp := range pairs {
				e.add(float64(bp.Concurrency), side.best(bp).Best.TokS)
				if i == 0 {
					levels = append(levels, bp.Concurrency)
				}
			}
			if err := addLine(p, i, side.name, e, i == 1); err != nil {
				return nil, err
			}
		}
		if len(levels) > 1 && levels[0] > 0 && levels[len(levels)-1]/levels[0] >= 8 {
			p.X.Scale = plot.LogScale{}
			p.X.Min, p.X.Max = float64(levels[0])/1.3, float64(levels[len(levels)-1])*1.3
		}
		p.X.Tick.Marker = levelTicks(levels)
		headroom(p, 2, true)
		out = append(out, &Chart{Name: fmt.Sprintf("compare-best-tp%d", tp), Title: fmt.Sprintf("Best output tok/s of each sweep vs concurrency (tp=%d)", tp),
			Answers: "Which sweep's best configuration delivers more at each load (whatever configuration that is in each sweep); the table below gives the ratio and the configurations.",
			plot:    p, w: chartW, h: chartH})
	}
	return out, nil
}

func ttftNote(omitted int) string {
	if omitted == 0 {
		return ""
	}
	return fmt.Sprintf(" %d configurations further from the best output tok/s are left out.", omitted)
}
