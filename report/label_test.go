package report_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// TestReportLabelsPointsAsThePlan: the report names a point as the plan does, without tp
// (sweep.Point.Setting): "n=" for draft tokens, DFLASH's block, NGRAM's k and n.
func TestReportLabelsPointsAsThePlan(t *testing.T) {
	src, err := os.ReadFile("../sweep/testdata/algorithms.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := sweep.Parse("algorithms.good.yaml", src)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	plan := spec.Plan()
	want := map[string]string{}
	var pts []store.NewPoint
	for _, p := range plan.Points {
		want[p.ID] = p.Setting()
		pts = append(pts, store.NewPoint{ID: p.ID, Method: p.Method, Baseline: p.Baseline, NumSteps: p.NumSteps,
			TopK: p.TopK, NumDraftTokens: p.NumDraftTokens, TP: p.TP, Argv: p.Argv})
	}
	id, err := db.CreateSweep(ctx, store.NewSweep{Name: spec.Name, SpecHash: plan.SpecHash, SpecText: string(src)},
		[]store.NewHost{{Name: "gpu", Driver: "ssh", GPUs: 4}}, pts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := report.LoadID(ctx, db, id)
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for _, p := range s.Points {
		if got := p.Label(); got != want[p.ID] {
			t.Errorf("point %s: report label %q, the plan's %q", p.ID, got, want[p.ID])
		}
		if p.Label() == "dflash block=16" {
			blocks++
		}
	}
	if len(s.Points) != len(plan.Points) || blocks != 1 {
		t.Errorf("%d points (plan %d), %d labelled dflash block=16", len(s.Points), len(plan.Points), blocks)
	}
}
