package sweep_test

import (
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
}
