package store

import (
	"context"
	"errors"
	"fmt"
	"math"
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

// TestWriteExampleDB writes the small example database of docs/schema.md to
// $SPECSWEEP_EXAMPLE_DB (skipped when unset), through the public API.
func TestWriteExampleDB(t *testing.T) {
	path := os.Getenv("SPECSWEEP_EXAMPLE_DB")
	if path == "" {
		t.Skip("SPECSWEEP_EXAMPLE_DB not set")
	}
	os.Remove(path)
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)}
	db, err := Open(ctx, path, WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	levels := []int{1, 4, 16, 32, 64}
	argv := []string{"/opt/sglang/.venv/bin/python", "-m", "sglang.launch_server", "--model-path", "/models/Qwen3.5-122B-A10B"}
	points := []NewPoint{
		{ID: "b-tp4", Method: "baseline", Baseline: true, TP: 4, Argv: argv, Runs: len(levels)},
		{ID: "b-tp8", Method: "baseline", Baseline: true, TP: 8, Argv: argv, Runs: len(levels)},
	}
	for _, tp := range []int{4, 8} {
		for steps := 1; steps <= 4; steps++ {
			points = append(points, NewPoint{ID: fmt.Sprintf("e3-s%d-tp%d", steps, tp), Method: "eagle3", TP: tp,
				NumSteps: ip(steps), TopK: ip(1), NumDraftTokens: ip(steps + 1), Argv: argv, Runs: len(levels)})
		}
	}
	sw, err := db.CreateSweep(ctx, NewSweep{Name: "qwen122b-eagle3-steps", SpecHash: "9f2c4e1a7b3d", SpecText: "version: 1\nname: qwen122b-eagle3-steps\n"},
		[]NewHost{{Name: "llm-one", Address: "llm-one.example", GPUs: 4, Unit: "sglang.service"},
			{Name: "llm-two", Address: "llm-two.example", GPUs: 8, Unit: "sglang.service"}}, points)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ClaimNextSweep(ctx); err != nil {
		t.Fatal(err)
	}
	run := func(p Point, host string) {
		att := p.Attempts
		db.SetPointInfo(ctx, sw, p.ID, att, PointInfo{Load: time.Duration(150+10*p.TP) * time.Second,
			ExecStart:     "/opt/sglang/.venv/bin/python -m sglang.launch_server ...",
			EffectiveArgs: []byte(fmt.Sprintf(`{"tp_size":%d,"speculative_num_steps":%s}`, p.TP, nullOr(p.NumSteps))),
			Provenance:    []byte(`{"sglang":"0.5.6","host":"` + host + `"}`)})
		if p.ID == "e3-s4-tp4" {
			db.RecordRunAndFinish(ctx, Run{SweepID: sw, PointID: p.ID, Attempt: att, Concurrency: 1, Repeat: 1, InputTokens: 1024, Status: RunFailed,
				Error: "server exited during load"}, &PointFinish{State: PointFailed, FailureClass: FailOOM,
				FailureDetail: "torch.OutOfMemoryError: CUDA out of memory (draft graph capture)"})
			return
		}
		for i, c := range levels {
			base := 38 * float64(c) / (1 + float64(c)/40) * (1 + 0.35*float64(p.TP-4)/4)
			gain, accept := 1.0, (*float64)(nil)
			if !p.Baseline {
				a := 1 + 0.75*float64(*p.NumSteps) - 0.08*float64(*p.NumSteps**p.NumSteps)
				accept, gain = fp(math.Round(a*100)/100), a/(1+0.12*float64(*p.NumSteps))
			}
			tok := math.Round(base*(1+(gain-1)/(1+float64(c)/24))*10) / 10
			itl := math.Round(1000*float64(c)/tok*100) / 100
			ttft := math.Round((120+6*float64(c))*10) / 10
			m := &Metrics{Requests: 64, Completed: 64, DurationS: math.Round(32768/tok*10) / 10, TotalInputTokens: 65536, TotalOutputTokens: 32768,
				RequestS: math.Round(64/(32768/tok)*100) / 100, InputTokS: 2 * tok, OutputTokS: tok,
				TTFTMeanMs: ttft * 1.1, TTFTMedianMs: ttft, TTFTP99Ms: ttft * 2.8, ITLMeanMs: itl * 1.05, ITLMedianMs: itl, ITLP99Ms: itl * 2.4,
				TPOTMeanMs: itl * 1.1, TPOTMedianMs: itl * 1.02, TPOTP99Ms: itl * 1.9, E2EMeanMs: ttft + 520*itl, E2EMedianMs: ttft + 511*itl, E2EP99Ms: (ttft + 511*itl) * 1.7,
				AcceptLength: accept}
			r := Run{SweepID: sw, PointID: p.ID, Attempt: att, Concurrency: c, Repeat: 1, InputTokens: 1024, Status: RunOK, Metrics: m}
			if p.ID == "e3-s2-tp8" && att == 1 && c == 16 {
				db.ReleasePoint(ctx, sw, p.ID, att, "specsweep was killed; resumed at restart")
				return
			}
			var fin *PointFinish
			if i == len(levels)-1 {
				fin = &PointFinish{State: PointDone}
			}
			if err := db.RecordRunAndFinish(ctx, r, fin); err != nil {
				t.Fatal(err)
			}
		}
		db.AddEvent(ctx, Event{SweepID: sw, PointID: p.ID, Host: host, Kind: "stop", Detail: "stopped in 41.2s"})
	}
	for _, host := range []string{"llm-one", "llm-two"} {
		for {
			p, err := db.ClaimNextPoint(ctx, sw, host)
			if errors.Is(err, ErrNotFound) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.ID == "e3-s3-tp8" {
				db.AddEvent(ctx, Event{SweepID: sw, Host: host, Kind: "reconnect", Detail: "ssh connection lost; reconnected after 3.0s"})
			}
			run(p, host)
			if p.ID == "e3-s1-tp8" {
				db.AddEvent(ctx, Event{SweepID: sw, PointID: p.ID, Host: host, Kind: "stop_timeout_sigkill", Detail: "TimeoutStopSec=90s elapsed; systemd sent SIGKILL"})
			}
		}
	}
	if err := db.SetSweepState(ctx, sw, SweepDone, "all points ended"); err != nil {
		t.Fatal(err)
	}
}

func nullOr(p *int) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}
