package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
	"github.com/specsweep/specsweep/sim"
	"github.com/specsweep/specsweep/sweep"
)

// The search (issue 14) on the real simulator: real sweeps of sglangsim processes whose profiles
// have the shapes under test, checked against the simulator's own model and against a replay of
// the search from the recorded runs.

// profileFile returns the absolute path of a profile of sim/testdata/profiles, or writes a
// variant of it (edit changes the decoded JSON) into dir.
func profileFile(t *testing.T, name string, edit func(map[string]any), dir string) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", "..", "sim", "testdata", "profiles", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if edit == nil {
		return src
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, _ := json.MarshalIndent(m, "", "  ")
	p := filepath.Join(dir, name+"-variant.json")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// searchEnv runs the simulator at a fifth of real time, not fastEnv's twentieth: at c=1 a request
// of fastEnv lasts about 20 ms, so the client's round trip and a busy machine's scheduling moved a
// point's figure by more than the 5% the answer is checked to (testClimbOnTheSimulator failed 3 runs
// of 4 beside two busy loops, and once in CI).
const searchEnv = `SGLANGSIM_TIME_SCALE: "0.2", SGLANGSIM_LOAD_SECONDS: "2.5", SGLANGSIM_WARMUP_SECONDS: "0.5", SGL_FORCE_SHUTDOWN: "1"`

// localSearchSpec is a one-host local sweep of sglangsim with a profile file.
func localSearchSpec(sim, profile, matrix, workload, search string, port int) string {
	return fmt.Sprintf(`version: 1
name: e2e-search
hosts: [{name: here, driver: local, gpus: 4}]
server:
  command: [%s]
  args: [--model-path, /models/synthetic, --host, 127.0.0.1, --port, "%d", --enable-metrics]
  env: {%s, SGLANGSIM_PROFILE: %q}
  port: %d
  ready_timeout: 1m
  stop_timeout: 20s
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/eagle3]
matrix: %s
workload: %s
search: %s
`, sim, port, searchEnv, profile, port, matrix, workload, search)
}

// modelTokS is the simulator model's output tok/s for a point at a level (virtual time, no noise).
func modelTokS(t *testing.T, p *sim.Profile, pt sweep.Point, level, requests, input, output int) float64 {
	t.Helper()
	a, _, err := sim.ParseArgs(pt.Argv[1:])
	if err != nil {
		t.Fatalf("%s: %v", pt.Label(), err)
	}
	return sim.Simulate(sim.NewModel(a, p, 96), level, requests, input, output, 1).OutputTokS
}

// searchOutcome is a finished search sweep as stored.
type searchOutcome struct {
	spec    *sweep.Spec
	plan    *sweep.Plan
	byID    map[string]sweep.Point
	state   map[string]string // point id -> state
	reason  map[string]string
	results map[string]sweep.PointResult
	events  []string // released events' details
}

func readSearch(t *testing.T, specPath, dbPath string) searchOutcome {
	t.Helper()
	spec, err := sweep.Load(specPath)
	if err != nil {
		t.Fatal(err)
	}
	o := searchOutcome{spec: spec, plan: spec.Plan(), byID: map[string]sweep.Point{}, state: map[string]string{},
		reason: map[string]string{}, results: map[string]sweep.PointResult{}}
	for _, pt := range o.plan.Points {
		o.byID[pt.ID] = pt
	}
	db := openDB(t, dbPath)
	rows, err := db.Query(`SELECT point_id, state, coalesce(reason, '') FROM point_summary`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, st, why string
		if err := rows.Scan(&id, &st, &why); err != nil {
			t.Fatal(err)
		}
		o.state[id], o.reason[id] = st, why
	}
	rows.Close()
	o.results = recordedResults(t, db)
	ev, err := db.Query(`SELECT detail FROM event_log WHERE kind = 'released' ORDER BY at`)
	if err != nil {
		t.Fatal(err)
	}
	for ev.Next() {
		var d string
		if err := ev.Scan(&d); err != nil {
			t.Fatal(err)
		}
		o.events = append(o.events, d)
	}
	ev.Close()
	return o
}

