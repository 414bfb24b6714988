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
		"[2026-12-06 05:00:10 TP0] Switch adaptive runtime state: steps 0 -> 5, draft_tokens 1 -> 6",
	}
	got, total := AdaptiveSwitches(lines)
	if total != len(got) {
		t.Errorf("total %d, kept %d", total, len(got))
	}
	var s []string
	for _, sw := range got {
		ema := "-"
		if sw.EMA != nil {
			ema = fmt.Sprintf("%.2f", *sw.EMA)
		}
		s = append(s, fmt.Sprintf("%d->%d ema=%s at %q runtime=%v", sw.From, sw.To, ema, sw.Clock, sw.Runtime))
	}
	want := []string{`3->5 ema=2.96 at "05:00:02" runtime=false`, `5->7 ema=- at "" runtime=false`, `7->0 ema=0.32 at "05:00:09" runtime=false`,
		`0->5 ema=- at "05:00:10" runtime=true`}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Fatalf("switches = %q, want %q", s, want)
	}
}

// TestAdaptiveSwitchesAreBounded: a window of many switches keeps MaxSwitches and counts them all.
func TestAdaptiveSwitchesAreBounded(t *testing.T) {
	lines := make([]string, 3*MaxSwitches)
	for i := range lines {
		lines[i] = fmt.Sprintf("Switch adaptive runtime state: steps %d -> %d, draft_tokens 1 -> 6", i%2*5, (i+1)%2*5)
	}
	kept, total := AdaptiveSwitches(lines)
	if len(kept) != MaxSwitches || total != len(lines) {
		t.Fatalf("kept %d of %d, want %d of %d", len(kept), total, MaxSwitches, len(lines))
	}
}
