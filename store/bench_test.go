package store

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// Bench shape: 2000 points x 5 concurrency levels x 10 repeats = 100k runs.
var benchLevels = []int{1, 4, 16, 32, 64}

const (
	benchPoints  = 2000
	benchRepeats = 10
)

// fillBench creates a sweep of n points with all their runs. Runs are
// inserted in bulk (one transaction) for speed; their values follow a
// plausible throughput model so the data looks like a real sweep (of random
// prompts of 1024 tokens: the runs' cell, as the store records it).
func fillBench(tb testing.TB, db *DB, name string, n int) int64 {
	tb.Helper()
	ctx := context.Background()
	methods := []string{"eagle3", "eagle3-tree", "mtp", "ngram"}
	points := make([]NewPoint, 0, n)
	for _, tp := range []int{4, 8} {
		points = append(points, NewPoint{ID: fmt.Sprintf("base-tp%d", tp), Method: "baseline", Baseline: true, TP: tp,
			Argv: []string{"/opt/sglang/bin/python", "-m", "sglang.launch_server", "--tp-size", fmt.Sprint(tp)}})
	}
	for i := 0; len(points) < n; i++ {
		steps, topk := 1+i%10, 1+(i/10)%8
		tp := []int{4, 8}[(i/80)%2]
		m := methods[(i/160)%len(methods)]
		draft := steps + 1
		if topk > 1 {
			draft = steps*topk/2 + 1 + (i/640)%4
		}
		points = append(points, NewPoint{ID: fmt.Sprintf("%s-s%d-k%d-d%d-tp%d-%d", m, steps, topk, draft, tp, i), Method: m,
			NumSteps: ip(steps), TopK: ip(topk), NumDraftTokens: ip(draft), TP: tp,
			Argv: []string{"/opt/sglang/bin/python", "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3",
				"--speculative-num-steps", fmt.Sprint(steps), "--tp-size", fmt.Sprint(tp)}})
	}
	sw, err := db.CreateSweep(ctx, NewSweep{Name: name, SpecHash: "bench", SpecText: "bench"},
		[]NewHost{{Name: "gpu-a", GPUs: 8}, {Name: "gpu-b", GPUs: 8}}, points)
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tx, err := db.rw.BeginTx(ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE points SET state = 'done', attempts = 1,
		host = CASE plan_order % 2 WHEN 0 THEN 'gpu-a' ELSE 'gpu-b' END,
		started_at = 1764540000000 + plan_order * 600000, finished_at = 1764540000000 + plan_order * 600000 + 540000,
		load_s = 180 + plan_order % 60 WHERE sweep_id = ?`, sw); err != nil {
		tb.Fatal(err)
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO runs (point_ref, attempt, concurrency, repeat, status, host,
		requests, completed, failed, duration_s, total_input_tokens, total_output_tokens, request_s, input_tok_s,
		output_tok_s, ttft_mean_ms, ttft_p50_ms, ttft_p99_ms, itl_mean_ms, itl_p50_ms, itl_p99_ms,
		tpot_mean_ms, tpot_p50_ms, tpot_p99_ms, e2e_mean_ms, e2e_p50_ms, e2e_p99_ms, accept_length, started_at, finished_at,
		input_tokens)
		SELECT id, 1, ?, ?, 'ok', host, 64, 64, 0, ?, 65536, 32768, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1024
		FROM points WHERE sweep_id = ? AND plan_order = ?`)
	if err != nil {
		tb.Fatal(err)
	}
	for i, p := range points {
		gain := 1.0
		var accept any
		if !p.Baseline {
			a := 1 + 0.6*float64(*p.NumSteps) - 0.04*float64(*p.NumSteps**p.NumSteps) + 0.1*float64(*p.TopK)
			accept, gain = a, a/(1+0.08*float64(*p.NumSteps))
		}
		for _, c := range benchLevels {
			for r := 1; r <= benchRepeats; r++ {
				base := 90 * float64(c) / (1 + float64(c)/24) * (1 + 0.4*float64(8-p.TP)/8)
				g := 1 + (gain-1)/(1+float64(c)/16)
				tok := base * g * (1 + 0.03*rng.NormFloat64())
				dur := 32768 / tok
				itl := 1000 * float64(c) / tok
				ttft := 80 + 4*float64(c) + 10*rng.Float64()
				e2e := ttft + 511*itl
				start := int64(1764540000000 + i*600000 + 200000 + (c*benchRepeats+r)*5000)
				if _, err := stmt.ExecContext(ctx, c, r, dur, 64/dur, 65536/dur, tok,
					ttft*1.1, ttft, ttft*3, itl*1.05, itl, itl*2.5, itl*1.1, itl*1.02, itl*2,
					e2e*1.05, e2e, e2e*1.8, accept, start, start+int64(dur*1000), sw, i); err != nil {
					tb.Fatal(err)
				}
			}
		}
	}
	stmt.Close()
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	return sw
}

