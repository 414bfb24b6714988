package store

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// clock is a fake clock that advances one second per reading.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func openTest(t testing.TB) *DB {
	t.Helper()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "specsweep.db"), WithClock(newClock().Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func ip(i int) *int { return &i }

func fp(f float64) *float64 { return &f }

// sampleSweep creates a small sweep: hosts h4 (4 GPUs) and h8 (8 GPUs);
// points b4 (baseline tp4), s1 and s2 (eagle3 tp4), b8 (baseline tp8), s1t8
// (eagle3 tp8); each plans runs at concurrency 1 and 16, one repeat.
func sampleSweep(t testing.TB, db *DB, name string) int64 {
	t.Helper()
	spec := func(id string, steps, tp int) NewPoint {
		p := NewPoint{ID: id, Method: "eagle3", TP: tp, Runs: 2,
			Argv: []string{"/bin/python", "-m", "sglang.launch_server", "--tp-size", "4"}}
		if steps == 0 {
			p.Method, p.Baseline = "baseline", true
		} else {
			p.NumSteps, p.TopK, p.NumDraftTokens = ip(steps), ip(1), ip(steps+1)
			p.Env = map[string]string{"SGL_X": "1"}
		}
		return p
	}
	id, err := db.CreateSweep(context.Background(),
		NewSweep{Name: name, SpecHash: "abc123", SpecText: "version: 1\nname: " + name + "\n"},
		[]NewHost{{Name: "h4", Address: "h4.example", GPUs: 4, Unit: "sglang.service"}, {Name: "h8", GPUs: 8, Driver: "local"}},
		[]NewPoint{spec("b4", 0, 4), spec("s1", 1, 4), spec("s2", 2, 4), spec("b8", 0, 8), spec("s1t8", 1, 8)})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func okRun(sweepID int64, point string, attempt, conc, rep int, tok float64) Run {
	m := &Metrics{Requests: 64, Completed: 64, DurationS: 10, TotalInputTokens: 65536, TotalOutputTokens: 32768,
		RequestS: 6.4, InputTokS: 6553.6, OutputTokS: tok, TTFTMeanMs: 100, TTFTMedianMs: 90, TTFTP99Ms: 300,
		ITLMeanMs: 10, ITLMedianMs: 9, ITLP99Ms: 30, TPOTMeanMs: 11, TPOTMedianMs: 10, TPOTP99Ms: 31,
		E2EMeanMs: 5000, E2EMedianMs: 4900, E2EP99Ms: 9000}
	if point[0] == 's' {
		m.AcceptLength = fp(2.5)
	}
	return Run{SweepID: sweepID, PointID: point, Attempt: attempt, Concurrency: conc, Repeat: rep, Status: RunOK, Metrics: m}
}
