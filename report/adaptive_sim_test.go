package report_test

import (
	"slices"
	"testing"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/sim"
)

// TestFittedConfigLoadsInTheSimulator: the fitted schedule is read by the simulator's loader, which
// follows SGLang main's (_load_adaptive_config), slot for slot.
func TestFittedConfigLoadsInTheSimulator(t *testing.T) {
	fit := &report.AdaptiveFit{Slots: []report.AdaptiveSlot{{BatchSize: 1, Steps: []int{5, 7}}, {BatchSize: 16, Steps: []int{3}}, {BatchSize: 64, Steps: []int{0}}}}
	cfg, err := sim.ParseAdaptiveConfig(fit.JSON(), "main")
	if err != nil {
		t.Fatalf("the simulator refuses the fitted config: %v\n%s", err, fit.JSON())
	}
	if cfg.Strategy != "ema" || len(cfg.Slots) != 3 {
		t.Fatalf("read back %+v", cfg)
	}
	for i, sl := range cfg.Slots {
		if want := fit.Slots[i]; sl.BatchSize != want.BatchSize || !slices.Equal(sl.CandidateSteps, want.Steps) {
			t.Errorf("slot %d: %+v, want %+v", i, sl, want)
		}
	}
}
