package store

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkEachRunSummary: the typed read of every run of the 100k-run database, as the report
// aggregates them (decoded by column name).
func BenchmarkEachRunSummary(b *testing.B) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	fillBench(b, db, "bench", benchPoints)
	n := 0
	for b.Loop() {
		n = 0
		if err := db.EachRunSummary(ctx, RunsQuery{}, func(r *RunSummary) {
			if r.OutputTokS != nil {
				n++
			}
		}); err != nil {
			b.Fatal(err)
		}
	}
	if n == 0 {
		b.Fatal("no measured run")
	}
	b.ReportMetric(float64(n), "rows/op")
}

// Every column of the public views has a typed field to decode it by name (a column added to a
// view without one is refused, not read into the wrong field).
func TestViewColumnsDecodeByName(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for view, check := range map[string]func([]string) error{
		"run_summary":   func(c []string) error { _, err := newDecoder(runSummaryFields, c); return err },
		"run_detail":    func(c []string) error { _, err := newDecoder(runDetailFields, c); return err },
		"point_summary": func(c []string) error { _, err := newDecoder(pointSummaryFields, c); return err },
	} {
		rows, err := db.Query(ctx, "SELECT * FROM "+view+" LIMIT 0")
		if err != nil {
			t.Fatal(err)
		}
		if err := check(rows.Columns); err != nil {
			t.Errorf("%s: %v", view, err)
		}
	}
	if _, err := newDecoder(runSummaryFields, []string{"sweep", "no_such"}); err == nil {
		t.Error("a column without a field decodes")
	}
}
