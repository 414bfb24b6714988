package report

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/sweep"
)

// fallingSweep is an EAGLE3 chain (steps 1, 3, 5, 7, topk 1) and a baseline at tp 1, measured at c=1,
// 16 and 64 (one repeat), whose best steps fall with concurrency: 7 at c=1 (5 within 2%), 3 at
// c=16, the baseline at c=64.
func fallingSweep(topk int, algo string) *Sweep {
	s := &Sweep{ID: 7, Name: "falling", Levels: []int{1, 16, 64}, TPs: []int{1}, Repeats: 1}
	add := func(id string, steps int, tokS ...float64) {
		p := &Point{ID: id, State: "done", Cells: map[int]*Cell{},
			Config: Config{Method: "eagle3", NumSteps: steps, TopK: topk, NumDraftTokens: steps + 1, TP: 1, Algorithm: algo},
			Argv: []string{"python3", "-m", "sglang.launch_server", "--model-path", "/m", "--speculative-algorithm", algo,
				"--speculative-num-steps", "9", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "10"}}
		if steps == 0 {
			p.Config = Config{Method: "baseline", TP: 1, Baseline: true}
			p.Argv = []string{"python3", "-m", "sglang.launch_server", "--model-path", "/m"}
		}
		for i, c := range s.Levels {
			reps := &sweep.Repeats{}
			var r sweep.RepeatRun
			r.OK = true
			v := tokS[i]
			r.Figures[sweep.OutputTokS] = &v
			reps.Add(r)
			p.Cells[c] = newCell(p, c, reps)
		}
		s.Points = append(s.Points, p)
	}
	add("b", 0, 100, 1000, 2000)
	add("s1", 1, 140, 1150, 1800)
	add("s3", 3, 180, 1200, 1500)
	add("s5", 5, 198, 1100, 1300)
	add("s7", 7, 200, 1000, 1100)
	return s
}

// TestFitAdaptive: a slot per level with the steps within 2% of its best (one repeat), 0 where the
// baseline wins, the first slot's best to start with, in SGLang's file format.
func TestFitAdaptive(t *testing.T) {
	fit, err := FitAdaptive(fallingSweep(1, "EAGLE3"))
	if err != nil {
		t.Fatal(err)
	}
	got := slotSteps(t, fit)
	if want := []string{"5,7", "3", "0"}; !slices.Equal(got, want) {
		t.Errorf("slots %v, want %v", got, want)
	}
	if fit.InitialSteps != 7 || fit.Slots[0].Best != 7 || fit.Slots[2].Best != 0 {
		t.Errorf("initial steps %d, bests %d %d", fit.InitialSteps, fit.Slots[0].Best, fit.Slots[2].Best)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(fit.JSON(), &cfg); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, fit.JSON())
	}
	var slot struct {
		CandidateSteps []int `json:"candidate_steps"`
	}
	// Levels 1, 16, 64: the slots serve from 1, from 4 (the geometric middle of 1 and 16) and from 32.
	var keys []string
	for _, sl := range fit.Slots {
		keys = append(keys, fmt.Sprintf("%d@c=%d", sl.BatchSize, sl.Level))
	}
	if want := []string{"1@c=1", "4@c=16", "32@c=64"}; !slices.Equal(keys, want) {
		t.Errorf("slot keys %v, want %v", keys, want)
	}
	if err := json.Unmarshal(cfg["4"], &slot); err != nil || !slices.Equal(slot.CandidateSteps, []int{3}) || string(cfg["strategy"]) != `"ema"` {
		t.Errorf("config %s", fit.JSON())
	}
	// The slot without speculation serves c=64, above the 48 running requests SGLang gives a
	// speculative server: the server must be told to run 64.
	if fit.MaxRunning != 64 || NeedsMaxRunning(append(slices.Clone(fit.Argv), "--max-running-requests", "256"), 64) != 0 || NeedsMaxRunning(fit.Argv, 48) != 0 {
		t.Errorf("max running %d", fit.MaxRunning)
	}
	argv := strings.Join(fit.ServerArgs("/etc/sglang/adaptive.json"), " ")
	for _, want := range []string{"--speculative-num-steps 7", "--speculative-num-draft-tokens 8", "--speculative-eagle-topk 1",
		"--speculative-adaptive --speculative-adaptive-config /etc/sglang/adaptive.json", "--max-running-requests 64"} {
		if !strings.Contains(argv, want) {
			t.Errorf("server args %q lack %q", argv, want)
		}
	}
}

// slotSteps are each slot's candidate steps, "5,7".
func slotSteps(t *testing.T, fit *AdaptiveFit) []string {
	var out []string
	for _, sl := range fit.Slots {
		out = append(out, strings.Trim(jsonOf(t, sl.Steps), "[]"))
	}
	return out
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFitAdaptiveRefuses: a sweep whose chains SGLang's adaptive mode cannot run is refused in
// SGLang's words.
func TestFitAdaptiveRefuses(t *testing.T) {
	for _, c := range []struct {
		s    *Sweep
		want string
	}{
		{fallingSweep(4, "EAGLE3"), "speculative_eagle_topk=4 (only topk=1 is supported)"},
		{fallingSweep(1, "NGRAM"), "speculative_algorithm=NGRAM (only EAGLE/EAGLE3 are supported)"},
		{&Sweep{}, "no measured level"},
	} {
		if _, err := FitAdaptive(c.s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err %v, want %q", err, c.want)
		}
	}
	dp := fallingSweep(1, "EAGLE3")
	for _, p := range dp.Points {
		p.Argv = append(p.Argv, "--enable-dp-attention")
	}
	if _, err := FitAdaptive(dp); err == nil || !strings.Contains(err.Error(), "attention DP is not supported") {
		t.Errorf("dp attention: %v", err)
	}
}

// TestFitAndPlateauIgnoreIntervals: the confidence intervals every level now carries decide the
// noise verdict (sweep.NoiseOf) but not which steps a fitted slot may switch among nor where the
// plateau starts: with one repeat those keep the 2% rule. Wide intervals (±10%) would make every
// step a candidate; CI: the verification's fitted server no longer switched back at c=1.
func TestFitAndPlateauIgnoreIntervals(t *testing.T) {
	s := fallingSweep(1, "EAGLE3")
	for _, p := range s.Points {
		for _, c := range p.Cells {
			m := c.TokS.Median
			c.TokS.CI = &sweep.Bounds{Low: 0.9 * m, High: 1.1 * m}
		}
	}
	fit, err := FitAdaptive(s)
	if err != nil {
		t.Fatal(err)
	}
	got := slotSteps(t, fit)
	if want := []string{"5,7", "3", "0"}; !slices.Equal(got, want) {
		t.Errorf("slots %v, want %v (the 2%% rule, not the intervals)", got, want)
	}
	for _, b := range BestPerLevel(s) {
		if b.Concurrency == 1 && (b.Plateau == nil || b.Plateau.Point.NumSteps != 5) {
			t.Errorf("c=1 plateau %+v, want steps 5 (within 2%% of steps 7)", b.Plateau)
		}
	}
}
