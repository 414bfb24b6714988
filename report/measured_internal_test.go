package report

import (
	"strings"
	"testing"
)

// TestSimulatedTimeScale: the header's "simulated" fact reads SGLANGSIM_TIME_SCALE from the points'
// environment (the spec's server and method env) and says what it does to the figures; a server
// that is not sglangsim has no such fact.
func TestSimulatedTimeScale(t *testing.T) {
	sim := map[string]any{"simulator": "sglangsim (profile p, SGLANGSIM_VERSION main)", "version": "main"}
	sweepOf := func(envs ...map[string]string) *Sweep {
		s := &Sweep{}
		for i, env := range envs {
			s.Points = append(s.Points, &Point{ID: string(rune('a' + i)), Config: Config{Method: "m" + string(rune('a'+i)), Baseline: true},
				EffectiveArgs: sim, Env: env})
		}
		return s
	}
	fact := func(s *Sweep, key string) string {
		for _, f := range measured(s) {
			if f[0] == key {
				return f[1]
			}
		}
		return ""
	}
	for _, c := range []struct {
		s    *Sweep
		want string
	}{
		{sweepOf(map[string]string{"SGLANGSIM_TIME_SCALE": "0.05"}), "time scale 0.05 (SGLANGSIM_TIME_SCALE in the spec's env): sglangsim ran 20× faster"},
		{sweepOf(nil), "time scale 1 (SGLANGSIM_TIME_SCALE not set in the spec: its default): sglangsim's tok/s and latencies are those its profile models"},
		{sweepOf(map[string]string{"SGLANGSIM_TIME_SCALE": "2"}), "sglangsim ran 2× slower than the GPUs its profile models, so every tok/s is 1/2"},
		{sweepOf(map[string]string{"SGLANGSIM_TIME_SCALE": "0.05"}, map[string]string{"SGLANGSIM_TIME_SCALE": "0.1"}),
			"time scales 0.05 (ma); 0.1 (mb)"},
	} {
		if got := fact(c.s, "simulated"); !strings.Contains(got, c.want) {
			t.Errorf("simulated: %q, want %q in it", got, c.want)
		}
	}
	real := &Sweep{Points: []*Point{{ID: "a", Config: Config{Method: "baseline", Baseline: true}, EffectiveArgs: map[string]any{"version": "0.5.4"},
		Env: map[string]string{"SGLANGSIM_TIME_SCALE": "0.05"}}}}
	if got := fact(real, "simulated"); got != "" {
		t.Errorf("a real server's sweep: simulated %q", got)
	}
}
