package sweep_test

import (
	"math"
	"testing"

	"github.com/specsweep/specsweep/sweep"
)

func ok(tokS float64) sweep.RepeatRun {
	r := sweep.RepeatRun{OK: true}
	r.Figures[sweep.OutputTokS] = &tokS
	return r
}

// A level counts only when every repeat is ok and measured; its figures are the median and range.
func TestRepeatsCount(t *testing.T) {
	var all sweep.Repeats
	for _, v := range []float64{110, 90, 100, 130} {
		all.Add(ok(v))
	}
	if st := all.Stat(sweep.OutputTokS); !all.Counts() || st != (sweep.Stat{N: 4, Median: 105, Min: 90, Max: 130}) {
		t.Errorf("four ok repeats: counts %v, %+v", all.Counts(), st)
	}
	failed := ok(500)
	failed.OK = false
	unmeasured := sweep.RepeatRun{OK: true}
	for name, bad := range map[string]sweep.RepeatRun{"failed": failed, "ok without output tok/s": unmeasured} {
		var r sweep.Repeats
		r.Add(ok(100))
		r.Add(bad)
		if r.Counts() || r.Stat(sweep.OutputTokS).OK() || r.Values(sweep.OutputTokS) != nil {
			t.Errorf("a level with a %s repeat counts: %+v", name, r.Stat(sweep.OutputTokS))
		}
	}
	var none sweep.Repeats
	if none.Counts() {
		t.Error("a level without runs counts")
	}
}

func TestNoiseOf(t *testing.T) {
	st := sweep.NewStat
	for _, c := range []struct {
		a, b []float64
		want sweep.Noise
	}{
		{[]float64{110, 120}, []float64{90, 100}, sweep.NoiseClear},
		{[]float64{100, 120}, []float64{90, 100}, sweep.NoiseWithin},
		{[]float64{200}, []float64{90, 100}, sweep.NoiseUnknown},
		{[]float64{200, 210}, nil, sweep.NoiseUnknown},
	} {
		if got := sweep.NoiseOf(st(c.a), st(c.b)); got != c.want {
			t.Errorf("NoiseOf(%v, %v) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
	// One repeat each, with confidence intervals: the intervals decide.
	ci := func(v, lo, hi float64) sweep.Stat {
		s := st([]float64{v})
		s.CI = &sweep.Bounds{Low: lo, High: hi}
		return s
	}
	for _, c := range []struct {
		a, b sweep.Stat
		want sweep.Noise
	}{
		{ci(110, 108, 112), ci(100, 98, 102), sweep.NoiseClear},
		{ci(110, 100, 120), ci(100, 98, 102), sweep.NoiseWithin},
		{ci(110, 108, 112), st([]float64{100}), sweep.NoiseUnknown}, // one side unmeasured
		// Repeats on both sides: their ranges decide, whatever the intervals say.
		{func() sweep.Stat { s := st([]float64{110, 120}); s.CI = &sweep.Bounds{Low: 50, High: 130}; return s }(),
			st([]float64{90, 100}), sweep.NoiseClear},
	} {
		if got := sweep.NoiseOf(c.a, c.b); got != c.want {
			t.Errorf("NoiseOf(%+v, %+v) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

// TestRepeatsCarryIntervals: a level's output tok/s interval is its repeats' envelope, and none
// when a repeat has none; a mix of sources mixes the bounds as it mixes the figures.
func TestRepeatsCarryIntervals(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	run := func(tok float64, b *sweep.Bounds) sweep.RepeatRun {
		r := sweep.RepeatRun{OK: true, TokS: b}
		r.Figures[sweep.OutputTokS] = f(tok)
		return r
	}
	var r sweep.Repeats
	r.Add(run(100, &sweep.Bounds{Low: 98, High: 103}))
	r.Add(run(104, &sweep.Bounds{Low: 101, High: 106}))
	if got := r.Stat(sweep.OutputTokS).CI; got == nil || *got != (sweep.Bounds{Low: 98, High: 106}) {
		t.Errorf("envelope = %+v, want 98..106", got)
	}
	if r.Stat(sweep.AcceptLength).CI != nil {
		t.Error("an interval on a figure other than output tok/s")
	}
	r.Add(run(102, nil))
	if got := r.Stat(sweep.OutputTokS).CI; got != nil {
		t.Errorf("a repeat without an interval: envelope %+v, want none", got)
	}
	// Two sources of equal weight: the harmonic mix of 100 and 300 is 150; of the lows 90 and 270, 135.
	m := sweep.NewMixer([]sweep.Source{{Dataset: "a", Weight: 0.5}, {Dataset: "b", Weight: 0.5}})
	m.Add(1, 1, sweep.SourceKey{Dataset: "a"}, run(100, &sweep.Bounds{Low: 90, High: 110}))
	m.Add(1, 1, sweep.SourceKey{Dataset: "b"}, run(300, &sweep.Bounds{Low: 270, High: 330}))
	got := m.Repeats(1).Stat(sweep.OutputTokS)
	if got.CI == nil || math.Abs(got.CI.Low-135) > 1e-9 || math.Abs(got.CI.High-165) > 1e-9 || math.Abs(got.Median-150) > 1e-9 {
		t.Errorf("mixed: %+v (CI %+v), want 150 in 135..165", got, got.CI)
	}
}
