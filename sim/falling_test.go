package sim

import (
	"fmt"
	"testing"
)

// fallingArgs are the flags of a falling-steps run on one GPU: the baseline (steps 0), an EAGLE-3
// chain of steps (topk 1), or the adaptive mode with its default slots; 64 requests may run at once
// in every case (speculation's default is 48), so the columns compare like with like.
func fallingArgs(steps int, adaptive bool) []string {
	argv := []string{"--tp", "1", "--max-running-requests", "64"}
	if steps > 0 || adaptive {
		argv = append(argv, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d", "--speculative-eagle-topk", "1")
	}
	if steps > 0 {
		argv = append(argv, "--speculative-num-steps", fmt.Sprint(steps))
	}
	if adaptive {
		argv = append(argv, "--speculative-adaptive")
	}
	return argv
}

// falling-steps.json is the profile whose best num_steps falls with concurrency: about 7 at one
// stream, 3 at 16, and no speculation at 64. The test prints output tok/s per num_steps (0 is the
// baseline) and concurrency, as bench/sim_speed measures it (1024-token prompts, 512 tokens out),
// then what the adaptive mode with main's default slots runs at each.
func TestFallingStepsProfile(t *testing.T) {
	p := loadTestProfile(t, "falling-steps")
	best := map[int]int{}
	curves := map[int][]float64{}
	t.Log("output tok/s, EAGLE3 topk 1, TP 1; num_steps 0 (baseline) .. 10")
	for _, c := range []int{1, 16, 64} {
		line := fmt.Sprintf("c=%-2d", c)
		for k := 0; k <= 10; k++ {
			m := profileModel(t, p, fallingArgs(k, false)...)
			if m.Plan.OOM != "" {
				t.Fatalf("steps %d: out of memory (%s)", k, m.Plan.OOM)
			}
			r := Simulate(m, c, max(4*c, 8), 1024, 512, 1)
			curves[c] = append(curves[c], r.OutputTokS)
			line += fmt.Sprintf(" %5.0f", r.OutputTokS)
			if r.OutputTokS > curves[c][best[c]] {
				best[c] = k
			}
		}
		t.Logf("%s   best %d", line, best[c])
	}
	for c, want := range map[int][2]int{1: {6, 8}, 16: {2, 4}, 64: {0, 0}} {
		if best[c] < want[0] || best[c] > want[1] {
			t.Errorf("c=%d: best num_steps %d, want %d..%d", c, best[c], want[0], want[1])
		}
	}
	if c := curves[64]; c[0] < 1.1*c[1] {
		t.Errorf("c=64: the baseline (%.0f tok/s) is not clearly above num_steps 1 (%.0f)", c[0], c[1])
	}

	// The adaptive mode routes each batch to a slot: 1 -> [1 3 5 7], where the EMA of accepted drafts
	// (2.7 at 3 steps) passes 2.5 and moves to 5; at 5 it averages 4.1, below the 4.5 that moves to 7,
	// until a run of long acceptances passes it, and at 7 (5.1) it stays above the 4.25 that would
	// move it down: so one stream runs 5, then 7. 16 -> [0 1 3] (3, its top), 64 -> [0].
	for _, tc := range []struct {
		c    int
		want []int
	}{{1, []int{5, 7}}, {16, []int{3}}, {64, []int{0}}} {
		c, want := tc.c, tc.want
		m := profileModel(t, p, fallingArgs(0, true)...)
		r := Simulate(m, c, max(4*c, 8), 1024, 512, 1)
		total, at := 0, 0
		used := map[int]int{}
		for k, n := range r.StepsUsed {
			total += n
			if n > 0 {
				used[k] = n
			}
			if containsInt(want, k) {
				at += n
			}
		}
		t.Logf("adaptive c=%-2d %5.0f tok/s, decode batches per num_steps %v", c, r.OutputTokS, used)
		if total == 0 || float64(at) < 0.9*float64(total) {
			t.Errorf("adaptive c=%d: %d of %d decode batches at num_steps %v, want nearly all", c, at, total, want)
		}
	}
}
