package sim

import (
	"fmt"
	"math"
	"testing"
)

func mustModel(t testing.TB, profile string, argv ...string) *Model {
	t.Helper()
	a, _, err := ParseArgs(append([]string{"--model-path", "/models/m"}, argv...))
	if err != nil {
		t.Fatalf("ParseArgs(%v): %v", argv, err)
	}
	return NewModel(a, Profiles[profile], 96)
}

func eagle3(steps int) []string {
	return []string{"--tp", "4", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
		"--speculative-num-steps", fmt.Sprint(steps), "--speculative-eagle-topk", "1",
		"--speculative-num-draft-tokens", fmt.Sprint(steps + 1)}
}

// The field report: Qwen3.5-122B-A10B, TP4, EAGLE-3, topk 1, concurrency 1.
func TestFieldReport122B(t *testing.T) {
	want := map[int]float64{1: 123, 2: 186, 3: 234, 4: 277, 5: 282}
	for k := 1; k <= 10; k++ {
		m := mustModel(t, "qwen3.5-122b-a10b", eagle3(k)...)
		r := Simulate(m, 1, 8, 1024, 512, 7)
		t.Logf("steps %2d: %.1f tok/s (decode %.1f), accept %.2f", k, r.OutputTokS, r.PerStreamTokS, r.AcceptLen)
		if w, ok := want[k]; ok && math.Abs(r.OutputTokS/w-1) > 0.10 {
			t.Errorf("steps %d: %.1f tok/s, field report %v (more than 10%% off)", k, r.OutputTokS, w)
		}
		if k >= 6 && (r.OutputTokS < 260 || r.OutputTokS > 300) {
			t.Errorf("steps %d: %.1f tok/s, want a plateau near 270-293", k, r.OutputTokS)
		}
		if k == 10 && math.Abs(m.ExpectedAccept()-5.5) > 0.3 {
			t.Errorf("accept length at steps 10 = %.2f, want about 5.5", m.ExpectedAccept())
		}
	}
}

func TestBatchThroughputFallsAtHighSteps(t *testing.T) {
	var best, at10 float64
	bestK := 0
	for k := 1; k <= 10; k++ {
		r := Simulate(mustModel(t, "qwen3.5-122b-a10b", eagle3(k)...), 64, 192, 1024, 512, 3)
		if r.OutputTokS > best {
			best, bestK = r.OutputTokS, k
		}
		if k == 10 {
			at10 = r.OutputTokS
		}
	}
	if bestK > 5 || at10 > 0.8*best {
		t.Errorf("c=64: best at steps %d (%.0f tok/s), steps 10 %.0f: want a peak at low steps and a fall", bestK, best, at10)
	}
	base := Simulate(mustModel(t, "qwen3.5-122b-a10b", "--tp", "4"), 1, 4, 1024, 512, 3)
	if base.OutputTokS < 85 || base.OutputTokS > 115 {
		t.Errorf("baseline single stream %.1f tok/s, want about 100", base.OutputTokS)
	}
}

func TestKVCapacityShrinksWithDraftTokens(t *testing.T) {
	m3 := mustModel(t, "qwen3.5-122b-a10b", eagle3(3)...)
	m10 := mustModel(t, "qwen3.5-122b-a10b", eagle3(10)...)
	if m10.Plan.MaxTotalTokens >= m3.Plan.MaxTotalTokens {
		t.Errorf("KV pool steps 10 (%d) not smaller than steps 3 (%d)", m10.Plan.MaxTotalTokens, m3.Plan.MaxTotalTokens)
	}
	fit := func(m *Model) int { return m.Plan.MaxTotalTokens / m.Footprint(1024, 512) }
	if fit(m10) >= 48 || fit(m3) < 48 {
		t.Errorf("requests that fit: steps 3 %d, steps 10 %d; want >=48 and <48", fit(m3), fit(m10))
	}
	r := Simulate(m10, 64, 128, 1024, 512, 1)
	if r.MeanRunning > float64(fit(m10))+0.5 {
		t.Errorf("mean running %.1f exceeds KV capacity %d", r.MeanRunning, fit(m10))
	}
}

