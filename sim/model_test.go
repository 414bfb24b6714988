package sim

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func mustModel(t testing.TB, profile string, argv ...string) *Model {
	t.Helper()
	a, _, err := ParseArgs(append([]string{"--model-path", "/models/m"}, argv...))
	if err != nil {
		t.Fatalf("ParseArgs(%v): %v", argv, err)
	}
	return NewModel(a, Profiles[profile], 96)
}

// profileModel is the model of argv (after --model-path) under profile p on 96 GB GPUs.
func profileModel(t testing.TB, p *Profile, argv ...string) *Model {
	t.Helper()
	a, _, err := ParseArgs(append([]string{"--model-path", "/models/m"}, argv...))
	if err != nil {
		t.Fatalf("ParseArgs(%v): %v", argv, err)
	}
	return NewModel(a, p, 96)
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

// withProfile returns a copy of the built-in profile name changed by edit.
func withProfile(name string, edit func(p *Profile)) *Profile {
	p := *Profiles[name]
	edit(&p)
	return &p
}

// steps_extra_ms adds its time to a chain's forward at that num_steps only,
// so a throughput curve that is otherwise unimodal dips and rises again.
func TestStepsExtraMsDipAndSecondRise(t *testing.T) {
	long := func(p *Profile) {
		p.Name = "long-chain"
		p.Accept = map[string][]float64{"EAGLE3": {0.95, 0.94, 0.93, 0.92, 0.91, 0.9, 0.89, 0.87, 0.6, 0.35}}
		p.DraftFixed, p.DraftStep = 3, 0.3
	}
	plain := withProfile("qwen3.5-122b-a10b", long)
	extra := withProfile("qwen3.5-122b-a10b", func(p *Profile) { long(p); p.StepsExtraMs = []float64{0, 0, 0, 5, 7, 9, 3} })
	curve := func(p *Profile) (c []float64, s string) {
		for k := 1; k <= 10; k++ {
			m := profileModel(t, p, eagle3(k)...)
			c = append(c, m.SingleStreamTokS(1280))
			s += fmt.Sprintf(" %.0f", c[k-1])
		}
		return c, s
	}
	cp, sp := curve(plain)
	ce, se := curve(extra)
	t.Logf("decode tok/s, num_steps 1..10: without steps_extra_ms%s; with%s", sp, se)
	localMax := 0
	for k := 1; k < 9; k++ {
		if cp[k] > cp[k-1] && cp[k] > cp[k+1] {
			localMax++
		}
	}
	if localMax != 1 {
		t.Errorf("without steps_extra_ms: %d local maxima, want a unimodal curve:%s", localMax, sp)
	}
	for k := 1; k <= 10; k++ {
		want := 0.0
		if k-1 < len(extra.StepsExtraMs) {
			want = extra.StepsExtraMs[k-1]
		}
		me, mp := profileModel(t, extra, eagle3(k)...), profileModel(t, plain, eagle3(k)...)
		for _, bs := range []int{1, 32} {
			got := float64(me.StepTime(bs, bs*1280)-mp.StepTime(bs, bs*1280)) / float64(time.Millisecond)
			if math.Abs(got-want*me.tpFactor) > 1e-6 {
				t.Errorf("num_steps %d batch %d: steps_extra_ms adds %.4f ms, want %.4f", k, bs, got, want*me.tpFactor)
			}
		}
	}
	if !(ce[2] > ce[1] && ce[3] < ce[2] && ce[4] < ce[2] && ce[5] < ce[2]) {
		t.Errorf("with steps_extra_ms: no dip at 4-6 after 3:%s", se)
	}
	if !(ce[6] > ce[5] && ce[7] > ce[6] && math.Max(ce[7], ce[8]) > ce[2]) {
		t.Errorf("with steps_extra_ms: no second rise to a higher peak at 8-9:%s", se)
	}
	// Block and lookup methods ignore it: their num_steps is forced to 1.
	df := []string{"--tp", "4", "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/d", "--speculative-num-draft-tokens", "16"}
	extra.StepsExtraMs = []float64{50}
	if a, b := profileModel(t, extra, df...).StepTime(1, 1000), profileModel(t, plain, df...).StepTime(1, 1000); a != b {
		t.Errorf("DFLASH: steps_extra_ms changed the step time (%v vs %v)", a, b)
	}
}

// noise makes repeated runs of one configuration differ, from the engine's
// own seeded RNG: the same seed repeats, the requests' draws (acceptance) do
// not change, and noise 0 changes nothing.
func TestNoise(t *testing.T) {
	quiet := Profiles["qwen3.5-122b-a10b"]
	noisy := withProfile("qwen3.5-122b-a10b", func(p *Profile) { p.Noise = 0.1 })
	run := func(p *Profile, seed uint64, argv ...string) SimResult {
		return Simulate(profileModel(t, p, argv...), 1, 8, 1024, 512, seed)
	}
	base := []string{"--tp", "4"}
	// Without noise the baseline is deterministic whatever the seed; with it, each seed differs.
	q1, q2 := run(quiet, 1, base...), run(quiet, 2, base...)
	if q1 != q2 {
		t.Errorf("noise 0: seeds 1 and 2 differ at baseline: %.2f vs %.2f tok/s", q1.OutputTokS, q2.OutputTokS)
	}
	seen := map[float64]bool{}
	var sum, sq float64
	for seed := uint64(1); seed <= 8; seed++ {
		r := run(noisy, seed, base...)
		seen[r.OutputTokS] = true
		sum += r.OutputTokS
		sq += r.OutputTokS * r.OutputTokS
		if again := run(noisy, seed, base...); again != r {
			t.Errorf("noise: seed %d not reproducible: %.3f vs %.3f", seed, r.OutputTokS, again.OutputTokS)
		}
	}
	mean := sum / 8
	sd := math.Sqrt(sq/8 - mean*mean)
	t.Logf("baseline c=1: noise 0 %.2f tok/s; noise 0.1 over 8 seeds mean %.2f, sd %.2f (%.1f%%)", q1.OutputTokS, mean, sd, 100*sd/mean)
	if len(seen) != 8 || sd/mean < 0.003 {
		t.Errorf("noise 0.1: %d distinct results of 8, relative sd %.4f: want repeated runs to differ", len(seen), sd/mean)
	}
	if math.Abs(mean/q1.OutputTokS-1) > 0.05 {
		t.Errorf("noise 0.1: mean %.1f tok/s, %.1f without noise: want the same speed on average", mean, q1.OutputTokS)
	}
	// Speculative, one stream: the timing changes, the accepted lengths do not.
	sq1, sn1 := run(quiet, 3, eagle3(3)...), run(noisy, 3, eagle3(3)...)
	if sq1.AcceptLen != sn1.AcceptLen || sq1.CompletionToks != sn1.CompletionToks || sq1.OutputTokS == sn1.OutputTokS {
		t.Errorf("EAGLE3 steps 3: noise 0 %+v, noise 0.1 %+v: want the same acceptance, a different speed", sq1, sn1)
	}
	if f := NewEngine(profileModel(t, quiet, base...), 1, nil).speed(time.Unix(5, 0)); f != 1 {
		t.Errorf("noise 0: speed factor %v", f)
	}
}

// The speed factor holds for one (scaled) second, is redrawn after it, and
// stays in [0.5, 1.5] with a standard deviation near the profile's noise.
func TestNoiseFactor(t *testing.T) {
	p := withProfile("qwen3.5-122b-a10b", func(p *Profile) { p.Noise = 0.2 })
	e := NewEngine(profileModel(t, p, "--tp", "4"), 0.01, nil) // windows of 10 ms
	t0 := time.Unix(100, 0)
	f0 := e.speed(t0)
	if e.speed(t0.Add(9*time.Millisecond)) != f0 {
		t.Errorf("factor changed within a window")
	}
	var sum, sq float64
	n, changed := 20000, 0
	last := f0
	for i := 1; i <= n; i++ {
		f := e.speed(t0.Add(time.Duration(i) * 10 * time.Millisecond))
		if f < 0.5 || f > 1.5 {
			t.Fatalf("factor %v outside [0.5, 1.5]", f)
		}
		if f != last {
			changed++
		}
		last = f
		sum += f
		sq += f * f
	}
	mean := sum / float64(n)
	sd := math.Sqrt(sq/float64(n) - mean*mean)
	if changed < n-10 || math.Abs(mean-1) > 0.01 || math.Abs(sd-0.2) > 0.01 {
		t.Errorf("%d windows: %d changes, mean %.4f, sd %.4f; want a new factor each window, mean 1, sd 0.2", n, changed, mean, sd)
	}
	e2 := NewEngine(profileModel(t, withProfile("qwen3.5-122b-a10b", func(p *Profile) { p.Noise = 0.49 }), "--tp", "4"), 1, nil)
	for i := range 5000 {
		if f := e2.speed(t0.Add(time.Duration(i) * time.Second)); f < 0.5 || f > 1.5 {
			t.Fatalf("noise 0.49: factor %v outside [0.5, 1.5]", f)
		}
	}
}
