package sweep

import (
	"math"
	"testing"
)

func fig(v float64) *float64 { return &v }

func sourceRun(tokS, accept, speedup, ttft float64) RepeatRun {
	var r RepeatRun
	r.OK = true
	r.Figures[OutputTokS], r.Figures[AcceptLength], r.Figures[Speedup] = fig(tokS), fig(accept), fig(speedup)
	r.Figures[TTFTP50Ms], r.Figures[TTFTP99Ms] = fig(ttft), fig(2*ttft)
	return r
}

// TestMix: the mix's tok/s is the mix's tokens over the time they take, its speedup the baseline's
// time over this point's, and a missing or failed source leaves no mix.
func TestMix(t *testing.T) {
	sources := []Source{{Dataset: "code", Weight: 0.75}, {Dataset: "chat", Weight: 0.25}}
	runs := map[SourceKey]RepeatRun{
		{Dataset: "code"}: sourceRun(300, 4, 2, 10),
		{Dataset: "chat"}: sourceRun(100, 2, 1.25, 30),
	}
	m := Mix(sources, runs)
	// 0.75 of the tokens at 300 tok/s and 0.25 at 100: 1/(0.75/300 + 0.25/100) = 200 tok/s.
	near := func(name string, got *float64, want float64) {
		t.Helper()
		if got == nil || math.Abs(*got-want) > 1e-9 {
			t.Errorf("%s = %v, want %g", name, got, want)
		}
	}
	if !m.OK {
		t.Fatal("mix not ok")
	}
	near("tok/s", m.Figures[OutputTokS], 200)
	near("accept", m.Figures[AcceptLength], 1/(0.75/4+0.25/2))
	// The baseline ran code at 150 and chat at 80 tok/s: 1/(0.75/150+0.25/80) = 123.08; 200/123.08.
	near("speedup", m.Figures[Speedup], 200*(0.75/150+0.25/80))
	near("ttft p50", m.Figures[TTFTP50Ms], 0.75*10+0.25*30)
	near("ttft p99", m.Figures[TTFTP99Ms], 60)

	delete(runs, SourceKey{Dataset: "chat"})
	if Mix(sources, runs).OK {
		t.Error("a mix with a source missing counts")
	}
	failed := sourceRun(100, 2, 1, 30)
	failed.OK = false
	runs[SourceKey{Dataset: "chat"}] = failed
	if Mix(sources, runs).OK {
		t.Error("a mix with a failed source counts")
	}
	// A baseline has no accept length: the mix has none either, and still counts.
	base := map[SourceKey]RepeatRun{{Dataset: "code"}: {OK: true}, {Dataset: "chat"}: {OK: true}}
	for k := range base {
		r := base[k]
		r.Figures[OutputTokS] = fig(100)
		base[k] = r
	}
	if b := Mix(sources, base); !b.OK || b.Figures[AcceptLength] != nil || b.Figures[Speedup] != nil {
		t.Errorf("baseline mix %+v", b)
	}
}

// TestMixOneCell: a workload of one source reads as before, whatever key its runs carry.
func TestMixOneCell(t *testing.T) {
	r := sourceRun(123, 3, 1.5, 7)
	m := Mix([]Source{{InputTokens: 512, Weight: 1}}, map[SourceKey]RepeatRun{{}: r})
	if m != r {
		t.Errorf("one source mixed to %+v, want %+v", m, r)
	}
}

// TestMixer: levels and repeats are mixed over sources before the repeats are aggregated, and each
// source keeps its own repeats.
func TestMixer(t *testing.T) {
	sources := []Source{{Dataset: "code", Weight: 0.5}, {Dataset: "chat", Weight: 0.5}}
	m := NewMixer(sources)
	for rep, v := range []float64{100, 120} {
		m.Add(4, rep+1, SourceKey{Dataset: "code"}, sourceRun(2*v, 3, 1, 1))
		m.Add(4, rep+1, SourceKey{Dataset: "chat"}, sourceRun(v, 2, 1, 1))
	}
	m.Add(8, 1, SourceKey{Dataset: "code"}, sourceRun(100, 3, 1, 1)) // chat never ran at 8
	if got := m.Levels(); len(got) != 2 || got[0] != 4 || got[1] != 8 {
		t.Errorf("levels %v", got)
	}
	r := m.Repeats(4)
	if v := r.Values(OutputTokS); len(v) != 2 || math.Abs(v[0]-1/(0.5/200+0.5/100)) > 1e-9 {
		t.Errorf("level 4 mixes to %v", v)
	}
	if m.Repeats(8).Counts() {
		t.Error("level 8 counts without its chat source")
	}
	if c := m.Source(4, SourceKey{Dataset: "chat"}); c.Stat(OutputTokS).Median != 110 {
		t.Errorf("chat at 4: %+v", c.Stat(OutputTokS))
	}
	if m.Source(8, SourceKey{Dataset: "chat"}) != nil {
		t.Error("chat at 8 has repeats")
	}
}
