package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/internal/testhost"
)

// BenchmarkPackedSweepOverSSH is bench/pack on a real test host: the same 16-point TP 1 sweep (a
// baseline and EAGLE-3 num_steps 1..15) on one host of 8 simulated GPUs reached over SSH, unpacked
// (one point at a time in the operator's unit) and packed (a systemd unit per slot), one after the
// other; it prints the speedup and the per-point throughput difference between the two runs of each
// point. sglangsim at time scale 0.25 with a 20 s simulated start-up, as bench/pack.
// Run: bench/pack.sh -ssh (go test -run '^$' -bench PackedSweepOverSSH -benchtime 1x ./internal/e2e).
func BenchmarkPackedSweepOverSSH(b *testing.B) {
	h := testhost.Boot(b, 1, testhost.Options{GPUs: 8})[0]
	steps := make([]string, 15)
	for i := range steps {
		steps[i] = fmt.Sprint(i + 1)
	}
	for b.Loop() {
		var wall [2]time.Duration
		var tok [2]map[string]float64
		for i, pack := range []bool{false, true} {
			dir := b.TempDir()
			spec, db := filepath.Join(dir, "spec.yaml"), filepath.Join(dir, "sweep.db")
			text := fmt.Sprintf(`version: 1
name: pack-bench-ssh
hosts:
  - {name: big, address: %q, user: root, identity_file: %q, known_hosts: %q, gpus: 8, pack: %t}
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.6-27B, --host, 0.0.0.0, --port, "31900"]
  env: {SGLANGSIM_TIME_SCALE: "0.25", SGLANGSIM_LOAD_SECONDS: "20", SGL_FORCE_SHUTDOWN: "1"}
  port: 31900
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
matrix: {method: [baseline, eagle3], num_steps: [%s], topk: [1], tp: [1]}
workload: {concurrency: [1, 8], requests: 16, warmup_requests: 2, input_tokens: 256, output_tokens: 128}
`, h.Addr, h.KeyFile, h.KnownHosts, pack, testhost.SimPath, strings.Join(steps, ", "))
			if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			out, err := specsweepCmd(context.Background(), b, "run", "--db", db, spec).CombinedOutput()
			wall[i] = time.Since(t0)
			if err != nil {
				b.Fatalf("sweep (pack %t): %v\n%s", pack, err, tail(string(out), 30))
			}
			tok[i] = levelTokS(b, db)
		}
		var diffs []float64
		for k, a := range tok[0] {
			if p, ok := tok[1][k]; ok && a > 0 {
				diffs = append(diffs, 100*(p/a-1))
			}
		}
		if len(diffs) == 0 {
			b.Fatal("no point-level measured in both runs")
		}
		sort.Float64s(diffs)
		mean, abs := 0.0, 0.0
		for _, d := range diffs {
			mean += d
			abs += math.Abs(d)
		}
		n := float64(len(diffs))
		speedup := wall[0].Seconds() / wall[1].Seconds()
		fmt.Printf("16 points TP 1 on one SSH host of 8 simulated GPUs, time scale 0.25, 20 s start-up simulated\n"+
			"  unpacked: %6.1f s wall\n  packed:   %6.1f s wall\n  speedup:  %.2fx (target >= 6x, limit 8x)\n"+
			"  per-point output tok/s, packed against unpacked, %d point-levels: mean %+.1f%%, mean |diff| %.1f%%, min %+.1f%%, max %+.1f%%\n",
			wall[0].Seconds(), wall[1].Seconds(), speedup, len(diffs), mean/n, abs/n, diffs[0], diffs[len(diffs)-1])
		b.ReportMetric(speedup, "x-speedup")
	}
}

// levelTokS is output tok/s per point and concurrency level of a sweep's database.
func levelTokS(t testing.TB, path string) map[string]float64 {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT point_id, concurrency, output_tok_s FROM run_summary WHERE status = 'ok'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var id string
		var c int
		var v float64
		if err := rows.Scan(&id, &c, &v); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%s/%d", id, c)] = v
	}
	return out
}
