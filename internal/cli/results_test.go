package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
)

// repeatsDB records a baseline and one eagle3 point at concurrency 4 with three repeats whose
// mean (1264.2 tok/s) and median (1246.8) differ, and a failed point.
func repeatsDB(t *testing.T) (path string, sweepID int64) {
	t.Helper()
	ctx := context.Background()
	path = filepath.Join(t.TempDir(), "r.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ip := func(i int) *int { return &i }
	id, err := db.CreateSweep(ctx, store.NewSweep{Name: "rep3", SpecHash: "h", SpecText: "version: 1\n"},
		[]store.NewHost{{Name: "local", Driver: "local", GPUs: 4}},
		[]store.NewPoint{{ID: "b", Method: "baseline", Baseline: true, TP: 4, Runs: 3},
			{ID: "e", Method: "eagle3", NumSteps: ip(3), TopK: ip(1), NumDraftTokens: ip(4), TP: 4, Runs: 3},
			{ID: "x", Method: "eagle3", NumSteps: ip(5), TopK: ip(1), NumDraftTokens: ip(6), TP: 4, Runs: 3}})
	if err != nil {
		t.Fatal(err)
	}
	figures := map[string][]float64{"b": {1000, 1000, 1000}, "e": {1200, 1246.8, 1345.8}}
	accepts := []float64{2.0, 2.5, 3.5} // mean 2.67, median 2.50
	for _, pid := range []string{"b", "e"} {
		attempt, err := db.ClaimPoint(ctx, id, pid, "local")
		if err != nil {
			t.Fatal(err)
		}
		for rep, tok := range figures[pid] {
			m := &store.Metrics{Requests: 32, Completed: 32, OutputTokS: tok, RequestS: 1}
			if pid != "b" {
				m.AcceptLength = &accepts[rep]
			}
			var fin *store.PointFinish
			if rep == 2 {
				fin = &store.PointFinish{State: store.PointDone}
			}
			run := store.Run{SweepID: id, PointID: pid, Attempt: attempt, Concurrency: 4, Repeat: rep + 1,
				Status: store.RunOK, Metrics: m}
			if err := db.RecordRunAndFinish(ctx, run, fin); err != nil {
				t.Fatal(err)
			}
		}
	}
	attempt, err := db.ClaimPoint(ctx, id, "x", "local")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.FinishPoint(ctx, id, "x", attempt, store.PointFinish{State: store.PointFailed,
		FailureClass: store.FailOOM, FailureDetail: "out of memory\nCUDA out of memory. Tried to allocate 2.00 GiB"}); err != nil {
		t.Fatal(err)
	}
	return path, id
}

// TestResultsRunsBestAndReportAgree: with three repeats, the table `specsweep run` prints, `runs
// --best` and the report show the same figure for the same cell: the median over the repeats.
func TestResultsRunsBestAndReportAgree(t *testing.T) {
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
	printed := buf.String()
	var eagle string
	for _, l := range strings.Split(printed, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "eagle3") && strings.Contains(l, "1246.8") {
			eagle = l
		}
	}
	if eagle == "" || !strings.Contains(eagle, "1.25x") || !strings.Contains(eagle, "2.50") {
		t.Errorf("results table: want the eagle3 row with the median 1246.8 tok/s, 1.25x, accept 2.50:\n%s", printed)
	}
	for _, want := range []string{"Failed points (1):", "oom", "out of memory"} {
		if !strings.Contains(printed, want) {
			t.Errorf("results table lacks %q:\n%s", want, printed)
		}
	}

	out, errs, code := runMain(t, map[string]string{"SPECSWEEP_DB": path}, "runs", "--best", "--format", "json")
	if code != ExitOK {
		t.Fatalf("runs --best: %d %s", code, errs)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0]["point_id"] != "e" || rows[0]["output_tok_s"] != 1246.8 || rows[0]["repeats"] != 3.0 {
		t.Errorf("runs --best: %v", rows)
	}

	s, err := report.Load(ctx, st, "rep3")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := report.Write(s, report.Options{Format: "md", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| 1246.8 (1.25×) |") {
		t.Errorf("report: the all-results row lacks 1246.8 (1.25×):\n%s", md)
	}
}
