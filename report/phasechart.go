package report

import (
	"fmt"
	"image/color"
	"math"
	"time"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// phaseCharts draw each tp's points' output tok/s over time through the phases of the first repeat,
// with the phases' boundaries: how each configuration followed the shifts (an adaptive server's
// steps changing, a fixed one's figure jumping with the load). One chart per tp with phase events.
func phaseCharts(s *Sweep) ([]*Chart, error) {
	if len(s.PhasePlan) == 0 {
		return nil, nil
	}
	// Each phase's series is drawn from the phase's nominal start (the sum of the earlier phases'
	// times), so every configuration's curve lines up with the boundaries.
	starts := make([]float64, len(s.PhasePlan)+1)
	for i, ph := range s.PhasePlan {
		starts[i+1] = starts[i] + ph.For.Seconds()
	}
	var out []*Chart
	for _, tp := range s.TPs {
		p := newPlot(fmt.Sprintf("Output tok/s over time through the phases (tp %d)", tp), "time (s, from the first phase's start)", "output tok/s (1 s intervals)")
		top, lines := 0.0, 0
		for _, pt := range s.Points {
			if pt.TP != tp {
				continue
			}
			var xy plotter.XYs
			for i := range s.PhasePlan {
				ser := pt.series(1, i+1)
				w := time.Duration(ser.WidthMS) * time.Millisecond
				for k, v := range withinPhase(ser, s.PhasePlan[i].For) {
					x := starts[i] + float64(k)*w.Seconds()
					xy = append(xy, plotter.XY{X: x, Y: v})
					top = math.Max(top, v)
				}
			}
			if len(xy) == 0 {
				continue
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return nil, err
			}
			l.Color, l.Width = plotutil.Color(lines), vg.Points(1.3)
			if isAdaptive(pt) {
				l.Width = vg.Points(2)
			} else {
				l.Dashes = plotutil.Dashes(lines % 4)
			}
			p.Add(l)
			p.Legend.Add(pt.Label(), l)
			lines++
		}
		if lines == 0 {
			continue
		}
		var labels plotter.XYLabels
		for i, ph := range s.PhasePlan {
			if i > 0 {
				b, err := plotter.NewLine(plotter.XYs{{X: starts[i], Y: 0}, {X: starts[i], Y: top * 1.02}})
				if err != nil {
					return nil, err
				}
				b.Color, b.Dashes = color.Gray{Y: 110}, []vg.Length{vg.Points(2), vg.Points(2)}
				p.Add(b)
			}
			labels.XYs = append(labels.XYs, plotter.XY{X: starts[i] + 0.02*starts[len(starts)-1], Y: top * 1.04})
			labels.Labels = append(labels.Labels, fmt.Sprintf("c=%d", ph.Concurrency))
		}
		lb, err := plotter.NewLabels(labels)
		if err != nil {
			return nil, err
		}
		p.Add(lb)
		p.X.Min, p.X.Max = 0, starts[len(starts)-1]
		p.Y.Min = 0
		headroom(p, lines+1, true)
		out = append(out, &Chart{Name: fmt.Sprintf("phases-tp%d", tp), Title: fmt.Sprintf("Output tok/s through the phases (tp %d)", tp),
			Answers: "How each configuration followed the load as it shifted (dotted lines: phase boundaries, each phase's concurrency above it): " +
				"a fixed configuration's figure jumps with the load, an adaptive server's (thick lines) also moves while its steps switch, then settles. " +
				"The first repeat, from each phase's first request.",
			plot: p, w: chartW, h: chartH})
	}
	return out, nil
}