// recordedResults reads what each point measured, by the rule the orchestrator reads it with
// (docs/spec.md, "How climb searches"): the ok runs of a level whose repeats all measured, and the
// median accept length when every repeat has one.
func recordedResults(t *testing.T, db *sql.DB) map[string]sweep.PointResult {
	t.Helper()
	rows, err := db.Query(`SELECT point_id, concurrency, status, output_tok_s, accept_length FROM run_summary
		WHERE status <> 'superseded' ORDER BY point_id, concurrency, repeat`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type lv struct {
		tok, acc []float64
		bad      bool
	}
	per := map[string]map[int]*lv{}
	for rows.Next() {
		var id, status string
		var c int
		var tok, acc sql.NullFloat64
		if err := rows.Scan(&id, &c, &status, &tok, &acc); err != nil {
			t.Fatal(err)
		}
		if per[id] == nil {
			per[id] = map[int]*lv{}
		}
		l := per[id][c]
		if l == nil {
			l = &lv{}
			per[id][c] = l
		}
		if status != "ok" || !tok.Valid {
			l.bad = true
			continue
		}
		l.tok = append(l.tok, tok.Float64)
		if acc.Valid {
			l.acc = append(l.acc, acc.Float64)
		}
	}
	out := map[string]sweep.PointResult{}
	for id, levels := range per {
		r := sweep.PointResult{Knowledge: sweep.Measured, Levels: map[int]sweep.LevelResult{}}
		for c, l := range levels {
			if l.bad || len(l.tok) == 0 {
				continue
			}
			res := sweep.LevelResult{OutputTokS: l.tok}
			if len(l.acc) == len(l.tok) {
				res.AcceptLength = sweep.Median(l.acc)
			}
			r.Levels[c] = res
		}
		out[id] = r
	}
	return out
}

// checkReplay replays the search from the recorded runs alone, as a resumed sweep would: the
// points it runs must be exactly the points that ran, once each, and the ones it prunes the pruned.
func checkReplay(t *testing.T, o searchOutcome) {
	t.Helper()
	known := map[string]sweep.PointResult{}
	for round := 0; ; round++ {
		if round > 4*len(o.plan.Points) {
			t.Fatal("replay does not end")
		}
		d := o.spec.Decide(o.plan, known)
		if len(d.Release) == 0 && len(d.Prune) == 0 {
			break
		}
		for _, r := range d.Release {
			if st := o.state[r.PointID]; st != "done" && st != "failed" {
				t.Errorf("replay runs %s, which is %s in the store", o.byID[r.PointID].Label(), st)
			}
			res, ok := o.results[r.PointID]
			if !ok {
				res = sweep.PointResult{Knowledge: sweep.Measured} // a start failure measures nothing
			}
			known[r.PointID] = res
		}
		for _, p := range d.Prune {
			if st := o.state[p.PointID]; st != "pruned" {
				t.Errorf("replay prunes %s, which is %s in the store", o.byID[p.PointID].Label(), st)
			}
			if o.reason[p.PointID] != p.Reason {
				t.Errorf("%s pruned for %q, the replay says %q", o.byID[p.PointID].Label(), o.reason[p.PointID], p.Reason)
			}
			known[p.PointID] = sweep.PointResult{Knowledge: sweep.Dropped}
		}
	}
	for id, st := range o.state {
		if _, ok := known[id]; !ok {
			t.Errorf("%s is %s in the store but the replay never decides it", o.byID[id].Label(), st)
		}
	}
}

// ran lists the points that ran (done or failed).
func (o searchOutcome) ran() []sweep.Point {
	var out []sweep.Point
	for _, pt := range o.plan.Points {
		if st := o.state[pt.ID]; st == "done" || st == "failed" {
			out = append(out, pt)
		}
	}
	return out
}

// bestMeasured is the point with the highest median output tok/s at a level among those that ran.
func (o searchOutcome) bestMeasured(level int) sweep.Point {
	best, _ := o.bestMeasuredOf(level, func(sweep.Point) bool { return true })
	return best
}

// bestMeasuredOf is bestMeasured among the points that ran and keep says; ok false: none measured
// the level.
func (o searchOutcome) bestMeasuredOf(level int, keep func(sweep.Point) bool) (best sweep.Point, ok bool) {
	bv := math.Inf(-1)
	for _, pt := range o.ran() {
		if !keep(pt) {
			continue
		}
		if l, measured := o.results[pt.ID].Levels[level]; measured {
			if m := sweep.Median(l.OutputTokS); m > bv {
				best, bv, ok = pt, m, true
			}
		}
	}
	return best, ok
}

// checkAnswer: the configuration the search found best at each level is, by the simulator's own
// model, within min_gain (and 3% for measuring in real time) of the best of the whole grid.
func checkAnswer(t *testing.T, o searchOutcome, p *sim.Profile) {
	t.Helper()
	w := o.spec.Workload
	for _, c := range w.Concurrency {
		best, bv := "", 0.0
		for _, pt := range o.plan.Points {
			if v := modelTokS(t, p, pt, c, w.Requests, w.InputTokens, w.OutputTokens); v > bv {
				best, bv = pt.Label(), v
			}
		}
		found := o.bestMeasured(c)
		fv := modelTokS(t, p, found, c, w.Requests, w.InputTokens, w.OutputTokens)
		if fv < bv*(1-o.spec.Search.MinGain-0.03) {
			t.Errorf("c=%d: the search's best %s is %.0f tok/s by the model, the grid's best %s %.0f", c, found.Label(), fv, best, bv)
		}
		t.Logf("c=%d: search found %s (model %.0f tok/s), grid best %s (%.0f)", c, found.Label(), fv, best, bv)
	}
	if t.Failed() {
		// What the search saw: every point's measured medians beside the model's, and why the rest were pruned.
		for _, pt := range o.plan.Points {
			line := fmt.Sprintf("%-28s %-7s", pt.Label(), o.state[pt.ID])
			for _, c := range w.Concurrency {
				m := modelTokS(t, p, pt, c, w.Requests, w.InputTokens, w.OutputTokens)
				if l, ok := o.results[pt.ID].Levels[c]; ok {
					line += fmt.Sprintf("  c=%d measured %.0f model %.0f", c, sweep.Median(l.OutputTokS), m)
				} else {
					line += fmt.Sprintf("  c=%d model %.0f", c, m)
				}
			}
			if r := o.reason[pt.ID]; r != "" {
				line += "  (" + r + ")"
			}
			t.Log(line)
		}
	}
}

func mustProfile(t *testing.T, path string) *sim.Profile {
	t.Helper()
	p, err := sim.LoadProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testClimbOnTheSimulator: an early plateau. The climb stops past it, the tree shape is tried only
// near the chain's best, every pruned point says why, and the answer is the grid's.
func testClimbOnTheSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	prof := profileFile(t, "early-plateau", nil, "")
	f := writeSpec(t, localSearchSpec(testhost.SimBinary(t), prof,
		"{method: [baseline, eagle3], num_steps: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], topk: [1, 4], num_draft_tokens: [auto, 8], tp: [4]}",
		// Three repeats: the climb decides on medians, so one level slowed by a busy machine (a
		// CI run's other package) does not move the answer (it did, twice, with one repeat).
		"{concurrency: [1, 16], requests: 16, warmup_requests: 2, input_tokens: 64, output_tokens: 64, repeats: 3}",
		"{strategy: climb, min_gain: 0.02, patience: 1}", 31781))
	r := specsweep(t, 5*time.Minute, "run", "--db", f.db, f.spec)
	if r.code != 0 {
		t.Fatalf("run failed:\n%s", r)
	}
	o := readSearch(t, f.spec, f.db)
	checkReplay(t, o)
	checkAnswer(t, o, mustProfile(t, prof))
	ran := o.ran()
	if len(ran) > len(o.plan.Points)/2 {
		t.Errorf("ran %d of %d points", len(ran), len(o.plan.Points))
	}
	// The search tries the tree shape at the chain's best steps of each level (sweep/search.go's
	// seeds), whether or not the chain's best is the level's best: a tree point may win a level
	// (the grid's best at c=1 is one), and reading only the levels a chain point won left c=1's
	// seed out (a CI run's c=16 chain best was steps 1, a tree point at 4 beside c=1's seed "far").
	var chainBest []int
	for _, c := range o.spec.Workload.Concurrency {
		if b, ok := o.bestMeasuredOf(c, func(pt sweep.Point) bool { return !pt.Baseline && *pt.TopK == 1 }); ok {
			chainBest = append(chainBest, *b.NumSteps)
		}
	}
	for _, pt := range o.plan.Points {
		st := o.state[pt.ID]
		switch {
		case st == "pruned" && o.reason[pt.ID] == "":
			t.Errorf("%s pruned without a reason", pt.Label())
		case st != "pruned" && st != "done":
			t.Errorf("%s is %s", pt.Label(), st)
		case st == "done" && !pt.Baseline && *pt.TopK == 1 && *pt.NumSteps >= 7:
			t.Errorf("%s ran: past the plateau (steps 2-3)", pt.Label())
		}
	}
	near := false
	for _, pt := range ran {
		if !pt.Baseline && *pt.TopK == 4 {
			d := 99
			for _, b := range chainBest {
				d = min(d, abs(*pt.NumSteps-b))
			}
			if d > 2 {
				t.Errorf("tree point %s far from the chain's best steps %v", pt.Label(), chainBest)
			}
			near = true
		}
	}
	if !near {
		t.Errorf("no tree point ran (chain's best steps %v)", chainBest)
	}
	for _, want := range []string{"Pruned by the search ("} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run output lacks %q:\n%s", want, r.stdout)
		}
	}
	t.Logf("ran %d of %d points", len(ran), len(o.plan.Points))
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// testProbeReopensOnTheSimulator: a dip after steps 2 stops the climb; the probe at 10 beats it and
// the chain is reopened below the probe, where the real peak is.
func testProbeReopensOnTheSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	prof := profileFile(t, "second-rise", func(m map[string]any) {
		m["name"] = "deep-dip"
		m["steps_extra_ms"] = []float64{0, 0, 6, 9, 9, 7, 3}
	}, t.TempDir())
	p := mustProfile(t, prof)
	spec := localSearchSpec(testhost.SimBinary(t), prof, "{method: [baseline, eagle3], num_steps: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], topk: [1], tp: [4]}",
		"{concurrency: [1], requests: 12, warmup_requests: 2, input_tokens: 64, output_tokens: 64}",
		"{strategy: climb, min_gain: 0.02, patience: 1, probe: [10]}", 31782)
	f := writeSpec(t, spec)
	// The shape under test, by the model: steps 4 is below steps 2, and the peak past the dip is
	// well above both.
	s, err := sweep.Load(f.spec)
	if err != nil {
		t.Fatal(err)
	}
	model := map[int]float64{}
	for _, pt := range s.Plan().Points {
		if !pt.Baseline {
			model[*pt.NumSteps] = modelTokS(t, p, pt, 1, 12, 64, 64)
		}
	}
	peak := 0
	for st := 5; st <= 10; st++ {
		if peak == 0 || model[st] > model[peak] {
			peak = st
		}
	}
	if model[4] >= model[2] || model[peak] < 1.05*model[2] || peak == 10 {
		t.Fatalf("profile shape: %v (peak %d): want steps 4 below 2 and a peak in 5..9 above 2 by 5%%", model, peak)
	}
	r := specsweep(t, 5*time.Minute, "run", "--db", f.db, f.spec)
	if r.code != 0 {
		t.Fatalf("run failed:\n%s", r)
	}
	o := readSearch(t, f.spec, f.db)
	checkReplay(t, o)
	checkAnswer(t, o, p)
	reopened := false
	for _, e := range o.events {
		reopened = reopened || strings.Contains(e, "probe steps 10 beat the climb")
	}
	if !reopened {
		t.Errorf("no point was released by the reopened chain; released: %q", o.events)
	}
	if b := o.bestMeasured(1); b.Baseline || *b.NumSteps < 5 {
		t.Errorf("best %s, want past the dip (model peak at steps %d)", b.Label(), peak)
	}
}

