package web

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/sweep"
)

// point is a report point at tp 4 with its median output tok/s at each level (n repeats each).
func livePoint(method string, steps int, state string, n int, tok map[int]float64) *report.Point {
	p := &report.Point{ID: method, Config: report.Config{Method: method, NumSteps: steps, TopK: 1, NumDraftTokens: steps + 1, TP: 4, Baseline: method == "baseline"},
		State: state, Cells: map[int]*report.Cell{}}
	if p.Baseline {
		p.NumSteps, p.TopK, p.NumDraftTokens = 0, 0, 0
	}
	for c, v := range tok {
		p.Cells[c] = &report.Cell{Point: p, Concurrency: c, TokS: sweep.Stat{N: n, Median: v, Min: v, Max: v}}
	}
	return p
}

// A level's best is final once every point planned at its tp is measured there with all its repeats
// or has ended; the chart has one curve per level, the best tok/s per num_steps and the baseline.
func TestLiveResultsLevelsAndChart(t *testing.T) {
	s := &report.Sweep{Name: "n", State: "running", TPs: []int{4}, Levels: []int{1, 8}, Repeats: 2, Points: []*report.Point{
		livePoint("baseline", 0, "done", 2, map[int]float64{1: 100, 8: 500}),
		livePoint("eagle3", 1, "done", 2, map[int]float64{1: 150, 8: 600}),
		livePoint("eagle3", 2, "failed", 0, nil),
		livePoint("eagle3b", 2, "done", 2, map[int]float64{1: 170}), // ended without a figure at 8
		livePoint("eagle3", 3, "running", 1, map[int]float64{1: 180}),
		livePoint("eagle3", 4, "pending", 0, nil),
		livePoint("eagle3", 5, "pruned", 0, nil),
	}}
	s.Points[3].TopK = 2 // another tree shape at 2 steps: the curve takes the faster
	got := liveResults(s, 2)
	want := []LevelJSON{
		{TP: 4, Concurrency: 1, Planned: 6, Measured: 4, Final: false},
		{TP: 4, Concurrency: 8, Planned: 6, Measured: 2, Final: false},
	}
	if !reflect.DeepEqual(got.Levels, want) {
		t.Errorf("levels %+v, want %+v", got.Levels, want)
	}
	if len(got.Chart) != 2 || got.Chart[0].Concurrency != 1 || got.Chart[1].Concurrency != 8 {
		t.Fatalf("chart %+v, want a curve at c=1 and c=8", got.Chart)
	}
	c1 := got.Chart[0]
	if c1.Baseline == nil || *c1.Baseline != 100 {
		t.Errorf("c=1 baseline %v, want 100", c1.Baseline)
	}
	steps := []CurvePointJSON{{1, 150, "eagle3 s=1 k=1 n=2"}, {2, 170, "eagle3b s=2 k=2 n=3"}, {3, 180, "eagle3 s=3 k=1 n=4"}}
	if !reflect.DeepEqual(c1.Points, steps) {
		t.Errorf("c=1 curve %+v, want %+v", c1.Points, steps)
	}

	// The running point's second repeat at 1 and the pending point ending (cancelled) settle c=1; the
	// running point has nothing at 8 yet, so 8 stays provisional.
	s.Points[4].Cells[1].TokS.N = 2
	s.Points[5].State = "cancelled"
	got = liveResults(s, 2)
	if l := got.Levels[0]; !l.Final || l.Measured != 4 || l.Planned != 6 {
		t.Errorf("c=1 after every point measured or ended: %+v, want final, 4 of 6", l)
	}
	if got.Levels[1].Final {
		t.Errorf("c=8 with a running point unmeasured there: %+v, want provisional", got.Levels[1])
	}
	// A point measured with fewer repeats than planned keeps its level provisional while it runs.
	if l := liveResults(s, 3).Levels[0]; l.Final {
		t.Errorf("c=1 with 2 of 3 repeats of a running point: %+v, want provisional", l)
	}
}

func TestPlannedRepeatsReadsTheSpec(t *testing.T) {
	spec := `version: 1
name: r
hosts: [{name: h, address: h.example, gpus: 1}]
server: {command: [/opt/sglang/bin/python, -m, sglang.launch_server]}
methods: {baseline: []}
matrix: {method: [baseline]}
workload: {concurrency: [1], requests: 2, input_tokens: 8, output_tokens: 8, repeats: 3}
`
	if n, ok := plannedRepeats(spec, 1); n != 3 || !ok {
		t.Errorf("repeats of a spec with repeats: 3: %d %v", n, ok)
	}
	if n, ok := plannedRepeats("not: a spec", 2); n != 2 || ok {
		t.Errorf("repeats of a spec that does not parse, 2 recorded: %d %v, want 2 (recorded)", n, ok)
	}
}

// GET /api/sweeps/{id}/results carries the levels and the chart beside the report's tables.
func TestResultsCarryTheLevelsAndTheChart(t *testing.T) {
	w := newWorld(t)
	w.record("base", 1, 100)
	code, body, _ := w.get("/api/sweeps/1/results")
	var r ResultsJSON
	if code != 200 || json.Unmarshal([]byte(body), &r) != nil {
		t.Fatalf("results: %d %s", code, body)
	}
	if len(r.Best.Rows) != 1 || len(r.Levels) != 1 || r.Levels[0] != (LevelJSON{TP: 4, Concurrency: 1, Planned: 2, Measured: 1}) {
		t.Errorf("with one of two points measured: best %v, levels %+v", r.Best.Rows, r.Levels)
	}
	w.record("e3", 1, 150)
	_, body, _ = w.get("/api/sweeps/1/results")
	r = ResultsJSON{}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Levels) != 1 || r.Levels[0] != (LevelJSON{TP: 4, Concurrency: 1, Planned: 2, Measured: 2, Final: true}) {
		t.Errorf("with both measured: levels %+v", r.Levels)
	}
	if len(r.Chart) != 1 || r.Chart[0].Baseline == nil || *r.Chart[0].Baseline != 100 ||
		len(r.Chart[0].Points) != 1 || r.Chart[0].Points[0].NumSteps != 1 || r.Chart[0].Points[0].TokS != 150 {
		t.Errorf("chart %s", body)
	}
}
