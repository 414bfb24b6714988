package main

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	_ "github.com/mattn/go-sqlite3" // reads the sweeps' databases

	"github.com/specsweep/specsweep/sweep"
)

// bins builds specsweep and sglangsim once into a temporary directory.
var bins = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "search-bench")
	if err != nil {
		return "", err
	}
	for _, b := range []string{"specsweep", "sglangsim"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, b), "./cmd/"+b).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", b, err, out)
		}
	}
	return dir, nil
})

// realRow runs the profile's spec as a grid and as a climb, each a real sweep of local sglangsim
// processes, and compares them from their databases.
func realRow(name string, scale float64) (row, error) {
	dir, err := bins()
	if err != nil {
		return row{}, err
	}
	p, err := loadProfile(name)
	if err != nil {
		return row{}, err
	}
	env := fmt.Sprintf(`{SGLANGSIM_TIME_SCALE: "%g", SGLANGSIM_LOAD_SECONDS: "%d", SGLANGSIM_WARMUP_SECONDS: "2", SGL_FORCE_SHUTDOWN: "1", SGLANGSIM_PROFILE: %q}`,
		scale, modelLoadSeconds, profileRef(name))
	var res [2]sweepFigures
	var spec *sweep.Spec
	for i, strategy := range []string{sweep.StrategyGrid, sweep.StrategyClimb} {
		s, err := specFor(p, strategy)
		if err != nil {
			return row{}, err
		}
		spec = s
		text := strings.Replace(string(s.Source), "command: [sglangsim]", "command: ["+filepath.Join(dir, "sglangsim")+"]\n  env: "+env, 1)
		specPath := filepath.Join(dir, short(name)+"-"+strategy+".yaml")
		db := filepath.Join(dir, short(name)+"-"+strategy+".db")
		_ = os.Remove(db)
		if err := os.WriteFile(specPath, []byte(text), 0o644); err != nil {
			return row{}, err
		}
		out, err := exec.Command(filepath.Join(dir, "specsweep"), "run", "--db", db, specPath).CombinedOutput()
		if err != nil {
			return row{}, fmt.Errorf("specsweep run (%s): %v\n%s", strategy, err, out)
		}
		if res[i], err = readFigures(db); err != nil {
			return row{}, err
		}
	}
	grid, climb := res[0], res[1]
	var levels []string
	same := true
	for _, c := range spec.Workload.Concurrency {
		g, k := grid.best[c], climb.best[c]
		if g == k {
			levels = append(levels, fmt.Sprintf("c=%d same (%s)", c, grid.label[g]))
			continue
		}
		// Both measured in the grid's run: the configuration climb chose against the grid's best.
		loss := 1 - grid.tokS[k][c]/grid.tokS[g][c]
		ok := loss <= spec.Search.MinGain
		same = same && ok
		verdict := "within min_gain"
		if !ok {
			verdict = "WORSE"
		}
		levels = append(levels, fmt.Sprintf("c=%d %s %.1f%% (%s vs %s)", c, verdict, 100*loss, grid.label[k], grid.label[g]))
	}
	return row{gridPts: grid.points, climbPts: climb.points, gridGPU: grid.gpuSecs, climbGPU: climb.gpuSecs, levels: levels, same: same}, nil
}

// profileRef is the SGLANGSIM_PROFILE value of a profile: its name, or its file's absolute path.
func profileRef(name string) string {
	if strings.Contains(name, "/") {
		if abs, err := filepath.Abs(name); err == nil {
			return abs
		}
	}
	return name
}

// sweepFigures are what one sweep measured.
type sweepFigures struct {
	points  int     // points run (done or failed)
	gpuSecs float64 // sum over those of their time on the host
	best    map[int]string
	tokS    map[string]map[int]float64 // median output tok/s by point and level
	label   map[string]string
}

func readFigures(path string) (sweepFigures, error) {
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		return sweepFigures{}, err
	}
	defer db.Close()
	f := sweepFigures{best: map[int]string{}, tokS: map[string]map[int]float64{}, label: map[string]string{}}
	err = db.QueryRow(`SELECT count(*), coalesce(sum(finished_at - started_at), 0) / 1000.0 FROM point_summary
		WHERE state IN ('done', 'failed')`).Scan(&f.points, &f.gpuSecs)
	if err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	rows, err := db.Query(`SELECT point_id, method, coalesce(num_steps, 0), coalesce(topk, 0), coalesce(num_draft_tokens, 0),
		concurrency, output_tok_s FROM run_summary WHERE status = 'ok' ORDER BY point_id, concurrency`)
	if err != nil {
		return f, fmt.Errorf("%s: %w", path, err)
	}
	defer rows.Close()
	samples := map[string]map[int][]float64{}
	for rows.Next() {
		var id, method string
		var s, k, n, c int
		var tok float64
		if err := rows.Scan(&id, &method, &s, &k, &n, &c, &tok); err != nil {
			return f, err
		}
		if samples[id] == nil {
			samples[id] = map[int][]float64{}
			f.tokS[id] = map[int]float64{}
			f.label[id] = method
			if s > 0 {
				f.label[id] = fmt.Sprintf("%s s=%d k=%d n=%d", method, s, k, n)
			}
		}
		samples[id][c] = append(samples[id][c], tok)
	}
	bestV := map[int]float64{}
	for id, levels := range samples {
		for c, v := range levels {
			m := median(v)
			f.tokS[id][c] = m
			if m > bestV[c] || (m == bestV[c] && id < f.best[c]) {
				bestV[c], f.best[c] = m, id
			}
		}
	}
	return f, rows.Err()
}
