package sweep_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/sweep"
)

// searchSpec is a one-host spec with num_steps 1..10, topk 1 (and topk 4 n=8 when trees), the
// given concurrency levels and search block.
func searchSpec(t *testing.T, trees bool, levels string, repeats int, search string) *sweep.Spec {
	t.Helper()
	topk, ndt := "[1]", "[auto]"
	if trees {
		topk, ndt = "[1, 4]", "[auto, 8]"
	}
	text := fmt.Sprintf(`version: 1
name: s
hosts: [{name: h, address: h.example, gpus: 4}]
server: {command: [/opt/sglang/bin/python, -m, sglang.launch_server]}
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
matrix: {method: [baseline, eagle3], num_steps: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], topk: %s, num_draft_tokens: %s, tp: [1]}
workload: {concurrency: %s, requests: 8, input_tokens: 8, output_tokens: 8, repeats: %d}
search: %s
`, topk, ndt, levels, repeats, search)
	s, err := sweep.Parse("s.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// curve gives a point's repeats of output tok/s and its accept length at a level.
type curve func(pt sweep.Point, level int) (tokS []float64, accept float64)

// chainCurve is a chain with per-position acceptance p and step cost 1 + cost*steps: throughput
// (accept length / cost) rises while the next position pays for its cost. extra adds cost at
// given steps (a dip); trees (topk 4) get treeGain on the accept length and treeCost on the cost.
func chainCurve(p, cost float64, extra map[int]float64, treeGain, treeCost float64) curve {
	return func(pt sweep.Point, level int) ([]float64, float64) {
		scale := 100 / float64(level) // higher levels differ only in scale here
		if pt.Baseline {
			return []float64{scale}, 0
		}
		s := *pt.NumSteps
		a, q := 1.0, 1.0
		for range s {
			q *= p
			a += q
		}
		c := 1 + cost*float64(s) + extra[s]
		if *pt.TopK > 1 {
			a *= treeGain
			c *= treeCost
		}
		return []float64{scale * a / c}, a
	}
}

type searchRun struct {
	ran     []sweep.Point
	pruned  map[string]string
	release map[string]string
	rounds  int
}

// drive runs Decide to the end as the orchestrator does: every released point finishes with its
// figures before the next call.
func drive(t *testing.T, s *sweep.Spec, f curve) searchRun {
	t.Helper()
	return driveCI(t, s, f, 0)
}

// driveCI is drive with every single-repeat level carrying a confidence interval of ±halfWidth
// (relative) around its figure (0: none), as a precision-targeted level records.
func driveCI(t *testing.T, s *sweep.Spec, f curve, halfWidth float64) searchRun {
	t.Helper()
	plan := s.Plan()
	byID := map[string]sweep.Point{}
	for _, pt := range plan.Points {
		byID[pt.ID] = pt
	}
	known := map[string]sweep.PointResult{}
	out := searchRun{pruned: map[string]string{}, release: map[string]string{}}
	for ; out.rounds < 100; out.rounds++ {
		d := s.Decide(plan, known)
		if len(d.Release) == 0 && len(d.Prune) == 0 {
			break
		}
		for _, r := range d.Release {
			if _, dup := known[r.PointID]; dup {
				t.Fatalf("point %s released twice", byID[r.PointID].Label())
			}
			known[r.PointID] = measure(byID[r.PointID], s.Workload.Concurrency, f, halfWidth)
			out.ran = append(out.ran, byID[r.PointID])
			out.release[r.PointID] = r.Reason
		}
		for _, p := range d.Prune {
			if _, dup := known[p.PointID]; dup {
				t.Fatalf("point %s pruned after a decision", byID[p.PointID].Label())
			}
			known[p.PointID] = sweep.PointResult{Knowledge: sweep.Dropped}
			out.pruned[p.PointID] = p.Reason
		}
	}
	for _, pt := range plan.Points {
		if _, ok := known[pt.ID]; !ok {
			t.Fatalf("point %s left undecided after %d rounds", pt.Label(), out.rounds)
		}
	}
	return out
}

func measure(pt sweep.Point, levels []int, f curve, halfWidth float64) sweep.PointResult {
	r := sweep.PointResult{Knowledge: sweep.Measured, Levels: map[int]sweep.LevelResult{}}
	for _, c := range levels {
		tok, a := f(pt, c)
		l := sweep.LevelResult{OutputTokS: tok, AcceptLength: a}
		if halfWidth > 0 && len(tok) == 1 {
			l.TokS = &sweep.Bounds{Low: tok[0] * (1 - halfWidth), High: tok[0] * (1 + halfWidth)}
		}
		r.Levels[c] = l
	}
	return r
}

// bestOf is the label of the best point at a level among pts.
func bestOf(pts []sweep.Point, level int, f curve) (string, float64) {
	best, bv := "", math.Inf(-1)
	for _, pt := range pts {
		tok, _ := f(pt, level)
		if m := median(tok); m > bv {
			best, bv = pt.Label(), m
		}
	}
	return best, bv
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func stepsRan(r searchRun, topk int) []int {
	var out []int
	for _, pt := range r.ran {
		if !pt.Baseline && *pt.TopK == topk {
			out = append(out, *pt.NumSteps)
		}
	}
	slices.Sort(out)
	return out
}

// sameAnswer checks climb's best per level against the grid's: equal or within min_gain.
func sameAnswer(t *testing.T, s *sweep.Spec, r searchRun, f curve) {
	t.Helper()
	for _, c := range s.Workload.Concurrency {
		gl, gv := bestOf(s.Plan().Points, c, f)
		cl, cv := bestOf(r.ran, c, f)
		if cv < gv*(1-s.Search.MinGain) {
			t.Errorf("c=%d: climb's best %s (%.2f) is more than min_gain below the grid's %s (%.2f)", c, cl, cv, gl, gv)
		}
	}
}

func TestClimbStopsAtAPlateau(t *testing.T) {
	s := searchSpec(t, false, "[1]", 1, "{strategy: climb}")
	f := chainCurve(0.8, 0.15, nil, 1, 1) // peaks at steps 3-4, then falls
	r := drive(t, s, f)
	sameAnswer(t, s, r, f)
	steps := stepsRan(r, 1)
	if len(steps) > 6 {
		t.Errorf("ran steps %v: the climb should stop soon after the peak", steps)
	}
	if slices.Contains(steps, 10) || slices.Contains(steps, 9) {
		t.Errorf("ran steps %v: past the plateau", steps)
	}
	n := 0
	for _, why := range r.pruned {
		if strings.Contains(why, "below min_gain 2%") {
			n++
		}
	}
	if n == 0 {
		t.Errorf("no pruned point says it is below min_gain: %v", r.pruned)
	}
	t.Logf("ran steps %v; pruned %d", steps, len(r.pruned))
}

func TestProbeReopensAChain(t *testing.T) {
	// Rises to 2, a dip from 3 to 6, a second rise to a higher peak at 9.
	extra := map[int]float64{3: 0.9, 4: 1.2, 5: 1.0, 6: 0.6}
	f := chainCurve(0.93, 0.05, extra, 1, 1)
	without := drive(t, searchSpec(t, false, "[1]", 1, "{strategy: climb}"), f)
	s := searchSpec(t, false, "[1]", 1, "{strategy: climb, probe: [10]}")
	r := drive(t, s, f)
	sameAnswer(t, s, r, f)
	gridBest, _ := bestOf(s.Plan().Points, 1, f)
	if b, _ := bestOf(without.ran, 1, f); b == gridBest {
		t.Fatalf("without a probe the climb found %s: the test's dip does not stop it", b)
	}
	reopened := false
	for _, why := range r.release {
		reopened = reopened || strings.Contains(why, "probe steps 10 beat the climb")
	}
	if !reopened {
		t.Errorf("no point released by a reopened chain: %v", r.release)
	}
	if b, _ := bestOf(r.ran, 1, f); b != gridBest {
		t.Errorf("best %s, want the grid's %s (ran %v)", b, gridBest, stepsRan(r, 1))
	}
	t.Logf("without probe: %v; with: %v", stepsRan(without, 1), stepsRan(r, 1))
}

func TestTreeShapesAroundTheBest(t *testing.T) {
	s := searchSpec(t, true, "[1, 16]", 1, "{strategy: climb}")
	f := chainCurve(0.8, 0.15, nil, 1.15, 1.05) // the tree wins a little, at the same steps
	r := drive(t, s, f)
	sameAnswer(t, s, r, f)
	chain, tree := stepsRan(r, 1), stepsRan(r, 4)
	if len(tree) == 0 || len(tree) > 3 {
		t.Fatalf("tree steps run %v, want a few around the chain's best (chain ran %v)", tree, chain)
	}
	for _, st := range tree {
		if st < 2 || st > 5 {
			t.Errorf("tree tried at steps %d, far from the chain's best (chain ran %v)", st, chain)
		}
	}
	for id, why := range r.pruned {
		if why == "" {
			t.Errorf("point %s pruned without a reason", id)
		}
	}
}

func TestRepeatsGainMustBeClearOfNoise(t *testing.T) {
	// Each step is 3% better than the one before, but the repeats spread by 10%.
	noisy := func(pt sweep.Point, level int) ([]float64, float64) {
		if pt.Baseline {
			return []float64{50, 50}, 0
		}
		v := 100 * math.Pow(1.03, float64(*pt.NumSteps))
		return []float64{v * 0.95, v * 1.05}, 1 + float64(*pt.NumSteps)*0.5
	}
	s := searchSpec(t, false, "[1]", 2, "{strategy: climb}")
	r := drive(t, s, noisy)
	if steps := stepsRan(r, 1); len(steps) > 3 {
		t.Errorf("ran steps %v: a 3%% gain inside 10%% noise must not keep the climb going", steps)
	}
	clearCurve := func(pt sweep.Point, level int) ([]float64, float64) {
		tok, a := noisy(pt, level)
		m := median(tok)
		return []float64{m * 0.999, m * 1.001}, a
	}
	r2 := drive(t, s, clearCurve)
	if steps := stepsRan(r2, 1); len(steps) < 5 {
		t.Errorf("ran steps %v: clear 3%% gains should keep the climb going", steps)
	}
}

// TestIntervalsGainMustBeClearOfThem: without repeats, a precision-targeted level's confidence
// interval decides as repeats' ranges do: a 3% step gain inside ±5% intervals does not keep the
// climb going, the same gain with ±0.5% intervals does.
func TestIntervalsGainMustBeClearOfThem(t *testing.T) {
	curve := func(pt sweep.Point, level int) ([]float64, float64) {
		if pt.Baseline {
			return []float64{50}, 0
		}
		return []float64{100 * math.Pow(1.03, float64(*pt.NumSteps))}, 1 + float64(*pt.NumSteps)*0.5
	}
	s := searchSpec(t, false, "[1]", 1, "{strategy: climb}")
	if steps := stepsRan(driveCI(t, s, curve, 0.05), 1); len(steps) > 3 {
		t.Errorf("ran steps %v: a 3%% gain inside ±5%% intervals must not keep the climb going", steps)
	}
	if steps := stepsRan(driveCI(t, s, curve, 0.005), 1); len(steps) < 5 {
		t.Errorf("ran steps %v: 3%% gains clear of ±0.5%% intervals should keep the climb going", steps)
	}
	if steps := stepsRan(driveCI(t, s, curve, 0), 1); len(steps) < 5 {
		t.Errorf("ran steps %v: without intervals nor repeats the noise does not hold a gain back", steps)
	}
}

func TestBudgetCapsThePointsRun(t *testing.T) {
	s := searchSpec(t, true, "[1]", 1, "{strategy: climb, budget: 4}")
	r := drive(t, s, chainCurve(0.9, 0.05, nil, 1, 1))
	if len(r.ran) != 4 {
		t.Errorf("ran %d points, want the budget's 4", len(r.ran))
	}
	n := 0
	for _, why := range r.pruned {
		if strings.Contains(why, "budget of 4 points") {
			n++
		}
	}
	if n == 0 {
		t.Errorf("no point pruned for the budget: %v", r.pruned)
	}
	g := searchSpec(t, false, "[1]", 1, "{strategy: grid, budget: 3}")
	rg := drive(t, g, chainCurve(0.9, 0.05, nil, 1, 1))
	if len(rg.ran) != 3 || !rg.ran[0].Baseline || *rg.ran[2].NumSteps != 2 {
		t.Errorf("grid under budget ran %v, want the first 3 in plan order", rg.ran)
	}
}

func TestGridWithoutSearchReleasesEverything(t *testing.T) {
	s := searchSpec(t, false, "[1]", 1, "{strategy: grid}")
	if s.Searched() {
		t.Fatal("a grid without budget is not searched")
	}
	r := drive(t, s, chainCurve(0.9, 0.05, nil, 1, 1))
	if len(r.ran) != len(s.Plan().Points) || len(r.pruned) != 0 {
		t.Errorf("ran %d of %d, pruned %d", len(r.ran), len(s.Plan().Points), len(r.pruned))
	}
}

// TestDecideReplaysTheSameDecisions: after a crash the orchestrator calls Decide with what the
// store holds; the decisions must not depend on when a call happens, only on the results.
func TestDecideReplaysTheSameDecisions(t *testing.T) {
	s := searchSpec(t, true, "[1, 16]", 1, "{strategy: climb, probe: [10]}")
	f := chainCurve(0.85, 0.1, nil, 1.1, 1.05)
	plan := s.Plan()
	byID := map[string]sweep.Point{}
	for _, pt := range plan.Points {
		byID[pt.ID] = pt
	}
	full := drive(t, s, f)
	// Replay: released points finish one at a time (most recently released first), and every
	// state in between is decided again from scratch, as after a kill -9.
	known := map[string]sweep.PointResult{}
	var ran []string
	inflight := []string{}
	for range 200 {
		d := s.Decide(plan, known)
		again := s.Decide(plan, known)
		if fmt.Sprint(d) != fmt.Sprint(again) {
			t.Fatalf("two calls on the same state differ:\n%v\n%v", d, again)
		}
		for _, r := range d.Release {
			known[r.PointID] = sweep.PointResult{Knowledge: sweep.Released}
			inflight = append(inflight, r.PointID)
		}
		for _, p := range d.Prune {
			known[p.PointID] = sweep.PointResult{Knowledge: sweep.Dropped}
		}
		if len(inflight) == 0 {
			break
		}
		id := inflight[len(inflight)-1]
		inflight = inflight[:len(inflight)-1]
		known[id] = measure(byID[id], s.Workload.Concurrency, f, 0)
		ran = append(ran, id)
	}
	var want []string
	for _, pt := range full.ran {
		want = append(want, pt.ID)
	}
	slices.Sort(ran)
	slices.Sort(want)
	if !slices.Equal(ran, want) {
		t.Errorf("points run in another completion order differ:\n got %v\nwant %v", ran, want)
	}
}

// TestChainsRunSideBySide: two tps give two chains, and each has a point released at once, so two
// hosts are both busy from the start.
func TestChainsRunSideBySide(t *testing.T) {
	text := strings.Replace(`version: 1
name: s
hosts: [{name: h1, address: h1.example, gpus: 2}, {name: h2, address: h2.example, gpus: 2}]
server: {command: [/opt/sglang/bin/python, -m, sglang.launch_server]}
methods: {eagle3: [--speculative-algorithm, EAGLE3]}
matrix: {method: [eagle3], num_steps: [1, 2, 3, 4, 5], topk: [1], tp: [1, 2]}
workload: {concurrency: [1], requests: 8, input_tokens: 8, output_tokens: 8}
search: {strategy: climb}
`, "\t", "", -1)
	s, err := sweep.Parse("s.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	d := s.Decide(s.Plan(), nil)
	if len(d.Release) != 2 {
		t.Fatalf("released %v, want the first point of each chain", d.Release)
	}
}

// FuzzDecide: whatever the measurements (zeros, NaN, infinities, failed levels, repeats that
// disagree), the search ends, decides every point once and never panics.
func FuzzDecide(f *testing.F) {
	f.Add([]byte("\x10\x20\x30\x40\x50\x60\x70\x80"), uint8(0))
	f.Add([]byte("\xff\x00\xff\x00"), uint8(3))
	f.Add([]byte{}, uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		search := []string{"{strategy: climb}", "{strategy: climb, probe: [10], patience: 2}",
			"{strategy: climb, budget: 5}", "{strategy: grid, budget: 3}"}[mode%4]
		s := searchSpec(t, mode&4 != 0, "[1, 16]", 1+int(mode>>3)%2, search)
		plan := s.Plan()
		at := 0
		next := func() float64 {
			if len(data) == 0 {
				return 1
			}
			b := data[at%len(data)]
			at++
			switch b {
			case 0xff:
				return math.NaN()
			case 0xfe:
				return math.Inf(1)
			}
			return float64(b)
		}
		known := map[string]sweep.PointResult{}
		for round := 0; ; round++ {
			if round > 2*len(plan.Points)+2 {
				t.Fatal("the search does not end")
			}
			d := s.Decide(plan, known)
			if len(d.Release) == 0 && len(d.Prune) == 0 {
				break
			}
			for _, r := range d.Release {
				if _, dup := known[r.PointID]; dup {
					t.Fatalf("%s decided twice", r.PointID)
				}
				res := sweep.PointResult{Knowledge: sweep.Measured, Levels: map[int]sweep.LevelResult{}}
				for _, c := range s.Workload.Concurrency {
					if v := next(); v == 7 {
						continue // a failed level
					}
					var tok []float64
					for range s.Workload.Repeats {
						tok = append(tok, next())
					}
					res.Levels[c] = sweep.LevelResult{OutputTokS: tok, AcceptLength: next() / 32}
				}
				known[r.PointID] = res
			}
			for _, p := range d.Prune {
				if _, dup := known[p.PointID]; dup {
					t.Fatalf("%s decided twice", p.PointID)
				}
				known[p.PointID] = sweep.PointResult{Knowledge: sweep.Dropped}
			}
		}
		for _, pt := range plan.Points {
			if _, ok := known[pt.ID]; !ok {
				t.Fatalf("%s left undecided", pt.Label())
			}
		}
	})
}
