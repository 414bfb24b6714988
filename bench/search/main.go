// Command search runs grid and climb side by side on the same specs (num_steps 1..10, topk 1 and
// one tree shape, concurrency 1, 16 and 64) for every built-in simulator profile and the synthetic
// profiles of sim/testdata/profiles, and prints per spec: points run, GPU time (the sum of the
// points' time on hosts) and whether climb's best configuration per concurrency level equals the
// grid's or is within min_gain of it.
//
//	go run ./bench/search              # model figures: the simulator's scheduler in virtual time
//	go run ./bench/search -real        # real sweeps: specsweep on local sglangsim processes
//
// The model mode computes each point's figures with the simulator's own scheduler (no noise), so it
// shows the search's decisions alone; the real mode runs both strategies with the real binaries over
// real sockets (only 127.0.0.1 is contacted).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/specsweep/specsweep/sim"
	"github.com/specsweep/specsweep/sweep"
)

func main() {
	real := flag.Bool("real", false, "run real sweeps on local sglangsim processes instead of the model")
	scale := flag.Float64("time-scale", 0.02, "SGLANGSIM_TIME_SCALE of the real sweeps")
	only := flag.String("profile", "", "run only this profile (a built-in name or a file)")
	flag.Parse()

	profiles := append([]string(nil), sim.ProfileNames()...)
	files, _ := filepath.Glob("sim/testdata/profiles/*.json")
	for _, f := range files {
		if b := filepath.Base(f); b == "early-plateau.json" || b == "late-peak.json" || b == "second-rise.json" {
			profiles = append(profiles, f)
		}
	}
	if *only != "" {
		profiles = []string{*only}
	}
	fmt.Printf("%-22s %8s %8s %10s %10s %6s  %s\n", "profile", "grid pts", "climb pts", "grid GPU", "climb GPU", "ratio", "best per level (climb vs grid)")
	worst := 0.0
	allSame := true
	for _, name := range profiles {
		var r row
		var err error
		if *real {
			r, err = realRow(name, *scale)
		} else {
			r, err = modelRow(name)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			if dir, err := bins(); *real && err == nil {
				os.RemoveAll(dir)
			}
			os.Exit(1)
		}
		ratio := r.climbGPU / r.gridGPU
		worst = max(worst, ratio)
		allSame = allSame && r.same
		fmt.Printf("%-22s %8d %8d %9.0fs %9.0fs %5.0f%%  %s\n", short(name), r.gridPts, r.climbPts, r.gridGPU, r.climbGPU, 100*ratio, strings.Join(r.levels, "; "))
	}
	if *real {
		if dir, err := bins(); err == nil {
			os.RemoveAll(dir)
		}
	}
	fmt.Printf("\nworst GPU-time ratio %.0f%% (target at most 50%%); same answer (or within min_gain) at every level: %v\n", 100*worst, allSame)
}

type row struct {
	gridPts, climbPts int
	gridGPU, climbGPU float64
	levels            []string
	same              bool
}

func short(name string) string { return strings.TrimSuffix(filepath.Base(name), ".json") }

func loadProfile(name string) (*sim.Profile, error) {
	if strings.Contains(name, "/") {
		return sim.LoadProfile(name)
	}
	return sim.PickProfile(name, "")
}

// specFor is the benchmark's spec for a profile: its reference tp, num_steps 1..10, topk 1 and the
// tree shape topk 4 with 8 draft tokens, concurrency 1, 16 and 64.
func specFor(p *sim.Profile, strategy string) (*sweep.Spec, error) {
	text := fmt.Sprintf(`version: 1
name: search-bench
hosts: [{name: h1, driver: local, gpus: %[1]d}]
server:
  command: [sglangsim]
  args: [--model-path, /models/%[2]s, --port, "30000"]
methods:
  baseline: []
  eagle3: [--speculative-algorithm, EAGLE3, --speculative-draft-model-path, /models/eagle3]
matrix:
  method: [baseline, eagle3]
  num_steps: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
  topk: [1, 4]
  num_draft_tokens: [auto, 8]
  tp: [%[1]d]
workload: {concurrency: [1, 16, 64], requests: 64, warmup_requests: 2, input_tokens: 512, output_tokens: 256}
search: {strategy: %[3]s, min_gain: 0.02, patience: 1, probe: [10]}
`, p.RefTP, p.Name, strategy)
	return sweep.Parse("search-bench.yaml", []byte(text))
}

// compare says per level whether climb's best is the grid's, or within min_gain of it.
func compare(spec *sweep.Spec, plan *sweep.Plan, all map[string]sweep.PointResult, grid, climb []string) ([]string, bool) {
	label := map[string]string{}
	for _, pt := range plan.Points {
		label[pt.ID] = pt.Setting()
	}
	gb, cb := bestPer(spec.Workload.Concurrency, grid, all), bestPer(spec.Workload.Concurrency, climb, all)
	var out []string
	same := true
	for _, c := range spec.Workload.Concurrency {
		g, k := gb[c], cb[c]
		switch {
		case g == k:
			out = append(out, fmt.Sprintf("c=%d same (%s)", c, label[g]))
		default:
			gv, kv := median(all[g].Levels[c].OutputTokS), median(all[k].Levels[c].OutputTokS)
			loss := 1 - kv/gv
			ok := loss <= spec.Search.MinGain
			same = same && ok
			verdict := "within min_gain"
			if !ok {
				verdict = "WORSE"
			}
			out = append(out, fmt.Sprintf("c=%d %s %.1f%% (%s vs %s)", c, verdict, 100*loss, label[k], label[g]))
		}
	}
	return out, same
}

func modelRow(name string) (row, error) {
	p, err := loadProfile(name)
	if err != nil {
		return row{}, err
	}
	spec, err := specFor(p, sweep.StrategyClimb)
	if err != nil {
		return row{}, err
	}
	plan := spec.Plan()
	all, secs, err := modelResults(p, spec, plan)
	if err != nil {
		return row{}, err
	}
	o, err := replay(spec, plan, all, secs)
	if err != nil {
		return row{}, err
	}
	var grid []string
	gridSecs := 0.0
	for _, pt := range plan.Points {
		grid = append(grid, pt.ID)
		gridSecs += secs[pt.ID]
	}
	if os.Getenv("SEARCH_BENCH_VERBOSE") != "" {
		for _, d := range o.order {
			fmt.Println("  run:  ", d.Reason)
		}
		for _, d := range o.pruned {
			fmt.Println("  prune:", d.Reason)
		}
	}
	levels, same := compare(spec, plan, all, grid, o.ran)
	return row{gridPts: len(grid), climbPts: len(o.ran), gridGPU: gridSecs, climbGPU: o.gpuSecs, levels: levels, same: same}, nil
}
