package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/store"
)

// adaptiveDB is a sweep of a baseline and EAGLE-3 steps 1, 3, 7 (topk 1) at c=1, 16, 64 whose best
// steps fall with concurrency: 7, 3, the baseline.
func adaptiveDB(t *testing.T) string {
	t.Helper()
	return adaptiveDBWith(t, "name: falling")
}

// adaptiveDBWith is adaptiveDB with the stored spec's text.
func adaptiveDBWith(t *testing.T, specText string) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "adaptive.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	one := 1
	argv := []string{"python3", "-m", "sglang.launch_server", "--model-path", "/m", "--speculative-algorithm", "EAGLE3"}
	pts := []store.NewPoint{{ID: "b", Method: "baseline", Baseline: true, TP: 1, Argv: argv[:5], Runs: 3}}
	tokS := map[string][3]float64{"b": {100, 1000, 2000}, "s1": {140, 1150, 1800}, "s3": {180, 1200, 1500}, "s7": {200, 1000, 1100}}
	for _, st := range []int{1, 3, 7} {
		n, d := st, st+1
		id := "s" + string(rune('0'+st))
		pts = append(pts, store.NewPoint{ID: id, Method: "eagle3", NumSteps: &n, TopK: &one, NumDraftTokens: &d, TP: 1, Runs: 3,
			Argv: append(append([]string(nil), argv...), "--speculative-num-steps", string(rune('0'+st)), "--speculative-eagle-topk", "1")})
	}
	id, err := db.CreateSweep(ctx, store.NewSweep{Name: "falling", SpecHash: "h", SpecText: specText},
		[]store.NewHost{{Name: "local", Driver: "local", GPUs: 1}}, pts)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_700_000_000, 0)
	for _, p := range pts {
		att, err := db.ClaimPoint(ctx, id, p.ID, "local")
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range []int{1, 16, 64} {
			run := store.Run{SweepID: id, PointID: p.ID, Attempt: att, Concurrency: c, Repeat: 1, Status: store.RunOK,
				Metrics: &store.Metrics{Requests: 8, Completed: 8, OutputTokS: tokS[p.ID][i], RequestS: 1}, StartedAt: t0, FinishedAt: t0}
			var fin *store.PointFinish
			if i == 2 {
				fin = &store.PointFinish{State: store.PointDone}
			}
			if err := db.RecordRunAndFinish(ctx, run, fin); err != nil {
				t.Fatal(err)
			}
		}
	}
	return path
}

// TestAdaptiveCommand: `specsweep adaptive` writes SGLang's config, a slot per level, and the
// command line to start with; a sweep without an EAGLE chain is refused.
func TestAdaptiveCommand(t *testing.T) {
	db := adaptiveDB(t)
	out := filepath.Join(t.TempDir(), "adaptive.json")
	stdout, stderr, code := runMain(t, nil, "adaptive", "--db", db, "-o", out, "falling")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	// Levels 1, 16, 64: slots from batch sizes 1, 4 and 32 (report.slotKeys).
	for k, want := range map[string]string{"1": "[7]", "4": "[3]", "32": "[0]"} {
		slot, _ := cfg[k].(map[string]any)
		got, _ := json.Marshal(slot["candidate_steps"])
		if string(got) != want {
			t.Errorf("slot %s: %s, want %s", k, got, want)
		}
	}
	for _, want := range []string{"eagle3 (EAGLE3, tp 1)", "4-31         c=16", "32+          c=64", "--speculative-num-steps 7", "--max-running-requests 64", "--speculative-adaptive-config " + out, "Wrote " + out} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	// Without -o: the config on stdout, the explanation on stderr.
	stdout, stderr, code = runMain(t, nil, "adaptive", "--db", db, "falling")
	if code != ExitOK || !json.Valid([]byte(stdout)) || !strings.Contains(stderr, "BATCH SIZE") {
		t.Errorf("exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
}