func BenchmarkRunsQuery(b *testing.B) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	fillBench(b, db, "bench", benchPoints)
	q := RunsQuery{Where: "concurrency = 16", OrderBy: "output_tok_s DESC"}
	var rows *Rows
	for b.Loop() {
		if rows, err = db.QueryRuns(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	if want := benchPoints * benchRepeats; len(rows.Values) != want {
		b.Fatalf("%d rows, want %d", len(rows.Values), want)
	}
	if s := rows.Values[0][24]; s == nil || math.IsNaN(s.(float64)) {
		b.Fatalf("no speedup in the best row: %v", rows.Values[0])
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	b.ReportMetric(float64(len(rows.Values)), "rows/op")
}

// BenchmarkLivePoll: what a live event stream polls on the 100k-run database (and as many events):
// the last 100 runs and events after an id, and the last ids. Each is a primary-key search or seek
// (TestLivePollPlans), so it costs the rows returned, not the table's size.
func BenchmarkLivePoll(b *testing.B) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	sw := fillBench(b, db, "bench", benchPoints)
	// One event per run, as a busy log has (the store's own events are a few per point).
	if _, err := db.rw.ExecContext(ctx, `INSERT INTO events (sweep_id, point_ref, host, at, kind, detail)
		SELECT ?, point_ref, host, finished_at, 'stop', 'stopped in 4.1s' FROM runs ORDER BY id`, sw); err != nil {
		b.Fatal(err)
	}
	lastRun, lastEvent, err := db.LastIDs(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if lastRun < benchPoints*int64(len(benchLevels))*benchRepeats || lastEvent < lastRun {
		b.Fatalf("last ids %d, %d", lastRun, lastEvent)
	}
	perOp := func(b *testing.B, rows int) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1000/float64(b.N), "µs/op")
		if rows > 0 {
			b.ReportMetric(float64(rows), "rows/op")
		}
	}
	b.Run("RunsAfter", func(b *testing.B) {
		var rs []RunEvent
		for b.Loop() {
			if rs, err = db.RunsAfter(ctx, lastRun-100, 100); err != nil {
				b.Fatal(err)
			}
		}
		if len(rs) != 100 || rs[99].ID != lastRun {
			b.Fatalf("%d runs, the last %+v", len(rs), rs[len(rs)-1])
		}
		perOp(b, len(rs))
	})
	b.Run("EventsAfter", func(b *testing.B) {
		var es []LoggedEvent
		for b.Loop() {
			if es, err = db.EventsAfter(ctx, lastEvent-100, 100); err != nil {
				b.Fatal(err)
			}
		}
		if len(es) != 100 || es[99].ID != lastEvent {
			b.Fatalf("%d events", len(es))
		}
		perOp(b, len(es))
	})
	b.Run("LastIDs", func(b *testing.B) {
		for b.Loop() {
			if r, e, err := db.LastIDs(ctx); err != nil || r != lastRun || e != lastEvent {
				b.Fatal(r, e, err)
			}
		}
		perOp(b, 0)
	})
}
