package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestAcceptScaleKnob(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "SGLANGSIM_ACCEPT_SCALE" {
				return v
			}
			return ""
		}
	}
	for in, want := range map[string]float64{"": 1, "1": 1, "0.3": 0.3, " 0.5 ": 0.5, "1e-3": 0.001} {
		c, err := LoadConfig(env(in))
		if err != nil || c.AcceptScale != want {
			t.Errorf("SGLANGSIM_ACCEPT_SCALE=%q: %v, %v; want %v", in, c.AcceptScale, err, want)
		}
	}
	for _, in := range []string{"0", "-0.1", "1.01", "x", "NaN", "Inf", "30%"} {
		_, err := LoadConfig(env(in))
		if err == nil || !strings.Contains(err.Error(), "invalid SGLANGSIM_ACCEPT_SCALE=") ||
			!strings.Contains(err.Error(), "want a number in (0, 1]") {
			t.Errorf("SGLANGSIM_ACCEPT_SCALE=%q: %v", in, err)
		}
	}
	c, err := LoadConfig(func(k string) string {
		return map[string]string{"SGLANGSIM_ENGINE_VERSION": " 0.5.10 "}[k]
	})
	if err != nil || c.EngineVersion != "0.5.10" {
		t.Errorf("SGLANGSIM_ENGINE_VERSION: %q, %v", c.EngineVersion, err)
	}
}

// TestAcceptScaleModel: the scale multiplies every per-position probability a request draws,
// whatever its content, context, temperature or the steps an adaptive server runs; the accept
// length and speculative speed fall, the baseline's speed and everything of scale 1 stay exactly.
func TestAcceptScaleModel(t *testing.T) {
	const s = 0.3
	base, spec := mustModel(t, DefaultProfile, "--tp", "4"), mustModel(t, DefaultProfile, eagle3(3)...)
	scaled := func(m *Model, scale float64) *Model {
		v := *m
		v.AcceptScale = scale
		return &v
	}
	for _, q := range []struct {
		class  ContentClass
		prompt int
		temp   float64
	}{{ContentNeutral, 100, 0}, {ContentCode, 100, 0}, {ContentProse, 20000, 0.7}, {ContentNeutral, 40000, 1}} {
		want, got := spec.AcceptFor(q.class, q.prompt, q.temp), scaled(spec, s).AcceptFor(q.class, q.prompt, q.temp)
		if len(got) != len(want) {
			t.Fatalf("%v: %d positions, want %d", q, len(got), len(want))
		}
		for i := range want {
			if math.Abs(got[i]-s*want[i]) > 1e-12 {
				t.Errorf("%v position %d: %v, want %v x %v", q, i+1, got[i], s, want[i])
			}
		}
	}
	for _, one := range []float64{0, 1} {
		if got := scaled(spec, one).AcceptFor(ContentNeutral, 100, 0); &got[0] != &spec.accept[0] {
			t.Errorf("scale %v: a new table, want the model's own (the draws unchanged)", one)
		}
	}
	if got, want := scaled(spec, s).forSteps(5).AcceptAt(0), spec.forSteps(5).AcceptAt(0); math.Abs(got[4]-s*want[4]) > 1e-12 {
		t.Errorf("adaptive variant at 5 steps: position 5 %v, want %v x %v", got[4], s, want[4])
	}

	run := func(m *Model) SimResult { return Simulate(m, 4, 16, 1024, 256, 1) }
	if a, b := run(base), run(scaled(base, s)); a != b {
		t.Errorf("baseline: %+v unscaled, %+v at scale %v; want the same", a, b, s)
	}
	if a, b := run(spec), run(scaled(spec, 1)); a != b {
		t.Errorf("scale 1 changed the run: %+v, %+v", a, b)
	}
	before, after := run(spec), run(scaled(spec, s))
	if want := scaled(spec, s).ExpectedAccept(); math.Abs(after.AcceptLen-want) > 0.1 || !(after.AcceptLen < before.AcceptLen/2) {
		t.Errorf("accept length %.2f -> %.2f at scale %v, want about %.2f", before.AcceptLen, after.AcceptLen, s, want)
	}
	if !(after.OutputTokS < 0.6*before.OutputTokS) {
		t.Errorf("output tok/s %.1f -> %.1f at scale %v, want a fall of over 40%%", before.OutputTokS, after.OutputTokS, s)
	}
	t.Logf("EAGLE3 steps 3, c=4: accept length %.2f -> %.2f, %.1f -> %.1f tok/s; baseline %.1f tok/s",
		before.AcceptLen, after.AcceptLen, before.OutputTokS, after.OutputTokS, run(base).OutputTokS)
}

// The table docs/sglangsim.md gives ("A regression on purpose"): the default profile, EAGLE-3
// steps 3 topk 1, 1024-token prompts, 512 tokens out, 8 requests per stream, seed 1.
func TestAcceptScaleDocFigures(t *testing.T) {
	base := mustModel(t, DefaultProfile, "--tp", "4")
	want := map[float64]struct {
		accept    string
		tokS1     string
		tokS8     string
		speedup1  string
		speedup8  string
		baseline1 string
		baseline8 string
	}{
		1:   {"3.72", "225", "1069", "2.21", "1.64", "102", "650"},
		0.7: {"2.42", "147", "720", "1.44", "1.11", "102", "650"},
		0.5: {"1.85", "113", "552", "1.11", "0.85", "102", "650"},
		0.3: {"1.42", "87", "433", "0.85", "0.67", "102", "650"},
	}
	b1, b8 := Simulate(base, 1, 8, 1024, 512, 1), Simulate(base, 8, 64, 1024, 512, 1)
	for s, w := range want {
		m := mustModel(t, DefaultProfile, eagle3(3)...)
		m.AcceptScale = s
		r1, r8 := Simulate(m, 1, 8, 1024, 512, 1), Simulate(m, 8, 64, 1024, 512, 1)
		got := [7]string{fmt.Sprintf("%.2f", r1.AcceptLen), fmt.Sprintf("%.0f", r1.OutputTokS), fmt.Sprintf("%.0f", r8.OutputTokS),
			fmt.Sprintf("%.2f", r1.OutputTokS/b1.OutputTokS), fmt.Sprintf("%.2f", r8.OutputTokS/b8.OutputTokS),
			fmt.Sprintf("%.0f", b1.OutputTokS), fmt.Sprintf("%.0f", b8.OutputTokS)}
		if got != [7]string{w.accept, w.tokS1, w.tokS8, w.speedup1, w.speedup8, w.baseline1, w.baseline8} {
			t.Errorf("scale %v: accept length, c=1 and c=8 tok/s, speedups, baselines %v; docs/sglangsim.md says %+v", s, got, w)
		}
	}
}
