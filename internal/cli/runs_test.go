package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// recordedDB stores the quickstart plan as a sweep and records one run per point and level, with
// output tok/s rising with the point's place in the plan (the baseline is first and slowest).
func recordedDB(t *testing.T) (path string, plan *sweep.Plan) {
	t.Helper()
	ctx := context.Background()
	spec, err := sweep.Load("../../examples/quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	plan = spec.Plan()
	path = filepath.Join(t.TempDir(), "s.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pts []store.NewPoint
	for _, p := range plan.Points {
		pts = append(pts, store.NewPoint{ID: p.ID, Method: p.Method, Baseline: p.Baseline, NumSteps: p.NumSteps,
			TopK: p.TopK, NumDraftTokens: p.NumDraftTokens, TP: p.TP, Argv: p.Argv, Env: p.Env,
			Runs: len(spec.Workload.Concurrency)})
	}
	id, err := db.CreateSweep(ctx, store.NewSweep{Name: spec.Name, SpecHash: plan.SpecHash, SpecText: string(spec.Source)},
		[]store.NewHost{{Name: "local", Driver: "local", GPUs: 4}}, pts)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	for i, p := range plan.Points {
		attempt, err := db.ClaimPoint(ctx, id, p.ID, "local")
		if err != nil {
			t.Fatal(err)
		}
		for j, c := range spec.Workload.Concurrency {
			m := &store.Metrics{Requests: 32, Completed: 32, OutputTokS: float64(100 * (i + 1) * c), RequestS: 1}
			if !p.Baseline {
				al := 2.5
				m.AcceptLength = &al
			}
			run := store.Run{SweepID: id, PointID: p.ID, Attempt: attempt, Concurrency: c, Repeat: 1, Status: store.RunOK,
				Metrics: m, StartedAt: t0, FinishedAt: t0.Add(time.Second)}
			var fin *store.PointFinish
			if j == len(spec.Workload.Concurrency)-1 {
				fin = &store.PointFinish{State: store.PointDone}
			}
			if err := db.RecordRunAndFinish(ctx, run, fin); err != nil {
				t.Fatal(err)
			}
		}
	}
	return path, plan
}

func TestRunsFormatsAndFilters(t *testing.T) {
	path, plan := recordedDB(t)
	env := map[string]string{"SPECSWEEP_DB": path}

	out, errs, code := runMain(t, env, "runs", "--where", "concurrency = 16", "--format", "json")
	if code != ExitOK {
		t.Fatalf("runs: code %d: %s", code, errs)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if len(rows) != len(plan.Points) {
		t.Fatalf("got %d rows at c=16, want %d", len(rows), len(plan.Points))
	}
	for i, r := range rows {
		if r["concurrency"] != 16.0 || r["point_id"] != plan.Points[i].ID {
			t.Errorf("row %d: %v", i, r)
		}
		// speedup is relative to the baseline (point 1) at the same concurrency: (i+1)x.
		if sp, _ := r["speedup"].(float64); sp < float64(i+1)-1e-9 || sp > float64(i+1)+1e-9 {
			t.Errorf("row %d speedup %v, want %d", i, r["speedup"], i+1)
		}
	}

	// --sweep by name, --sort, csv with a header and full precision, --db flag beats the env.
	out, errs, code = runMain(t, map[string]string{"SPECSWEEP_DB": "/nonexistent.db"}, "runs", "--db", path,
		"--sweep", "quickstart", "--sort", "output_tok_s DESC", "--limit", "2", "--format", "csv")
	if code != ExitOK {
		t.Fatalf("runs csv: code %d: %s", code, errs)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) != 3 {
		t.Fatalf("csv: %v, %d records:\n%s", err, len(recs), out)
	}
	if recs[0][0] != "sweep" || recs[1][15] != "9600" {
		t.Errorf("csv header/first row: %q / %q", recs[0], recs[1])
	}

	out, _, code = runMain(t, env, "runs", "--where", "method = 'baseline'")
	if code != ExitOK || !strings.HasPrefix(out, "sweep ") || strings.Count(out, "\n") != 4 {
		t.Errorf("table: code %d\n%s", code, out)
	}
}

func TestRunsRejectsBadQueriesAndWrites(t *testing.T) {
	path, _ := recordedDB(t)
	env := map[string]string{"SPECSWEEP_DB": path}
	for _, where := range []string{
		"no_such_column = 1",
		"concurrency = ",
		"1); DROP TABLE runs; --",
		"1 = 1; DELETE FROM runs",
	} {
		_, errs, code := runMain(t, env, "runs", "--where", where)
		if code != ExitFailure || !strings.Contains(errs, "bad query") {
			t.Errorf("where %q: code %d, stderr %q", where, code, errs)
		}
	}
	out, _, code := runMain(t, env, "runs", "--format", "csv")
	if code != ExitOK || strings.Count(out, "\n") != 1+6*3 {
		t.Errorf("runs after bad queries: code %d, %d lines", code, strings.Count(out, "\n"))
	}
	if _, errs, code := runMain(t, env, "runs", "--format", "xml"); code != ExitUsage || !strings.Contains(errs, "xml") {
		t.Errorf("bad format: code %d, %q", code, errs)
	}
	if _, errs, code := runMain(t, env, "runs", "--sweep", "nosuch"); code != ExitFailure || !strings.Contains(errs, `no sweep has the id or name "nosuch"`) {
		t.Errorf("unknown sweep: code %d, %q", code, errs)
	}
	missing := filepath.Join(t.TempDir(), "none.db")
	if _, errs, code := runMain(t, nil, "runs", "--db", missing); code != ExitFailure || !strings.Contains(errs, "does not exist") {
		t.Errorf("missing db: code %d, %q", code, errs)
	}
}

func TestSweepsList(t *testing.T) {
	path, plan := recordedDB(t)
	out, errs, code := runMain(t, nil, "sweeps", "--db", path, "--format", "json")
	if code != ExitOK {
		t.Fatalf("sweeps: %d %s", code, errs)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("sweeps json: %v %s", err, out)
	}
	if rows[0]["name"] != "quickstart" || rows[0]["done"] != float64(len(plan.Points)) || rows[0]["pending"] != 0.0 {
		t.Errorf("sweeps row: %v", rows[0])
	}
}

// TestRunsTableIsReadable: `runs` as a table shows a readable set of columns with local times
// (the zone named); --wide shows every column, --columns chooses; csv and json keep every column
// and unix ms; a --where naming no column lists the columns there are.
func TestRunsTableIsReadable(t *testing.T) {
	path, plan := recordedDB(t)
	env := map[string]string{"SPECSWEEP_DB": path}
	started := time.Unix(1_700_000_000, 0).Local().Format("2006-01-02 15:04:05 MST")

	out, errs, code := runMain(t, env, "runs", "--where", "concurrency = 1")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if code != ExitOK || len(lines) != 1+len(plan.Points) {
		t.Fatalf("runs: exit %d, %d lines\n%s%s", code, len(lines), out, errs)
	}
	head := strings.Fields(lines[0])
	want := []string{"sweep", "method", "num_steps", "topk", "num_draft_tokens", "tp", "concurrency", "repeat", "status",
		"output_tok_s", "speedup", "accept_length", "ttft_p99_ms", "tpot_p50_ms", "started_at"}
	if strings.Join(head, " ") != strings.Join(want, " ") {
		t.Errorf("table columns %q, want %q", head, want)
	}
	if !strings.HasSuffix(lines[1], started) {
		t.Errorf("started_at is not the local time %q:\n%s", started, out)
	}

	out, _, _ = runMain(t, env, "runs", "--where", "concurrency = 1", "--wide")
	head = strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if summaryCols, _ := store.RunColumns(); len(head) != len(summaryCols) || head[1] != "sweep_id" || !strings.Contains(out, started) || strings.Contains(out, "1700000000000") {
		t.Errorf("--wide: %d columns, local times:\n%s", len(head), out)
	}
	out, _, _ = runMain(t, env, "runs", "--where", "concurrency = 1", "--columns", "point_id,started_at")
	if !strings.HasPrefix(out, "point_id") || !strings.Contains(out, plan.Points[0].ID+"  "+started) {
		t.Errorf("--columns:\n%s", out)
	}
	for _, format := range []string{"csv", "json"} {
		out, _, _ = runMain(t, env, "runs", "--where", "concurrency = 1", "--format", format)
		if !strings.Contains(out, "1700000000000") || !strings.Contains(out, "accept_length_source") || !strings.Contains(out, "sweep_id") {
			t.Errorf("--format %s: not every column and unix ms:\n%s", format, out)
		}
	}
	if _, errs, code := runMain(t, env, "runs", "--wide", "--format", "csv"); code != ExitUsage || !strings.Contains(errs, "--wide") {
		t.Errorf("--wide --format csv: exit %d\n%s", code, errs)
	}
	_, errs, code = runMain(t, env, "runs", "--where", "no_such_column = 1")
	for _, w := range []string{`bad query: --where "no_such_column = 1": no such column: no_such_column`,
		"the columns are run_summary's: sweep, sweep_id, point_id,", "and run_detail's: run_id, plan_order,"} {
		if code != ExitFailure || !strings.Contains(errs, w) {
			t.Errorf("a --where naming no column: exit %d, lacks %q:\n%s", code, w, errs)
		}
	}
}