func TestNEXTN27B(t *testing.T) {
	m := mustModel(t, "qwen3.6-27b", "--tp", "2", "--speculative-algorithm", "NEXTN")
	if m.Args.SpecAlgo != "EAGLE" || m.Args.Steps != 3 || m.Args.DraftTokens != 4 {
		t.Fatalf("NEXTN resolved to %s (%d,%d,%d)", m.Args.SpecAlgo, m.Args.Steps, m.Args.TopK, m.Args.DraftTokens)
	}
	r := Simulate(m, 1, 8, 1024, 512, 1)
	if math.Abs(r.OutputTokS/59.36-1) > 0.10 {
		t.Errorf("27B NEXTN TP2 c=1: %.1f tok/s, field report 59.36", r.OutputTokS)
	}
	t.Logf("27B NEXTN: %.1f tok/s accept %.2f", r.OutputTokS, r.AcceptLen)
}

func TestTopKRaisesAcceptanceAndCost(t *testing.T) {
	chain := mustModel(t, "qwen3.5-122b-a10b", eagle3(4)...)
	tree := mustModel(t, "qwen3.5-122b-a10b", "--tp", "4", "--speculative-algorithm", "EAGLE3",
		"--speculative-num-steps", "4", "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "12")
	if tree.ExpectedAccept() <= chain.ExpectedAccept() {
		t.Errorf("tree accept %.2f <= chain %.2f", tree.ExpectedAccept(), chain.ExpectedAccept())
	}
	if tree.StepTime(1, 1000) <= chain.StepTime(1, 1000) || tree.StepTime(32, 30000) <= chain.StepTime(32, 30000) {
		t.Errorf("tree step not slower than chain")
	}
	if tree.MaxAccept() != 5 {
		t.Errorf("max accept %d, want steps+1", tree.MaxAccept())
	}
}

func TestAcceptLengthBounds(t *testing.T) {
	m := mustModel(t, "qwen3.5-122b-a10b", eagle3(3)...)
	r := NewRequest("x", 1, 1, true, 0, 42)
	sum := 0
	for i := 0; i < 20000; i++ {
		n := m.SampleAccept(r.rng)
		if n < 1 || n > 4 {
			t.Fatalf("accept %d outside [1,4]", n)
		}
		sum += n
	}
	if got := float64(sum) / 20000; math.Abs(got-m.ExpectedAccept()) > 0.05 {
		t.Errorf("sampled mean %.3f, expected %.3f", got, m.ExpectedAccept())
	}
	// Reproducible per seed.
	a, b := Simulate(m, 4, 8, 100, 100, 5), Simulate(m, 4, 8, 100, 100, 5)
	if a != b {
		t.Errorf("same seed, different results: %+v vs %+v", a, b)
	}
}

func TestMemoryOOM(t *testing.T) {
	if p := mustModel(t, "qwen3.5-122b-a10b", "--tp", "2").Plan; p.OOM != "weights" {
		t.Errorf("122B at TP2 on 96 GB: OOM=%q, want weights", p.OOM)
	}
	big := mustModel(t, "qwen3.5-122b-a10b", "--tp", "4", "--speculative-algorithm", "EAGLE3",
		"--speculative-num-steps", "10", "--speculative-eagle-topk", "8", "--speculative-num-draft-tokens", "64")
	if big.Plan.OOM != "graph" {
		t.Errorf("steps 10 x topk 8: OOM=%q, want graph (plan %+v)", big.Plan.OOM, big.Plan)
	}
	if p := mustModel(t, "qwen3.5-122b-a10b", append(eagle3(3), "--mem-fraction-static", "0.99")...).Plan; p.OOM != "graph" {
		t.Errorf("mem fraction 0.99 leaves no room for graphs: OOM=%q", p.OOM)
	}
	if p := mustModel(t, "qwen3.5-122b-a10b", eagle3(3)...).Plan; p.OOM != "" {
		t.Errorf("default config OOM=%q", p.OOM)
	}
}

func TestTPScaling(t *testing.T) {
	m4 := mustModel(t, "qwen3.6-27b", "--tp", "4")
	m2 := mustModel(t, "qwen3.6-27b", "--tp", "2")
	if m4.StepTime(1, 1000) >= m2.StepTime(1, 1000) {
		t.Errorf("TP4 not faster than TP2")
	}
}
