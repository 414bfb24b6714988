package workload

import (
	"fmt"
	"testing"
)

// TestAdaptiveSwitches reads SGLang's switch lines (and a fork's variant), with their clock and EMA,
// and nothing else.
func TestAdaptiveSwitches(t *testing.T) {
	lines := []string{
		"[2026-12-06 05:00:01 TP0] Decode batch, #running-req: 1, accept len: 2.10",
		"[2026-12-06 05:00:02 TP0] Adaptive spec params updated: steps 3 -> 5 (ema_accept_len=2.96)",
		"Adaptive spec params updated (confidence): steps 5 -> 7 (r=0.812, conf=0.9, E@5=1.0, E@7=2.0)",
		"[2026-12-06 05:00:09 TP0] Adaptive spec params updated: steps 7 -> 0 (window empty, ema_accept_len=0.32, dwell=4 rounds)",
		"[2026-12-06 05:00:09 TP0] Adaptive spec params updated: steps 99999999999 -> 0 (ema_accept_len=0.32)",
		"AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3, 5, 7]",
	}
	got := AdaptiveSwitches(lines)
	var s []string
	for _, sw := range got {
		ema := "-"
		if sw.EMA != nil {
			ema = fmt.Sprintf("%.2f", *sw.EMA)
		}
		s = append(s, fmt.Sprintf("%d->%d ema=%s at %q", sw.From, sw.To, ema, sw.Clock))
	}
	want := []string{`3->5 ema=2.96 at "05:00:02"`, `5->7 ema=- at ""`, `7->0 ema=0.32 at "05:00:09"`}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Fatalf("switches = %q, want %q", s, want)
	}
}
