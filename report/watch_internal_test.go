package report

import (
	"strings"
	"testing"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// TestRegressions: a watch's figure below the reference's lowest repeat less the tolerance is a
// regression, naming the measure, the level and the engine versions; one within it is not; a level
// the watch did not measure is missing, not a regression; a mismatching output check is one.
func TestRegressions(t *testing.T) {
	stat := func(median, lo float64) Stat { return Stat{N: 2, Median: median, Min: lo, Max: median} }
	cell := func(tok, acc Stat) *Cell { return &Cell{TokS: tok, Accept: acc} }
	ref := &Point{ID: "aaaaaaaaaaaa", Config: Config{Method: "eagle3", NumSteps: 3, TP: 4},
		Provenance: &hostctl.Provenance{EngineVer: "0.5.9"},
		Cells:      map[int]*Cell{1: cell(stat(300, 290), stat(3.4, 3.3)), 16: cell(stat(2000, 1900), stat(3.0, 2.9))}}
	decision := &Sweep{ID: 3, Points: []*Point{ref}}
	applied := &Point{ID: "bbbbbbbbbbbb", Config: Config{Method: sweep.WatchMethod, NumSteps: 3, TP: 4},
		Provenance: &hostctl.Provenance{EngineVer: "0.5.10"},
		// c=1: tok/s 270 is above 290 x 0.9 = 261; accept 1.4 is far below 3.3 x 0.9.
		Cells: map[int]*Cell{1: cell(stat(270, 265), stat(1.4, 1.4))}}
	watch := &Sweep{ID: 9, Points: []*Point{{ID: "cccccccccccc", Config: Config{Method: "baseline", Baseline: true, TP: 4}}, applied}}
	w := &sweep.Watch{SweepID: 3, Host: "gpu1", Reference: map[int]string{1: ref.ID, 16: ref.ID}, Tolerance: 0.1}
	res := Regressions(decision, watch, w)
	if len(res.Regressions) != 1 {
		t.Fatalf("regressions %+v", res.Regressions)
	}
	r := res.Regressions[0]
	if r.Measure != MeasureAccept || r.Concurrency != 1 || r.Before != 3.4 || r.After != 1.4 {
		t.Errorf("regression %+v", r)
	}
	if got := r.Words(); !strings.Contains(got, "accept_length at c=1 fell from 3.40 to 1.40 (floor 2.97)") || !strings.Contains(got, "SGLang 0.5.9 -> 0.5.10") {
		t.Errorf("words %q", got)
	}
	if strings.Join(res.Checked, " ") != "tok_s@1 accept_length@1" || strings.Join(res.Missing, " ") != "c=16" {
		t.Errorf("checked %v, missing %v", res.Checked, res.Missing)
	}
	// A mismatching output check is a regression too, whatever the figures.
	applied.OutputCheck = store.OutputCheckMismatch
	if res := Regressions(decision, watch, w); len(res.Regressions) != 2 || res.Regressions[1].Measure != MeasureOutput {
		t.Errorf("with a mismatch: %+v", res.Regressions)
	}
}
