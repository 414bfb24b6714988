package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/store"
)

// The answers of checkedDB's mismatching point m: they differ from the reference's from word 11
// (0-based) on.
const (
	refAnswer = "A hash table stores keys in buckets.\nThe key is hashed to an index & the bucket at that index is searched."
	gotAnswer = "A hash table stores keys in buckets.\nThe key is hashed into a list of stars."
)

// checkedDB records through the store's API a sweep with output checks at tp 4: the baseline b is
// the reference, e agrees with it, m (the fastest) mismatches, f mismatched and failed before its
// load (fail_on_mismatch). With lossless, m and f agree and both ran.
func checkedDB(t *testing.T, lossless bool) (path string, sweepID int64) {
	t.Helper()
	ctx := context.Background()
	path = filepath.Join(t.TempDir(), "c.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ip := func(i int) *int { return &i }
	argv := []string{"py", "--speculative-algorithm", "EAGLE3"}
	pts := []store.NewPoint{{ID: "b", Method: "baseline", Baseline: true, TP: 4, Runs: 1},
		{ID: "e", Method: "eagle3", NumSteps: ip(3), TopK: ip(1), NumDraftTokens: ip(4), TP: 4, Runs: 1, Argv: argv},
		{ID: "m", Method: "eagle3", NumSteps: ip(5), TopK: ip(1), NumDraftTokens: ip(6), TP: 4, Runs: 1, Argv: argv},
		{ID: "f", Method: "eagle3", NumSteps: ip(7), TopK: ip(1), NumDraftTokens: ip(8), TP: 4, Runs: 1, Argv: argv}}
	id, err := db.CreateSweep(ctx, store.NewSweep{Name: "checked", SpecHash: "h", SpecText: "version: 1\n"},
		[]store.NewHost{{Name: "local", Driver: "local", GPUs: 4}}, pts)
	if err != nil {
		t.Fatal(err)
	}
	for pid, tok := range map[string]float64{"b": 1000, "e": 1200, "m": 1500, "f": 1100} {
		att, err := db.ClaimPoint(ctx, id, pid, "local")
		if err != nil {
			t.Fatal(err)
		}
		if err := db.SetPointOutputs(ctx, id, pid, att, json.RawMessage(`{"prompts":["p"],"runs":[["a"]]}`)); err != nil {
			t.Fatal(err)
		}
		if pid == "f" && !lossless {
			fin := store.PointFinish{State: store.PointFailed, FailureClass: store.FailOutputMismatch,
				FailureDetail: "output check: mismatch: prompt 3 differs from word 4 (agreement 0.20)"}
			if err := db.FinishPoint(ctx, id, pid, att, fin); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := db.RecordRunAndFinish(ctx, store.Run{SweepID: id, PointID: pid, Attempt: att, Concurrency: 4, Repeat: 1,
			Status: store.RunOK, Metrics: &store.Metrics{Requests: 8, Completed: 8, OutputTokS: tok}}, &store.PointFinish{State: store.PointDone}); err != nil {
			t.Fatal(err)
		}
	}
	fp := func(f float64) *float64 { return &f }
	ev := func(v map[string]any) json.RawMessage {
		v["reference_agreement"], v["threshold"], v["prompt_text"] = 1.0, 0.9, "Explain how a hash table finds a key."
		b, _ := json.Marshal(v)
		return b
	}
	same := ev(map[string]any{"agreement": 1, "diverged": false, "prompt": 0, "word": 0})
	checks := map[string]store.OutputCheck{
		"b": {Result: store.OutputCheckReference, Agreement: fp(1), Evidence: same},
		"e": {Result: store.OutputCheckOK, Agreement: fp(1), Evidence: same},
		"m": {Result: store.OutputCheckMismatch, Agreement: fp(0.31), Evidence: ev(map[string]any{"agreement": 0.31, "diverged": true,
			"prompt": 2, "word": 11, "reference": refAnswer, "got": gotAnswer})},
		"f": {Result: store.OutputCheckMismatch, Agreement: fp(0.2), Evidence: ev(map[string]any{"agreement": 0.2, "diverged": true,
			"prompt": 2, "word": 3, "reference": refAnswer, "got": "A hash table"})},
	}
	if lossless {
		checks["m"], checks["f"] = checks["e"], checks["e"]
	}
	for pid, c := range checks {
		if err := db.SetOutputCheck(ctx, id, pid, c); err != nil {
			t.Fatal(err)
		}
	}
	return path, id
}

const mismatchHead = "Output check: 2 point(s) do NOT answer as the baseline does (lossless check failed):\n"

// TestMismatchShownFirst: the results table and `status SWEEP` start with the output check's block
// (each mismatching point with its agreement, the reference's, the threshold and where its answers
// differ), and mark the rows in a CHECK column.
func TestMismatchShownFirst(t *testing.T) {
	path, id := checkedDB(t, false)
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
	mLine := `  eagle3 s=5 k=1 n=6 tp=4  agreement 0.31 (the reference agrees with itself 1.00, threshold 0.90)  prompt 3 differs from word 12: reference "...to an index & the bucket...", got "...into a list of stars."`
	fLine := `  eagle3 s=7 k=1 n=8 tp=4  agreement 0.20 (the reference agrees with itself 1.00, threshold 0.90)  prompt 3 differs from word 4: reference "...stores keys in buckets. The key...", got (ends); failed before its load (fail_on_mismatch)`
	if !strings.HasPrefix(res, mismatchHead+mLine+"\n"+fLine+"\n\nResults (") {
		t.Errorf("results: want the output check's block first:\n%s", res)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(res, "\n") {
		if f := strings.Fields(l); len(f) > 6 && (f[0] == "eagle3" || f[0] == "baseline" || f[0] == "METHOD") {
			if _, dup := rows[f[0]+f[1]]; !dup { // the results table's, not the failed points'
				rows[f[0]+f[1]] = strings.Join(f, " ")
			}
		}
	}
	for k, want := range map[string]string{"METHODSTEPS": "METHOD STEPS TOPK DRAFT TP CHECK c=4 tok/s speedup ACCEPT",
		"baseline-": "baseline - - - 4 ref 1000.0 1.00x -", "eagle33": "eagle3 3 1 4 4 ok 1200.0 1.20x -",
		"eagle35": "eagle3 5 1 6 4 MISMATCH 1500.0 1.50x -"} {
		if rows[k] != want {
			t.Errorf("results row %s: %q, want %q\n%s", k, rows[k], want, res)
		}
	}
	if !strings.Contains(res, "Failed points (1):") || !strings.Contains(res, "output_mismatch") {
		t.Errorf("results: f is not among the failed points:\n%s", res)
	}

	out, errs, code := runMain(t, map[string]string{"SPECSWEEP_DB": path}, "status", "checked")
	if code != ExitOK {
		t.Fatalf("status: %d %s", code, errs)
	}
	block := strings.Index(out, mismatchHead+mLine+"\n"+fLine+"\n\n")
	table := strings.Index(out, "#  ID")
	if block < 0 || table < block || !strings.HasPrefix(out, "sweep checked (id ") {
		t.Errorf("status: want the block after the counts, before the points:\n%s", out)
	}
	seen := 0
	pointTable, _, _ := strings.Cut(out[max(table, 0):], "\n\n") // the point table, not the blocks after it
	for _, l := range strings.Split(pointTable, "\n") {
		f := strings.Fields(l)
		if len(f) < 11 {
			continue
		}
		seen++
		want := map[string]string{"b": "ref", "e": "ok", "m": "MISMATCH", "f": "MISMATCH"}[f[1]]
		if f[0] == "#" {
			want = "ATTEMPTS CHECK FAILURE"
			if got := strings.Join(f[9:12], " "); got != want {
				t.Errorf("status header: %q, want %q", got, want)
			}
			continue
		}
		if f[10] != want {
			t.Errorf("status row %s: CHECK %q, want %q:\n%s", f[1], f[10], want, out)
		}
	}
	if seen != 5 {
		t.Errorf("status: %d lines in the point table, want 5:\n%s", seen, out)
	}
}

// TestRunsBestSkipsMismatch: `runs --best` names the fastest point that answers as the baseline
// does, and says which mismatching point it skipped: under the table, on stderr beside JSON and
// CSV (which stay machine-readable).
func TestRunsBestSkipsMismatch(t *testing.T) {
	path, _ := checkedDB(t, false)
	env := map[string]string{"SPECSWEEP_DB": path}
	note := "note: skipped 1 mismatching point(s) (their outputs differ from the baseline's: the lossless output check failed; `specsweep status SWEEP` shows where): eagle3 s=5 k=1 n=6 tp=4 (sweep checked)\n"
	out, errs, code := runMain(t, env, "runs", "--best", "--columns", "point_id,output_tok_s,runner_up,candidates")
	if code != ExitOK {
		t.Fatalf("runs --best: %d %s", code, errs)
	}
	lines := strings.Split(out, "\n")
	if len(lines) != 4 || strings.Join(strings.Fields(lines[1]), " ") != "e 1200 baseline 2" || lines[2]+"\n" != note {
		t.Errorf("runs --best: want e best, of 2 candidates, then the note:\n%s", out)
	}
	out, errs, code = runMain(t, env, "runs", "--best", "--format", "json")
	if code != ExitOK {
		t.Fatalf("runs --best json: %d %s", code, errs)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0]["point_id"] != "e" || rows[0]["runner_up"] != "baseline" {
		t.Errorf("runs --best json: %v %s", err, out)
	}
	if errs != note {
		t.Errorf("runs --best json: stderr %q, want the note", errs)
	}
	out, errs, code = runMain(t, env, "runs", "--best", "--format", "csv")
	if code != ExitOK {
		t.Fatalf("runs --best csv: %d %s", code, errs)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) != 2 || recs[1][4] != "e" || errs != note {
		t.Errorf("runs --best csv: %v %q, stderr %q", err, recs, errs)
	}
	// Narrowed by --where to the mismatching point alone: no best, and the note.
	out, errs, code = runMain(t, env, "runs", "--best", "--where", "point_id = 'm'")
	if code != ExitOK || strings.Contains(out, "1500") || !strings.HasSuffix(out, note) {
		t.Errorf("runs --best --where m: %d %s %s", code, out, errs)
	}
}

// TestLosslessSweepHasNoMismatchBlock: when every checked point agrees, the table gains the CHECK
// column but no block, and `runs --best` no note; a sweep without checks prints as before.
func TestLosslessSweepHasNoMismatchBlock(t *testing.T) {
	path, id := checkedDB(t, true)
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
	// MISMATCH only in the column's legend.
	if !strings.HasPrefix(res, "Results (") || strings.Count(res, "MISMATCH") != 1 || strings.Count(res, " ok ") != 3 {
		t.Errorf("results of a lossless sweep:\n%s", res)
	}
	env := map[string]string{"SPECSWEEP_DB": path}
	out, errs, code := runMain(t, env, "runs", "--best", "--format", "json")
	if code != ExitOK || errs != "" || !strings.Contains(out, `"point_id": "m"`) {
		t.Errorf("runs --best of a lossless sweep: %d %s %q", code, out, errs)
	}
	status, _, _ := runMain(t, env, "status", "checked")
	if strings.Contains(status, "Output check") || !strings.Contains(status, "CHECK") {
		t.Errorf("status of a lossless sweep:\n%s", status)
	}

	// No check at all (an older sweep, or output_check: false): no column, no block, no note.
	path, id = repeatsDB(t)
	st2, err := store.OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	buf.Reset()
	if err := printResults(ctx, &buf, st2, id, path); err != nil {
		t.Fatal(err)
	}
	env = map[string]string{"SPECSWEEP_DB": path}
	status, _, _ = runMain(t, env, "status", "rep3")
	best, bestErr, _ := runMain(t, env, "runs", "--best")
	for name, out := range map[string]string{"results": buf.String(), "status": status, "runs --best": best + bestErr} {
		for _, no := range []string{"CHECK", "Output check", "MISMATCH", "note:", "output check"} {
			if strings.Contains(out, no) {
				t.Errorf("%s of an unchecked sweep says %q:\n%s", name, no, out)
			}
		}
	}
}
