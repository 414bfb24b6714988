package store

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestWriteBenchDB writes the benchmark's 100k-run database to
// $SPECSWEEP_BENCH_DB (skipped when unset), for inspection with sqlite3.
func TestWriteBenchDB(t *testing.T) {
	path := os.Getenv("SPECSWEEP_BENCH_DB")
	if path == "" {
		t.Skip("SPECSWEEP_BENCH_DB not set")
	}
	os.Remove(path)
	db, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	fillBench(t, db, "bench", benchPoints)
	t.Logf("filled in %v", time.Since(start))
}
