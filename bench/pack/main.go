// Command pack runs the same 16-point TP 1 sweep (a baseline and EAGLE-3 num_steps 1..15) on one
// local host with 8 simulated GPUs, unpacked and packed (hosts[].pack), one after the other, and
// prints the wall-time speedup and the per-point throughput difference between the two runs of the
// same point (the interference the simulator models between servers on other GPUs: none is
// modelled, so what shows is the measurement's own noise and the two cores' contention).
//
//	go run ./bench/pack                    # SGLANGSIM_TIME_SCALE=0.25, 20 s start-up (5 s of wall time)
//	go run ./bench/pack -time-scale 0.5
//
// Only 127.0.0.1 is contacted.
package main

import (
	"database/sql"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	_ "github.com/mattn/go-sqlite3" // reads the sweeps' databases
)

func main() {
	scale := flag.Float64("time-scale", 0.25, "SGLANGSIM_TIME_SCALE")
	load := flag.Float64("load-seconds", 20, "SGLANGSIM_LOAD_SECONDS (simulated)")
	flag.Parse()
	dir, err := os.MkdirTemp("", "pack-bench")
	must(err)
	defer os.RemoveAll(dir)
	for _, b := range []string{"specsweep", "sglangsim"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, b), "./cmd/"+b).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", b, err, out)
			os.Exit(1)
		}
	}
	steps := make([]string, 15)
	for i := range steps {
		steps[i] = fmt.Sprint(i + 1)
	}
	type result struct {
		wall time.Duration
		tok  map[string]float64 // point id/level -> output tok/s
	}
	var res [2]result
	for i, pack := range []bool{false, true} {
		spec := fmt.Sprintf(`version: 1
name: pack-bench
hosts: [{name: big, driver: local, gpus: 8, pack: %t}]
server:
  command: [%s]
  args: [--model-path, /models/Qwen3.6-27B, --host, 127.0.0.1, --port, "31900"]
  env: {SGLANGSIM_TIME_SCALE: "%g", SGLANGSIM_LOAD_SECONDS: "%g", SGLANGSIM_GPUS: "8", SGL_FORCE_SHUTDOWN: "1"}
  port: 31900
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3]
matrix: {method: [baseline, eagle3], num_steps: [%s], topk: [1], tp: [1]}
workload: {concurrency: [1, 8], requests: 16, warmup_requests: 2, input_tokens: 256, output_tokens: 128}
`, pack, filepath.Join(dir, "sglangsim"), *scale, *load, strings.Join(steps, ", "))
		specPath := filepath.Join(dir, fmt.Sprintf("pack-%t.yaml", pack))
		db := filepath.Join(dir, fmt.Sprintf("pack-%t.db", pack))
		must(os.WriteFile(specPath, []byte(spec), 0o644))
		t0 := time.Now()
		if out, err := exec.Command(filepath.Join(dir, "specsweep"), "run", "--db", db, specPath).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "specsweep run (pack %t): %v\n%s", pack, err, out)
			os.Exit(1)
		}
		res[i].wall = time.Since(t0)
		res[i].tok = readTok(db)
	}
	fmt.Printf("16 points TP 1 (baseline + EAGLE-3 steps 1..15), one host of 8 simulated GPUs, time scale %g, start-up %g s simulated\n", *scale, *load)
	fmt.Printf("  unpacked: %6.1f s wall\n  packed:   %6.1f s wall\n  speedup:  %.2fx (target >= 6x, limit 8x)\n",
		res[0].wall.Seconds(), res[1].wall.Seconds(), res[0].wall.Seconds()/res[1].wall.Seconds())
	var diffs []float64
	for k, a := range res[0].tok {
		if b, ok := res[1].tok[k]; ok && a > 0 {
			diffs = append(diffs, 100*(b/a-1))
		}
	}
	sort.Float64s(diffs)
	mean, absMean := 0.0, 0.0
	for _, d := range diffs {
		mean += d
		absMean += math.Abs(d)
	}
	n := float64(len(diffs))
	fmt.Printf("  per-point output tok/s, packed against unpacked, %d point-levels: mean %+.1f%%, mean |diff| %.1f%%, min %+.1f%%, max %+.1f%%\n",
		len(diffs), mean/n, absMean/n, diffs[0], diffs[len(diffs)-1])
}

func readTok(path string) map[string]float64 {
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	must(err)
	defer db.Close()
	rows, err := db.Query(`SELECT point_id, concurrency, output_tok_s FROM run_summary WHERE status = 'ok'`)
	must(err)
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var id string
		var c int
		var tok float64
		must(rows.Scan(&id, &c, &tok))
		out[fmt.Sprintf("%s/%d", id, c)] = tok
	}
	return out
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