// testSearchWithRepeatsAndNoise: a noisy server measured three times per level; gains count only
// when clear of the noise, and the replay from the recorded repeats agrees.
func testSearchWithRepeatsAndNoise(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end sweep")
	}
	prof := profileFile(t, "early-plateau", func(m map[string]any) {
		m["name"] = "noisy-plateau"
		m["noise"] = 0.08
	}, t.TempDir())
	f := writeSpec(t, localSearchSpec(testhost.SimBinary(t), prof, "{method: [baseline, eagle3], num_steps: [1, 2, 3, 4, 5, 6, 7, 8], topk: [1], tp: [4]}",
		"{concurrency: [1], requests: 12, warmup_requests: 2, input_tokens: 64, output_tokens: 64, repeats: 3}",
		"{strategy: climb, min_gain: 0.02, patience: 1}", 31783))
	r := specsweep(t, 5*time.Minute, "run", "--db", f.db, f.spec)
	if r.code != 0 {
		t.Fatalf("run failed:\n%s", r)
	}
	o := readSearch(t, f.spec, f.db)
	checkReplay(t, o)
	spread := 0.0
	for _, res := range o.results {
		for _, l := range res.Levels {
			if len(l.OutputTokS) != 3 {
				t.Errorf("a level has %d repeats, want 3", len(l.OutputTokS))
			}
			spread = max(spread, slices.Max(l.OutputTokS)/slices.Min(l.OutputTokS)-1)
		}
	}
	if spread < 0.01 {
		t.Errorf("repeats differ by at most %.2f%%: the noise is not there", 100*spread)
	}
	if n := len(o.ran()); n > 6 {
		t.Errorf("ran %d points: the climb did not stop at the noisy plateau", n)
	}
	t.Logf("ran %d of %d points; repeats spread up to %.1f%%", len(o.ran()), len(o.plan.Points), 100*spread)
}

