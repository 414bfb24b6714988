package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"
)

// The dashboard benchmark's store (internal/e2e, BenchmarkDashboardPageLoad and BenchmarkDashboardCPU;
// bench/dashboard.sh): 100 finished sweeps of 20 points x 5 levels x 10 repeats, 100,000 runs in all.
const (
	dashBenchSweeps = 100
	dashBenchPoints = 20
)

// TestWriteDashboardBenchDB writes the dashboard benchmark's database to $SPECSWEEP_DASHBOARD_DB
// (skipped when unset): sweeps nightly-001 .. nightly-100, a day apart, each done with its points and
// runs, so a daemon opened on it has nothing to run (it runs queued sweeps only) and the dashboard
// lists 100 finished sweeps.
func TestWriteDashboardBenchDB(t *testing.T) {
	path := os.Getenv("SPECSWEEP_DASHBOARD_DB")
	if path == "" {
		t.Skip("SPECSWEEP_DASHBOARD_DB not set")
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		os.Remove(p)
	}
	ctx := context.Background()
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	const day = int64(24 * time.Hour / time.Millisecond)
	for i := 1; i <= dashBenchSweeps; i++ {
		name := fmt.Sprintf("nightly-%03d", i)
		sw := fillBench(t, db, name, dashBenchPoints)
		// fillBench dates every sweep's points and runs alike: move sweep i to day i, then mark it done
		// as a finished run of the daemon leaves it (started at its first point, finished at its last).
		off := int64(i-1) * day
		text := fmt.Sprintf("# %s: written by TestWriteDashboardBenchDB (store/dashboard_bench_test.go),\n"+
			"# a finished sweep of the dashboard benchmark, not a spec to run.\n", name)
		created := int64(1764540000000) - 60000 + off
		if err := db.write(ctx, func(tx *sql.Tx) error {
			for _, q := range []struct {
				sql  string
				args []any
			}{
				{`UPDATE runs SET started_at = started_at + ?, finished_at = finished_at + ?
					WHERE point_ref IN (SELECT id FROM points WHERE sweep_id = ?)`, []any{off, off, sw}},
				{`UPDATE points SET started_at = started_at + ?, finished_at = finished_at + ?, created_at = ?
					WHERE sweep_id = ?`, []any{off, off, created, sw}},
				{`UPDATE sweeps SET state = 'done', created_at = ?,
					started_at = (SELECT min(started_at) FROM points WHERE sweep_id = ?),
					finished_at = (SELECT max(finished_at) FROM points WHERE sweep_id = ?)
					WHERE id = ?`, []any{created, sw, sw, sw}},
			} {
				if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
					return err
				}
			}
			_, err := tx.ExecContext(ctx, `UPDATE sweeps SET spec_hash = ?, spec_text = ? WHERE id = ?`,
				fmt.Sprintf("dashboard-bench-%03d", i), text, sw)
			return err
		}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	var sweeps, done, runs int
	if err := db.rw.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(state = 'done'), 0),
		(SELECT count(*) FROM runs) FROM sweeps`).Scan(&sweeps, &done, &runs); err != nil {
		t.Fatal(err)
	}
	if want := dashBenchSweeps * dashBenchPoints * len(benchLevels) * benchRepeats; sweeps != dashBenchSweeps || done != sweeps || runs != want {
		t.Fatalf("%d sweeps (%d done), %d runs; want %d done and %d runs", sweeps, done, runs, dashBenchSweeps, want)
	}
	t.Logf("%d finished sweeps, %d runs, written in %v", sweeps, runs, time.Since(start).Round(time.Millisecond))
}
