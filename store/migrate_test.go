package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/specsweep/specsweep/migrations"
)

// seeds insert representative data into a database at exactly the schema
// version of their key, with plain SQL (the Go API always speaks the latest
// schema). When a migration changes existing tables, add a seed for its
// version; a database at version v gets the seed with the greatest key <= v.
// Every seed must produce the data that checkSeeded expects after upgrading.
var seeds = map[int64]func(ctx context.Context, tx *sql.Tx) error{
	1: seed1,
	// Version 5 rebuilds points: the columns of versions 3 and 4 must survive it too.
	4: seed4,
	// Version 6 adds the output check's columns to points: the search's of version 5 must survive.
	5: seed5,
	// Version 8 adds events.data and fills it for the ran_beside events before it from their prose.
	7: seed7,
	8: seed8,
	// Version 10 gives each run its cell, from its sweep's spec for the older runs; the store
	// records it for the newer ones, as here.
	10: func(ctx context.Context, tx *sql.Tx) error {
		if err := seed8(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE runs SET input_tokens = 512`)
		return err
	},
}

func seed8(ctx context.Context, tx *sql.Tx) error {
	if err := seed7(ctx, tx); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `UPDATE events SET data = '{"beside":2}' WHERE kind = 'ran_beside'`)
	return err
}

// seededSpec is the spec of the seeded sweep: random prompts of 512 tokens.
const seededSpec = `version: 1
name: seeded
workload:
  concurrency: [16]
  requests: 8
  input_tokens: 512  # the cell of every run
  output_tokens: 64
`

func seed5(ctx context.Context, tx *sql.Tx) error {
	if err := seed4(ctx, tx); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `UPDATE points SET searched = 1, reason = 'kept: +80% at c=16' WHERE id = 1`)
	return err
}

// seed7 is version 5's seed and a ran_beside event as the orchestrator wrote it before events had data.
func seed7(ctx context.Context, tx *sql.Tx) error {
	if err := seed5(ctx, tx); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO events (sweep_id, point_ref, host, at, kind, detail)
		VALUES (7, 1, 'gpu1', 1160, 'ran_beside', 'ran beside 2 other point(s): spec, x')`)
	return err
}

func seed4(ctx context.Context, tx *sql.Tx) error {
	if err := seed1(ctx, tx); err != nil {
		return err
	}
	for _, s := range []string{
		`UPDATE points SET effective_num_steps = 3, effective_topk = 1, effective_num_draft_tokens = 4,
		 effective_args = '{"tp_size":4}', provenance = '{"engine":"x"}', exec_start = '/bin/x', load_s = 12.5 WHERE id = 2`,
		`UPDATE runs SET accept_length_source = 'metrics', accept_length = 2.5 WHERE point_ref = 2`,
	} {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

func seed1(ctx context.Context, tx *sql.Tx) error {
	stmts := []string{
		`INSERT INTO sweeps (id, name, spec_hash, spec_text, state, created_at) VALUES (7, 'seeded', 'h', '` + seededSpec + `', 'running', 1000)`,
		`INSERT INTO hosts (sweep_id, name, gpus) VALUES (7, 'gpu1', 4)`,
		`INSERT INTO points (id, sweep_id, point_id, plan_order, method, baseline, tp, argv, created_at, state, attempts, host, started_at)
		 VALUES (1, 7, 'base', 0, 'baseline', 1, 4, '["/bin/x"]', 1000, 'done', 1, 'gpu1', 1100)`,
		`INSERT INTO points (id, sweep_id, point_id, plan_order, method, baseline, num_steps, topk, num_draft_tokens, tp, argv, created_at, state, attempts, host, started_at)
		 VALUES (2, 7, 'spec', 1, 'eagle3', 0, 3, 1, 4, 4, '["/bin/x"]', 1000, 'running', 1, 'gpu1', 1200)`,
		`INSERT INTO runs (point_ref, attempt, concurrency, repeat, status, host, output_tok_s, started_at, finished_at)
		 VALUES (1, 1, 16, 1, 'ok', 'gpu1', 100, 1100, 1150)`,
		`INSERT INTO runs (point_ref, attempt, concurrency, repeat, status, host, output_tok_s, started_at, finished_at)
		 VALUES (2, 1, 16, 1, 'ok', 'gpu1', 180, 1200, 1250)`,
		`INSERT INTO events (sweep_id, point_ref, host, at, kind, detail) VALUES (7, 2, 'gpu1', 1200, 'state', 'pending -> running (attempt 1)')`,
	}
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// checkSeeded verifies, through the current API, the data of the seed of version key.
func checkSeeded(t *testing.T, db *DB, key int64) {
	t.Helper()
	ctx := context.Background()
	s, err := db.FindSweep(ctx, "seeded")
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != 7 || s.Done != 1 || s.Running != 1 || s.Points != 2 {
		t.Errorf("seeded sweep: %+v", s)
	}
	pts, err := db.Points(ctx, 7)
	if err != nil || len(pts) != 2 {
		t.Fatalf("seeded points: %+v %v", pts, err)
	}
	for _, p := range pts {
		// Version 5: no point of an older sweep is searched; the seed of version 5 has one.
		if searched := key >= 5 && p.ID == "base"; p.Searched != searched || (p.Reason != "") != searched {
			t.Errorf("seeded point %s: searched %v, reason %q", p.ID, p.Searched, p.Reason)
		}
	}
	if key >= 5 && pts[0].Reason != "kept: +80% at c=16" {
		t.Errorf("seeded point base: reason %q", pts[0].Reason)
	}
	// Version 6: no point has outputs or an output check.
	outs, err := db.OutputChecks(ctx, 7)
	if err != nil || len(outs) != 2 {
		t.Fatalf("seeded output checks: %+v %v", outs, err)
	}
	for _, o := range outs {
		if o.Outputs != nil || o.Check != "" || o.Agreement != nil || o.Evidence != nil {
			t.Errorf("seeded point %s has outputs: %+v", o.PointID, o)
		}
	}
	if o := outs[0]; o.PointID != "base" || !o.Baseline || o.TP != 4 || o.State != PointDone || o.Attempt != 1 {
		t.Errorf("seeded output check of base: %+v", o)
	}
	sums, err := db.PointSummaries(ctx, 7)
	if err != nil || len(sums) != 2 || sums[0].OutputCheck != "" || sums[0].OutputAgreement != nil {
		t.Errorf("seeded point summaries: %+v %v", sums, err)
	}
	if p := pts[1]; key >= 4 && (p.EffectiveNumSteps == nil || *p.EffectiveNumSteps != 3 || *p.EffectiveNumDraftTokens != 4 ||
		string(p.EffectiveArgs) != `{"tp_size":4}` || p.ExecStart != "/bin/x" || p.Load.Seconds() != 12.5) {
		t.Errorf("seeded point spec lost its version 3 columns: %+v", p)
	}
	if key >= 4 {
		sums, err := db.RunSummaries(ctx, RunsQuery{SweepID: 7, Where: "point_id = 'spec'"})
		if err != nil || len(sums) != 1 || sums[0].AcceptLengthSource != "metrics" || *sums[0].AcceptLength != 2.5 {
			t.Errorf("seeded run of spec: %+v %v", sums, err)
		}
	}
	// Version 10: every run has the cell of the sweep's spec, random prompts of 512 tokens.
	runs, err := db.RunSummaries(ctx, RunsQuery{SweepID: 7})
	if err != nil || len(runs) != 2 {
		t.Fatalf("seeded runs: %+v %v", runs, err)
	}
	for _, r := range runs {
		if r.Dataset != "" || r.InputTokens == nil || *r.InputTokens != 512 {
			t.Errorf("seeded run of %s: cell %q/%v, want random prompts of 512 tokens", r.PointID, r.Dataset, r.InputTokens)
		}
	}
	evs, err := db.Events(ctx, 7, "spec")
	if err != nil || len(evs) == 0 || evs[0].Detail != "pending -> running (attempt 1)" || evs[0].Host != "gpu1" {
		t.Errorf("seeded events of spec: %+v %v", evs, err)
	}
	if key >= 7 {
		evs, err := db.Events(ctx, 7, "base")
		var got []RanBeside
		for _, e := range evs {
			if r, ok := e.RanBeside(); ok {
				got = append(got, r)
			}
		}
		if err != nil || len(got) != 1 || got[0].Beside != 2 {
			t.Errorf("seeded ran_beside event of base: %+v, read as %+v %v", evs, got, err)
		}
	}
	fk, err := db.rw.QueryContext(ctx, "PRAGMA foreign_key_check")
	if err != nil {
		t.Fatal(err)
	}
	if fk.Next() {
		t.Error("foreign key violations after the upgrade")
	}
	fk.Close()
	rows, err := db.QueryRuns(ctx, RunsQuery{Sweep: "seeded", Where: "point_id = 'spec'"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows.Values) != 1 || rows.Values[0][24] != 1.8 {
		t.Errorf("seeded runs: %v", rows.Values)
	}
	// The interrupted point can be recovered and re-run with the new schema.
	if n, err := db.RecoverInterrupted(ctx, 7, ""); err != nil || n != 1 {
		t.Errorf("recover: %d %v", n, err)
	}
	if att, err := db.ClaimPoint(ctx, 7, "spec", "gpu1"); err != nil || att != 2 {
		t.Errorf("claim: %d %v", att, err)
	}
	// The output check works on the old points: the re-run stores outputs and is checked; the old
	// done baseline has none to check.
	if err := db.SetPointOutputs(ctx, 7, "spec", 2, json.RawMessage(`{"prompts":1,"runs":[["x"]]}`)); err != nil {
		t.Error(err)
	}
	if err := db.SetOutputCheck(ctx, 7, "spec", OutputCheck{Result: OutputCheckOK, Agreement: fp(1), Attempt: 2}); err != nil {
		t.Error(err)
	}
	if err := db.SetOutputCheck(ctx, 7, "base", OutputCheck{Result: OutputCheckReference}); !errors.Is(err, ErrNoOutputs) {
		t.Errorf("check of the old baseline: %v, want ErrNoOutputs", err)
	}
	// The re-run records its runs per cell: the old baseline's run of the same cell is its speedup's
	// reference, another cell has none; a cell twice is a duplicate.
	if err := db.RecordRun(ctx, cellRun(7, "spec", 2, 16, 1, "", 512, 150)); err != nil {
		t.Error(err)
	}
	if err := db.RecordRun(ctx, cellRun(7, "spec", 2, 16, 1, "", 0, 150)); err != nil {
		t.Error(err)
	}
	if err := db.RecordRun(ctx, cellRun(7, "spec", 2, 16, 1, "", 512, 150)); !errors.Is(err, ErrDuplicateRun) {
		t.Errorf("a cell twice: %v, want ErrDuplicateRun", err)
	}
	runs, err = db.RunSummaries(ctx, RunsQuery{SweepID: 7, Where: "point_id = 'spec' AND attempt = 2"})
	if err != nil || len(runs) != 2 || runs[0].InputTokens != nil || runs[0].Speedup != nil ||
		*runs[1].InputTokens != 512 || runs[1].Speedup == nil || *runs[1].Speedup != 1.5 {
		t.Errorf("re-run's speedups per cell: %+v %v", runs, err)
	}
	if err := db.FinishPoint(ctx, 7, "spec", 2, PointFinish{State: PointFailed, FailureClass: FailOutputMismatch}); err != nil {
		t.Error(err)
	}
}

// schemaOf returns the normalized schema of a database (without goose's table).
func schemaOf(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query(`SELECT type, name, coalesce(sql, '') FROM sqlite_schema
		WHERE name NOT LIKE 'goose%' AND name NOT LIKE 'sqlite_%' ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ws := regexp.MustCompile(`\s+`)
	var b strings.Builder
	for rows.Next() {
		var typ, name, text string
		if err := rows.Scan(&typ, &name, &text); err != nil {
			t.Fatal(err)
		}
		b.WriteString(typ + " " + name + ": " + ws.ReplaceAllString(text, " ") + "\n")
	}
	return b.String()
}

func TestMigrationsFromEveryVersion(t *testing.T) {
	ctx := context.Background()
	versions := migrationVersions()
	fresh := openTest(t)
	want := schemaOf(t, fresh.rw)

	for _, from := range append([]int64{0}, versions...) {
		t.Run(fmt.Sprintf("from_%d", from), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "old.db")
			// The store's migration connection: migration 10 calls its specsweep_spec_workload.
			raw := openMigrationDB(path)
			seeded := int64(0)
			if from > 0 {
				p, err := newProvider(raw)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := p.UpTo(ctx, from); err != nil {
					t.Fatal(err)
				}
				var key int64
				for v := range seeds {
					if v <= from && v > key {
						key = v
					}
				}
				if seed := seeds[key]; seed != nil {
					tx, err := raw.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					if err := seed(ctx, tx); err != nil {
						t.Fatalf("seed %d at version %d: %v", key, from, err)
					}
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
					seeded = key
				}
			}
			raw.Close()

			db, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			cur, latest, err := schemaVersions(ctx, db.rw)
			if err != nil || cur != latest {
				t.Fatalf("version after Open: %d of %d (%v)", cur, latest, err)
			}
			if got := schemaOf(t, db.rw); got != want {
				t.Errorf("schema after upgrade from %d differs from a fresh database:\n%s\nwant:\n%s", from, got, want)
			}
			if seeded > 0 {
				checkSeeded(t, db, seeded)
			}
		})
	}
}

func TestMigrationsAreForwardOnly(t *testing.T) {
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	for _, f := range files {
		b, _ := fs.ReadFile(migrations.FS, f)
		if !strings.Contains(string(b), "-- +goose Up") {
			t.Errorf("%s: no Up section", f)
		}
		if strings.Contains(string(b), "-- +goose Down") {
			t.Errorf("%s: has a Down section; migrations are forward-only", f)
		}
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	if _, err := db.rw.ExecContext(ctx, "INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, 1)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(ctx, db.Path()); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("newer schema: %v", err)
	}
}

// dump returns every row of a query, for comparing a database before and after an upgrade.
func dump(t *testing.T, db *sql.DB, query string) [][]any {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]any
	for rows.Next() {
		v := make([]any, len(cols))
		p := make([]any, len(cols))
		for i := range v {
			p[i] = &v[i]
		}
		if err := rows.Scan(p...); err != nil {
			t.Fatal(err)
		}
		for i, x := range v {
			if b, ok := x.([]byte); ok {
				v[i] = string(b)
			}
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// v9RunColumns, v9RunDetailColumns and v9RunSummaryColumns are the columns of runs, run_detail and
// run_summary before version 10 added the run's cell.
const (
	v9RunColumns = `id, point_ref, attempt, concurrency, repeat, status, host, requests, completed, failed,
	duration_s, total_input_tokens, total_output_tokens, request_s, input_tok_s, output_tok_s, ttft_mean_ms,
	ttft_p50_ms, ttft_p99_ms, itl_mean_ms, itl_p50_ms, itl_p99_ms, tpot_mean_ms, tpot_p50_ms, tpot_p99_ms,
	e2e_mean_ms, e2e_p50_ms, e2e_p99_ms, accept_length, started_at, finished_at, error, accept_length_source`
	v1RunSummaryColumns = `sweep, sweep_id, point_id, host, method, num_steps, topk, num_draft_tokens, tp,
	concurrency, repeat, status, requests, completed, failed, output_tok_s, request_s, ttft_p50_ms, ttft_p99_ms,
	itl_p50_ms, itl_p99_ms, tpot_p50_ms, e2e_p50_ms, accept_length, speedup, started_at, finished_at`
	v9RunSummaryColumns = v1RunSummaryColumns + ", accept_length_source"
	v9RunDetailColumns  = v1RunSummaryColumns + `, run_id, plan_order, baseline, attempt, duration_s,
	total_input_tokens, total_output_tokens, input_tok_s, ttft_mean_ms, itl_mean_ms, tpot_mean_ms, tpot_p99_ms,
	e2e_mean_ms, e2e_p99_ms, error, accept_length_source`
)

// v4PointColumns are the columns of points before version 5 rebuilt the table.
const v4PointColumns = `id, sweep_id, point_id, plan_order, method, baseline, num_steps, topk, num_draft_tokens, tp,
	argv, env, planned_runs, state, attempts, host, failure_class, failure_detail, effective_args, provenance,
	exec_start, load_s, created_at, started_at, finished_at, effective_num_steps, effective_topk,
	effective_num_draft_tokens`

// TestSearchMigrationKeepsData upgrades a version-4 database with points in every state, runs and
// events (of sweeps, points and hosts) to version 5, which rebuilds the points table, several
// processes at once: every row keeps its id and values, the views read the same, and the foreign
// keys still hold and still cascade.
func TestSearchMigrationKeepsData(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v4.db")
	raw, err := sql.Open("sqlite3", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	p, err := newProvider(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	stmts := []string{
		`INSERT INTO sweeps (id, name, spec_hash, spec_text, state, schedule, created_at) VALUES (3, 'tmpl', 'h', 'x', 'scheduled', '@daily', 900)`,
		`INSERT INTO sweeps (id, name, spec_hash, spec_text, state, created_at, started_at, schedule_id) VALUES (5, 'old', 'h', 'version: 1', 'running', 1000, 1001, 3)`,
		`INSERT INTO sweeps (id, name, spec_hash, spec_text, state, created_at) VALUES (6, 'other', 'h', 'version: 1', 'queued', 1000)`,
		`INSERT INTO hosts (sweep_id, name, address, unit, gpus) VALUES (5, 'g4', 'g4.example', 'sglang.service', 4), (5, 'g8', '', '', 8), (6, 'g4', '', '', 4)`,
		// Ids with gaps, plan order unlike id order, every state.
		`INSERT INTO points (id, sweep_id, point_id, plan_order, method, baseline, tp, argv, env, planned_runs, created_at, state, attempts, host, started_at, finished_at, load_s, exec_start, effective_args, provenance)
		 VALUES (10, 5, 'base', 1, 'baseline', 1, 4, '["/bin/x","--tp-size","4"]', '{"A":"1"}', 2, 1000, 'done', 1, 'g4', 1100, 1190, 90.5, '/bin/x', '{"tp_size":4}', '{"engine":"0.5"}')`,
		`INSERT INTO points (id, sweep_id, point_id, plan_order, method, baseline, num_steps, topk, num_draft_tokens, tp, argv, planned_runs, created_at, state, attempts, host, started_at, effective_num_steps, effective_topk, effective_num_draft_tokens)
		 VALUES (12, 5, 's3', 0, 'eagle3', 0, 3, 1, 4, 4, '[]', 2, 1000, 'running', 2, 'g4', 1200, 3, 1, 4)`,
		`INSERT INTO points (id, sweep_id, point_id, plan_order, method, baseline, num_steps, tp, argv, planned_runs, created_at, state, attempts, host, failure_class, failure_detail, started_at, finished_at)
		 VALUES (15, 5, 'ngram', 2, 'ngram', 0, NULL, 8, '[]', 2, 1000, 'failed', 1, 'g8', 'oom', 'CUDA out of memory', 1300, 1350)`,
		`INSERT INTO points (id, sweep_id, point_id, plan_order, method, baseline, tp, argv, created_at, state, attempts, host, failure_class, failure_detail)
		 VALUES (16, 5, 'b8', 3, 'baseline', 1, 8, '[]', 1000, 'pending', 1, 'g8', 'interrupted', 'host lost')`,
		`INSERT INTO points (id, sweep_id, point_id, plan_order, method, baseline, tp, argv, created_at, state, finished_at)
		 VALUES (17, 5, 'c', 4, 'baseline', 1, 4, '[]', 1000, 'cancelled', 1400)`,
		`INSERT INTO points (id, sweep_id, point_id, plan_order, method, baseline, tp, argv, created_at)
		 VALUES (20, 6, 'base', 0, 'baseline', 1, 4, '[]', 1000)`,
		`INSERT INTO runs (id, point_ref, attempt, concurrency, repeat, status, host, requests, completed, failed, output_tok_s, accept_length, accept_length_source, started_at, finished_at, error)
		 VALUES (1, 10, 1, 1, 1, 'ok', 'g4', 8, 8, 0, 100, NULL, '', 1100, 1150, ''),
		        (2, 10, 1, 16, 1, 'ok', 'g4', 64, 64, 0, 400, NULL, '', 1150, 1190, ''),
		        (4, 12, 1, 1, 1, 'superseded', 'g8', 8, 8, 0, 150, 2.5, 'metrics', 1150, 1160, ''),
		        (5, 12, 2, 1, 1, 'ok', 'g4', 8, 8, 0, 160, 2.6, 'decode_log', 1200, 1250, ''),
		        (7, 15, 1, 1, 1, 'failed', 'g8', 8, 3, 5, NULL, NULL, '', 1300, 1350, 'connection refused')`,
		`INSERT INTO events (id, sweep_id, point_ref, host, at, kind, detail)
		 VALUES (1, 5, NULL, NULL, 1000, 'sweep_state', 'created queued (5 points, 2 hosts)'),
		        (2, 5, 12, 'g4', 1200, 'state', 'pending -> running (attempt 2)'),
		        (3, 5, 15, 'g8', 1350, 'state', 'running -> failed (oom: CUDA out of memory)'),
		        (4, NULL, NULL, 'g8', 1360, 'reconnect', 'daemon event'),
		        (6, 6, 20, NULL, 1370, 'stop', 'stopped in 1s')`,
	}
	for _, s := range stmts {
		if _, err := raw.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	queries := []string{
		"SELECT * FROM sweeps ORDER BY id",
		"SELECT * FROM hosts ORDER BY id",
		"SELECT " + v4PointColumns + " FROM points ORDER BY id",
		"SELECT * FROM runs ORDER BY id",
		"SELECT * FROM events ORDER BY id",
		"SELECT * FROM run_detail ORDER BY run_id",
		"SELECT * FROM run_summary ORDER BY sweep_id, point_id, started_at",
		"SELECT * FROM point_summary",
		"SELECT * FROM event_log",
	}
	before := make([][][]any, len(queries))
	for i, q := range queries {
		before[i] = dump(t, raw, q)
	}
	if len(before[2]) != 6 || len(before[3]) != 5 || len(before[4]) != 5 || len(before[5]) != 5 {
		t.Fatalf("seeded %d points, %d runs, %d events", len(before[2]), len(before[3]), len(before[4]))
	}
	raw.Close()

	// Several processes open the old file at once; one rebuilds, the others wait and see it done.
	dbs := make([]*DB, 4)
	errs := make([]error, len(dbs))
	var wg sync.WaitGroup
	for i := range dbs {
		wg.Go(func() { dbs[i], errs[i] = Open(ctx, path) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer dbs[i].Close()
	}
	db := dbs[0]
	for i, q := range queries {
		if strings.HasPrefix(q, "SELECT * FROM sweeps") {
			// Version 7 adds sweeps.daemon_deaths (0 for every older sweep).
			q = strings.Replace(q, "*", "id, name, spec_hash, spec_text, state, schedule, not_before, created_at, "+
				"started_at, finished_at, schedule_id", 1)
		}
		if strings.HasPrefix(q, "SELECT * FROM events") {
			// Version 8 adds events.data (NULL for every older event but a ran_beside one).
			q = strings.Replace(q, "*", "id, sweep_id, point_ref, host, at, kind, detail", 1)
		}
		// Version 10 adds each run's cell (dataset, input_tokens: NULL here, as these sweeps' specs
		// name no workload) to runs, run_detail and run_summary.
		if strings.HasPrefix(q, "SELECT * FROM runs") {
			q = strings.Replace(q, "*", v9RunColumns, 1)
		}
		if strings.HasPrefix(q, "SELECT * FROM run_detail") {
			q = strings.Replace(q, "*", v9RunDetailColumns, 1)
		}
		if strings.HasPrefix(q, "SELECT * FROM run_summary") {
			q = strings.Replace(q, "*", v9RunSummaryColumns, 1)
		}
		if strings.HasPrefix(q, "SELECT * FROM point_summary") {
			q = strings.Replace(q, "*", "sweep, sweep_id, point_id, host, method, num_steps, topk, num_draft_tokens, tp, "+
				"state, attempts, failure_class, failure_detail, load_s, exec_start, effective_args, provenance, "+
				"started_at, finished_at, effective_num_steps, effective_topk, effective_num_draft_tokens, baseline", 1)
		}
		if got := dump(t, db.rw, q); !reflect.DeepEqual(got, before[i]) {
			t.Errorf("%s after the upgrade:\n got %v\nwant %v", q, got, before[i])
		}
	}
	if got := dump(t, db.rw, "SELECT count(*) FROM runs WHERE dataset IS NOT NULL OR input_tokens IS NOT NULL"); got[0][0] != int64(0) {
		t.Errorf("%v runs have a cell after the upgrade, though their specs give none", got[0][0])
	}
	if got := dump(t, db.rw, "SELECT count(*) FROM points WHERE reason IS NOT NULL OR searched <> 0"); got[0][0] != int64(0) {
		t.Errorf("%v points have a reason or are searched after the upgrade", got[0][0])
	}
	if got := dump(t, db.rw, "SELECT count(*) FROM point_summary WHERE reason IS NOT NULL"); got[0][0] != int64(0) {
		t.Errorf("point_summary.reason: %v not NULL", got[0][0])
	}
	if got := dump(t, db.rw, "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'points' AND sql IS NOT NULL ORDER BY name"); fmt.Sprint(got) != "[[points_baseline] [points_by_state]]" {
		t.Errorf("indexes of points: %v", got)
	}
	if got := dump(t, db.rw, "PRAGMA foreign_key_check"); len(got) != 0 {
		t.Errorf("foreign key violations: %v", got)
	}
	// Every connection of the pool enforces foreign keys again.
	conns := make([]*sql.Conn, 3)
	for i := range conns {
		c, err := db.rw.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
		var on int
		if err := c.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&on); err != nil || on != 1 {
			t.Errorf("connection %d: foreign_keys = %d (%v)", i, on, err)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	if _, err := db.rw.ExecContext(ctx, "INSERT INTO runs (point_ref, attempt, concurrency, repeat, status, started_at, finished_at) VALUES (11, 1, 1, 1, 'ok', 0, 0)"); err == nil {
		t.Error("a run of a missing point accepted")
	}
	if _, err := db.rw.ExecContext(ctx, "UPDATE points SET host = 'nohost' WHERE id = 20"); err == nil {
		t.Error("a point on a host not of its sweep accepted")
	}

	// The old points work through the API: the interrupted one is recovered and re-run.
	if n, err := db.RecoverInterrupted(ctx, 5, ""); err != nil || n != 1 {
		t.Errorf("recover: %d %v", n, err)
	}
	if att, err := db.ClaimPoint(ctx, 5, "s3", "g4"); err != nil || att != 3 {
		t.Errorf("claim: %d %v", att, err)
	}
	// Deleting a sweep still cascades through the rebuilt table to its runs and events.
	if _, err := db.rw.ExecContext(ctx, "DELETE FROM sweeps WHERE id = 5"); err != nil {
		t.Fatal(err)
	}
	got := dump(t, db.rw, `SELECT (SELECT count(*) FROM points), (SELECT count(*) FROM runs),
		(SELECT count(*) FROM events WHERE point_ref IS NOT NULL), (SELECT group_concat(id) FROM events)`)
	if fmt.Sprint(got) != "[[1 0 1 4,6]]" {
		t.Errorf("after deleting sweep 5: points, runs, point events, events = %v, want [[1 0 1 4,6]]", got)
	}
}

// TestRunCellsMigration upgrades a version-9 database whose sweeps' specs say their prompts in
// every way a stored spec may (YAML block and flow style, JSON, ShareGPT, the default dataset, a
// text that is no spec) to version 10, several processes at once: each old run gets its sweep's
// cell, the speedups read as before, and the new uniqueness and speedup rule hold per cell on the
// old rows.
func TestRunCellsMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v9.db")
	raw := openMigrationDB(path)
	p, err := newProvider(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 9); err != nil {
		t.Fatal(err)
	}
	specs := []struct {
		name, spec string
		dataset    any // what the runs read after the upgrade
		tokens     any
	}{
		{"block", "version: 1\nname: block\n# input_tokens: 9 was too short\nworkload:\n  concurrency: [1, 16]\n  input_tokens: 1024\n  output_tokens: 64\n",
			nil, int64(1024)},
		{"flow", "version: 1\nname: flow\nworkload: {concurrency: [1], requests: 4, input_tokens: 256, output_tokens: 8, dataset: random}\n",
			nil, int64(256)},
		{"json", `{"version": 1, "name": "json", "workload": {"concurrency": [1], "dataset": "random", "input_tokens": 2048}}`,
			nil, int64(2048)},
		{"anchor", "version: 1\nname: anchor\nworkload:\n  input_tokens: &len 300\n  output_tokens: *len\n", nil, int64(300)},
		{"sharegpt", "version: 1\nname: sharegpt\nworkload:\n  dataset: \"sharegpt:/data/ShareGPT_V3.json\"\n  input_tokens: 1024\n",
			"sharegpt", nil},
		{"nospec", "x", nil, nil},
		{"nolength", "version: 1\nname: nolength\nworkload: {concurrency: [1]}\n", nil, nil},
		{"badyaml", "workload: [unclosed\n", nil, nil},
	}
	for i, s := range specs {
		sw := i + 1
		stmts := []string{
			fmt.Sprintf(`INSERT INTO sweeps (id, name, spec_hash, spec_text, state, created_at) VALUES (%d, '%s', 'h', '%s', 'running', 1000)`,
				sw, s.name, strings.ReplaceAll(s.spec, "'", "''")),
			fmt.Sprintf(`INSERT INTO hosts (sweep_id, name, gpus) VALUES (%d, 'g', 4)`, sw),
			fmt.Sprintf(`INSERT INTO points (id, sweep_id, point_id, plan_order, method, baseline, tp, argv, created_at, state, attempts, host, planned_runs)
			 VALUES (%d, %d, 'base', 0, 'baseline', 1, 4, '[]', 1000, 'done', 1, 'g', 2)`, 10*sw, sw),
			fmt.Sprintf(`INSERT INTO points (id, sweep_id, point_id, plan_order, method, baseline, num_steps, topk, num_draft_tokens, tp, argv, created_at, state, attempts, host, planned_runs)
			 VALUES (%d, %d, 'spec', 1, 'eagle3', 0, 3, 1, 4, 4, '[]', 1000, 'running', 1, 'g', 4)`, 10*sw+1, sw),
			fmt.Sprintf(`INSERT INTO runs (point_ref, attempt, concurrency, repeat, status, host, output_tok_s, started_at, finished_at)
			 VALUES (%[1]d, 1, 1, 1, 'ok', 'g', 100, 1100, 1150), (%[1]d, 1, 16, 1, 'ok', 'g', 400, 1150, 1190),
			        (%[2]d, 1, 1, 1, 'ok', 'g', 150, 1200, 1250), (%[2]d, 1, 16, 1, 'failed', 'g', NULL, 1250, 1260)`, 10*sw, 10*sw+1),
		}
		for _, q := range stmts {
			if _, err := raw.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	bySpeedup := "SELECT run_id, speedup FROM run_detail ORDER BY run_id"
	before := dump(t, raw, bySpeedup)
	raw.Close()

	dbs := make([]*DB, 3)
	errs := make([]error, len(dbs))
	var wg sync.WaitGroup
	for i := range dbs {
		wg.Go(func() { dbs[i], errs[i] = Open(ctx, path) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		defer dbs[i].Close()
	}
	db := dbs[0]
	for i, s := range specs {
		got := dump(t, db.rw, fmt.Sprintf(`SELECT DISTINCT r.dataset, r.input_tokens FROM runs r JOIN points p ON p.id = r.point_ref
			WHERE p.sweep_id = %d`, i+1))
		if want := [][]any{{s.dataset, s.tokens}}; !reflect.DeepEqual(got, want) {
			t.Errorf("sweep %s: runs' cells %v, want %v", s.name, got, want)
		}
	}
	if got := dump(t, db.rw, bySpeedup); !reflect.DeepEqual(got, before) || len(got) != 4*len(specs) {
		t.Errorf("speedups after the upgrade:\n got %v\nwant %v", got, before)
	}
	if got := dump(t, db.rw, "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'runs' ORDER BY name"); fmt.Sprint(got) != "[[runs_by_cell] [runs_by_level]]" {
		t.Errorf("indexes of runs: %v", got)
	}
	if got := dump(t, db.rw, "PRAGMA foreign_key_check"); len(got) != 0 {
		t.Errorf("foreign key violations: %v", got)
	}
	if got := dump(t, db.rw, "SELECT count(*) FROM sqlite_temp_schema"); got[0][0] != int64(0) {
		t.Errorf("the migration left %v temporary tables", got[0][0])
	}

	// The old rows hold their cell: in sweep block (random prompts of 1024 tokens), spec's running
	// attempt has its c=1 run of that cell; another cell of the level is new, with its own speedup
	// against the baseline's run of that cell (none here), and the old cell's speedup stays.
	if err := db.RecordRun(ctx, cellRun(1, "spec", 1, 1, 1, "", 1024, 150)); !errors.Is(err, ErrDuplicateRun) {
		t.Errorf("the old run's cell again: %v, want ErrDuplicateRun", err)
	}
	if err := db.RecordRun(ctx, cellRun(1, "spec", 1, 1, 1, "", 4096, 50)); err != nil {
		t.Errorf("another cell of the old level: %v", err)
	}
	// In sweep sharegpt, the old runs' cell is the set at its own lengths; the zero cell is another.
	if err := db.RecordRun(ctx, cellRun(5, "spec", 1, 1, 1, "sharegpt", 0, 150)); !errors.Is(err, ErrDuplicateRun) {
		t.Errorf("the old sharegpt run's cell again: %v, want ErrDuplicateRun", err)
	}
	if err := db.RecordRun(ctx, cellRun(5, "spec", 1, 1, 1, "", 0, 150)); err != nil {
		t.Errorf("random prompts at the old sharegpt level: %v", err)
	}
	sums, err := db.RunSummaries(ctx, RunsQuery{Sweep: "block", Where: "point_id = 'spec' AND concurrency = 1"})
	if err != nil || len(sums) != 2 || *sums[0].InputTokens != 1024 || *sums[0].Speedup != 1.5 ||
		*sums[1].InputTokens != 4096 || sums[1].Speedup != nil {
		t.Errorf("spec's runs at c=1 in sweep block: %+v %v", sums, err)
	}
	// Done needs the planned runs of the attempt, each cell one.
	if err := db.RecordRunAndFinish(ctx, cellRun(1, "spec", 1, 16, 1, "", 4096, 300), &PointFinish{State: PointDone}); err != nil {
		t.Errorf("finish with 4 of 4 runs: %v", err)
	}
}

// TestSpecWorkload: the migrations' reader of a stored spec's workload values.
func TestSpecWorkload(t *testing.T) {
	for _, c := range []struct {
		spec, key string
		want      any
	}{
		{"workload:\n  input_tokens: 1024\n", "input_tokens", int64(1024)},
		{"workload:\n  dataset: sharegpt:/x.json\n", "dataset", "sharegpt:/x.json"},
		{"workload: {dataset: random}", "dataset", "random"},
		{`{"workload": {"input_tokens": 7}}`, "input_tokens", int64(7)},
		{"workload:\n  input_tokens: 1024\n", "dataset", nil},
		{"workload:\n  input_tokens: 10.5\n", "input_tokens", nil},
		{"workload:\n  input_tokens: [1, 2]\n", "input_tokens", nil},
		{"workload:\n  input_tokens: 99999999999999999999\n", "input_tokens", nil},
		{"workload: [1, 2]\n", "input_tokens", nil},
		{"input_tokens: 5\n", "input_tokens", nil},
		{"- a\n- b\n", "input_tokens", nil},
		{"x", "input_tokens", nil},
		{"", "input_tokens", nil},
		{"workload: {input_tokens: 1\n", "input_tokens", nil},
		{"workload:\n  input_tokens: 1\n---\nworkload:\n  input_tokens: 2\n", "input_tokens", int64(1)},
	} {
		if got := specWorkload(c.spec, c.key); got != c.want {
			t.Errorf("specWorkload(%q, %q) = %#v, want %#v", c.spec, c.key, got, c.want)
		}
	}
}
