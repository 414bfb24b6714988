package orchestrator

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// TestStoredPointsAreLabelledAsThePlan: the label the runner shows for a stored point is the plan's
// (one spelling: "n=" for draft tokens, "block=" for DFLASH, "k= n=" for NGRAM).
func TestStoredPointsAreLabelledAsThePlan(t *testing.T) {
	src, err := os.ReadFile("../sweep/testdata/algorithms.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := sweep.Parse("algorithms.good.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	prep, err := Prepare(context.Background(), db, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := db.Points(context.Background(), prep.SweepID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, p := range spec.Plan().Points {
		want[p.ID] = p.Label()
	}
	seen := map[string]bool{}
	for _, p := range stored {
		if got := pointLabel(p); got != want[p.ID] {
			t.Errorf("point %s: label %q, the plan's is %q", p.ID, got, want[p.ID])
		}
		seen[p.Method] = true
	}
	if len(seen) != 6 {
		t.Errorf("methods %v, want all six of the spec", seen)
	}
}
