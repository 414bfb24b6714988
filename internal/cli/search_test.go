package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/store"
)

const (
	whyS3 = "eagle3 tp=4 k=1: steps 3 not run: predicted at most +1.6% at c=1, at most -2.3% at c=16, below min_gain 2%"
	whyS4 = "eagle3 tp=4 k=1: steps 4 not run: the climb stopped after steps 2 (-3.1% at c=1 against the best so far, below min_gain 2%)"
)

// searchedDB records through the store's API a sweep decided by a search: the baseline and eagle3
// steps 1 and 2 ran, steps 3 and 4 are pruned with the search's reasons, steps 5 still waits.
func searchedDB(t *testing.T) (path string, sweepID int64) {
	t.Helper()
	ctx := context.Background()
	path = filepath.Join(t.TempDir(), "s.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ip := func(i int) *int { return &i }
	pts := []store.NewPoint{{ID: "b", Method: "baseline", Baseline: true, TP: 4, Runs: 1, Searched: true}}
	for s := 1; s <= 5; s++ {
		pts = append(pts, store.NewPoint{ID: "e" + string(rune('0'+s)), Method: "eagle3", NumSteps: ip(s), TopK: ip(1),
			NumDraftTokens: ip(s + 1), TP: 4, Runs: 1, Searched: true, Argv: []string{"py", "--speculative-algorithm", "EAGLE3"}})
	}
	id, err := db.CreateSweep(ctx, store.NewSweep{Name: "climb", SpecHash: "h", SpecText: "version: 1\n"},
		[]store.NewHost{{Name: "local", Driver: "local", GPUs: 4}}, pts)
	if err != nil {
		t.Fatal(err)
	}
	for pid, tok := range map[string]float64{"b": 1000, "e1": 1400, "e2": 1500} {
		if err := db.ApplySearch(ctx, id, []store.SearchDecision{{PointID: pid, Reason: "run " + pid}}, nil); err != nil {
			t.Fatal(err)
		}
		att, err := db.ClaimPoint(ctx, id, pid, "local")
		if err != nil {
			t.Fatal(err)
		}
		if err := db.RecordRunAndFinish(ctx, store.Run{SweepID: id, PointID: pid, Attempt: att, Concurrency: 4, Repeat: 1,
			Status: store.RunOK, Metrics: &store.Metrics{Requests: 8, Completed: 8, OutputTokS: tok}}, &store.PointFinish{State: store.PointDone}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.ApplySearch(ctx, id, nil, []store.SearchDecision{{PointID: "e3", Reason: whyS3}, {PointID: "e4", Reason: whyS4}}); err != nil {
		t.Fatal(err)
	}
	return path, id
}

// TestSearchedSweepShowsPrunedPoints: the results table, status and the sweep lists show the
// search's waiting and pruned points, the pruned ones with their reasons after the table.
func TestSearchedSweepShowsPrunedPoints(t *testing.T) {
	path, id := searchedDB(t)
	ctx := context.Background()
	st, err := store.OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var buf bytes.Buffer
	if err := printResults(ctx, &buf, st, id, path); err != nil {
		t.Fatal(err)
	}
	res := buf.String()
	block := strings.Index(res, "\nPruned by the search (2):\n")
	if block < 0 {
		t.Fatalf("results: no pruned block:\n%s", res)
	}
	lines := strings.Split(res[block:], "\n")
	if len(lines) < 5 || !strings.HasPrefix(lines[2], "  eagle3 s=3 k=1 n=4 tp=4  ") || !strings.HasSuffix(lines[2], whyS3) ||
		!strings.HasPrefix(lines[3], "  eagle3 s=4 k=1 n=5 tp=4  ") || !strings.HasSuffix(lines[3], whyS4) {
		t.Errorf("results: want one line per pruned point, label then reason:\n%s", res)
	}
	if table := res[:block]; strings.Contains(table, "not run") || !strings.Contains(table, "1500.0") {
		t.Errorf("results: the table should hold the points that ran, and only them:\n%s", res)
	}

	env := map[string]string{"SPECSWEEP_DB": path}
	out, errs, code := runMain(t, env, "status", "climb")
	if code != ExitOK {
		t.Fatalf("status climb: %d %s", code, errs)
	}
	for _, want := range []string{"6 points: 3 done, 0 failed, 0 pending, 0 running, 0 cancelled, 1 waiting, 2 pruned; ETA",
		"Pruned by the search (2):", "  eagle3 s=3 k=1 n=4 tp=4  " + whyS3, "  eagle3 s=4 k=1 n=5 tp=4  " + whyS4} {
		if !strings.Contains(out, want) {
			t.Errorf("status climb lacks %q:\n%s", want, out)
		}
	}
	out, errs, code = runMain(t, env, "status")
	if code != ExitOK {
		t.Fatalf("status: %d %s", code, errs)
	}
	if f := strings.Fields(strings.Split(out, "\n")[0]); strings.Join(f, " ") != "ID NAME STATE POINTS DONE FAILED PENDING RUNNING WAITING PRUNED ETA CREATED" {
		t.Errorf("status: header %q", f)
	}
	if f := strings.Fields(strings.Split(out, "\n")[1]); len(f) < 10 || strings.Join(f[3:10], " ") != "6 3 0 0 0 1 2" {
		t.Errorf("status: row %q, want points 6, done 3, waiting 1, pruned 2", f)
	}

	out, errs, code = runMain(t, env, "sweeps", "--format", "json")
	if code != ExitOK {
		t.Fatalf("sweeps: %d %s", code, errs)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("sweeps json: %v %s", err, out)
	}
	if rows[0]["waiting"] != 1.0 || rows[0]["pruned"] != 2.0 || rows[0]["points"] != 6.0 {
		t.Errorf("sweeps row: %v", rows[0])
	}
}

// TestGridSweepShowsNoSearchCounts: a grid sweep's results, status and lists look as before
// searches: no pruned block, no waiting or pruned counts or columns.
func TestGridSweepShowsNoSearchCounts(t *testing.T) {
	path, id := repeatsDB(t)
	ctx := context.Background()
	st, err := store.OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var buf bytes.Buffer
	if err := printResults(ctx, &buf, st, id, path); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SPECSWEEP_DB": path}
	status, _, _ := runMain(t, env, "status", "rep3")
	list, _, _ := runMain(t, env, "status")
	sweeps, _, _ := runMain(t, env, "sweeps")
	sweepsJSON, _, _ := runMain(t, env, "sweeps", "--format", "json")
	for name, out := range map[string]string{"results": buf.String(), "status rep3": status, "status": list, "sweeps": sweeps, "sweeps json": sweepsJSON} {
		for _, no := range []string{"pruned", "Pruned", "waiting", "WAITING", "PRUNED", "search"} {
			if strings.Contains(out, no) {
				t.Errorf("%s of a grid sweep says %q:\n%s", name, no, out)
			}
		}
	}
	if !strings.Contains(status, "3 points: 2 done, 1 failed, 0 pending, 0 running, 0 cancelled; ETA") {
		t.Errorf("status rep3:\n%s", status)
	}
}

// TestPlanSaysTheSearchDecides: `plan` of a searched spec says the search decides which of the
// planned points run, and that the runs and duration are the most it may take; a grid plan does not.
func TestPlanSaysTheSearchDecides(t *testing.T) {
	grid := `version: 1
name: s
hosts: [{name: a, driver: local, gpus: 4}]
server: {command: [/bin/true]}
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
matrix: {method: [baseline, eagle3], num_steps: [1, 2, 3, 4], topk: [1], tp: [4]}
workload: {concurrency: [1, 16], requests: 8, input_tokens: 16, output_tokens: 16}
`
	dir := t.TempDir()
	for _, c := range []struct {
		search string
		want   []string
	}{
		{"", []string{"5 points x 2 concurrency levels x 1 repeats = 10 runs; rough duration"}},
		{"search: {strategy: climb, probe: [4], budget: 4}\n", []string{
			"search climb (min_gain 2%, patience 1, probe num_steps 4; budget 4 points): it decides while the sweep runs which of the 5 planned points run; the others end pruned, each with its reason.",
			"5 points x 2 concurrency levels x 1 repeats = at most 10 runs; rough duration at most"}},
		{"search: {strategy: grid, budget: 3}\n", []string{
			"search grid (budget 3 points): the planned points run in plan order until 3 have run; the rest of the 5 end pruned",
			"= at most 10 runs"}},
	} {
		spec := filepath.Join(dir, "s.yaml")
		if err := os.WriteFile(spec, []byte(grid+c.search), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errs, code := runMain(t, nil, "plan", spec)
		if code != ExitOK {
			t.Fatalf("plan %q: %d %s", c.search, code, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("plan with %q lacks %q:\n%s", c.search, w, out)
			}
		}
		if c.search == "" && (strings.Contains(out, "search") || strings.Contains(out, "at most")) {
			t.Errorf("a grid plan speaks of a search:\n%s", out)
		}
	}
}