// TestSearchResumeOnTwoHosts: two chains (tp 2 and tp 4) climb side by side on two real test hosts;
// kill -9 at several instants and a rerun finish the search with the decisions the recorded runs
// give, every run once.
func TestSearchResumeOnTwoHosts(t *testing.T) {
	defer parallel(t)() // shares nothing: its own test hosts (docs/development.md, "Parallel end-to-end tests")
	hosts := boot(t, 2, testhost.Options{})
	f := writeSpec(t, fmt.Sprintf(`version: 1
name: e2e-search-hosts
%s
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.6-27B, --host, 0.0.0.0, --port, "30000", --enable-metrics]
  env: {SGLANGSIM_PROFILE: qwen3.6-27b, %s}
  port: 30000
  ready_timeout: 1m
  stop_timeout: 20s
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
matrix: {method: [baseline, eagle3], num_steps: [1, 2, 3, 4, 5, 6, 7, 8], topk: [1], tp: [2, 4]}
workload: {concurrency: [1, 8], requests: 8, warmup_requests: 1, input_tokens: 32, output_tokens: 48}
search: {strategy: climb, probe: [8]}
`, hostsYAML(hosts, []int{4, 4}), testhost.SimPath, fastEnv))
	killRuns(t, f, 2*time.Second, 0, 4*time.Second)
	r := specsweep(t, 5*time.Minute, "run", "--db", f.db, f.spec)
	if r.code != 0 {
		t.Fatalf("final run failed:\n%s", r)
	}
	db := openDB(t, f.db)
	if s := scalar[string](t, db, "PRAGMA integrity_check"); s != "ok" {
		t.Errorf("integrity_check: %s", s)
	}
	if n := scalar[int](t, db, `SELECT count(*) FROM (SELECT point_id, concurrency, repeat FROM run_summary
		WHERE status = 'ok' GROUP BY 1, 2, 3 HAVING count(*) > 1)`); n != 0 {
		t.Errorf("%d runs recorded more than once", n)
	}
	o := readSearch(t, f.spec, f.db)
	checkReplay(t, o)
	if n := scalar[int](t, db, "SELECT count(*) FROM point_summary WHERE state = 'pruned'"); n == 0 {
		t.Error("nothing pruned")
	}
	if n := scalar[int](t, db, "SELECT count(DISTINCT host) FROM run_summary"); n != 2 {
		t.Errorf("runs on %d hosts, want 2", n)
	}
	// The two chains ran side by side: some points of the two hosts overlap in time.
	var ivs []interval
	rows, err := db.Query(`SELECT host, started_at, finished_at FROM point_summary WHERE state = 'done'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var iv interval
		if err := rows.Scan(&iv.host, &iv.start, &iv.end); err != nil {
			t.Fatal(err)
		}
		ivs = append(ivs, iv)
	}
	rows.Close()
	overlap := false
	for _, a := range ivs {
		for _, b := range ivs {
			overlap = overlap || (a.host != b.host && a.start < b.end && b.start < a.end)
		}
	}
	if !overlap {
		t.Errorf("no two points of different hosts ran at the same time: %+v", ivs)
	}
	checkRestored(t, hosts)
}
