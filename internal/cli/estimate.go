package cli

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/specsweep/specsweep/internal/argparse"
	"github.com/specsweep/specsweep/store"
	"github.com/specsweep/specsweep/sweep"
)

// The simulator's environment the estimate reads (docs/sglangsim.md): its time scale, and its load
// and warmup in simulated seconds (their defaults there).
const (
	simTimeScale      = "SGLANGSIM_TIME_SCALE"
	simLoadSeconds    = "SGLANGSIM_LOAD_SECONDS"
	simWarmupSeconds  = "SGLANGSIM_WARMUP_SECONDS"
	simDefaultLoad    = 20.0
	simDefaultWarmup  = 2.0
	simDrainSeconds   = 5.0 // the drain check after the load, scaled too
	assumedStreamTokS = 100.0
)

// planEstimate is plan's rough duration for the spec's points and the words saying what it is
// based on: this model's load times and decode speeds measured in the database when it has any
// (points whose server ran the same --model-path, and the same simulator time scale, or none),
// else the simulator's own figures at its time scale when the server is sglangsim with
// SGLANGSIM_TIME_SCALE, else the assumptions of docs/spec.md ("Estimate").
func planEstimate(ctx context.Context, spec *sweep.Spec, points []sweep.Point, timings []store.PointTiming, dbFile string) (time.Duration, string) {
	a := sweep.DefaultAssumptions()
	model, _ := argparse.Last(spec.Server.Args, argparse.ModelPath)
	scaleText := spec.Server.Env[simTimeScale]
	var basis []string
	sim := false
	if scale, err := strconv.ParseFloat(scaleText, 64); err == nil && scale > 0 {
		sim = true
		load := envSeconds(spec.Server.Env, simLoadSeconds, simDefaultLoad) + envSeconds(spec.Server.Env, simWarmupSeconds, simDefaultWarmup)
		a.Load, a.Stop = seconds(load*scale), seconds(simDrainSeconds*scale)
		a.StreamTokS = assumedStreamTokS / scale
		basis = append(basis, fmt.Sprintf("the simulator's time scale (%s %s: a %s load and %s output tok/s per stream, %gx real time)",
			simTimeScale, scaleText, roundDuration(a.Load), strconv.FormatFloat(a.StreamTokS, 'f', -1, 64), 1/scale))
	}

	// What this model measured, at this time scale.
	var loads []float64
	perStream := map[int][]float64{}
	runs := 0
	for _, t := range timings {
		if m, _ := argparse.Last(t.Argv, argparse.ModelPath); m != model || t.Env[simTimeScale] != scaleText {
			continue
		}
		if t.LoadS > 0 {
			loads = append(loads, t.LoadS)
		}
		for c, toks := range t.TokS {
			for _, tok := range toks {
				perStream[c] = append(perStream[c], tok/float64(c))
				runs++
			}
		}
	}
	var measured []string
	if len(loads) > 0 {
		a.Load = seconds(median(loads))
		measured = append(measured, fmt.Sprintf("the median load time of %d measured point(s), %s", len(loads), roundDuration(a.Load)))
	}
	levels := 0
	for _, c := range spec.Workload.Concurrency {
		if s, ok := perStream[c]; ok {
			if a.LevelTokS == nil {
				a.LevelTokS = map[int]float64{}
			}
			a.LevelTokS[c] = median(s)
			levels++
		}
	}
	if levels > 0 {
		measured = append(measured, fmt.Sprintf("the decode speed of %d measured run(s) at %d of the %d concurrency levels",
			runs, levels, len(spec.Workload.Concurrency)))
	}
	all := len(loads) > 0 && levels == len(spec.Workload.Concurrency)
	switch {
	case len(measured) > 0:
		what := "model " + model
		if model == "" {
			what = "servers without --model-path"
		}
		if scaleText != "" {
			what += " at " + simTimeScale + " " + scaleText
		}
		m := strings.Join(measured, " and ") + " of " + what + " in " + dbFile
		switch {
		case all:
			basis = []string{m}
		case sim:
			basis = []string{m, "the rest from " + basis[0]}
		default:
			basis = []string{m, `the rest on the assumptions of docs/spec.md ("Estimate")`}
		}
	case !sim:
		basis = []string{`the assumptions of docs/spec.md ("Estimate"): a 90s load and 100 output tok/s per stream; ` +
			"a database with runs of this model (--db) makes it a measured one"}
	}
	return spec.EstimateWith(points, a), strings.Join(basis, "; ")
}

// storedTimings reads what the database measured, for plan: nothing when it does not exist and
// was not named (--db), an error when the named one does not.
func storedTimings(ctx context.Context, env Env, flagValue string) ([]store.PointTiming, string, error) {
	dbFile := dbPath(env, flagValue)
	if _, err := os.Stat(dbFile); err != nil && flagValue == "" && env.Getenv("SPECSWEEP_DB") == "" {
		return nil, dbFile, nil
	}
	st, err := store.OpenReadOnly(ctx, dbFile)
	if err != nil {
		return nil, dbFile, err
	}
	defer st.Close()
	t, err := st.PointTimings(ctx)
	return t, dbFile, err
}

// envSeconds is env[key] as seconds, def when it is unset or not a number.
func envSeconds(env map[string]string, key string, def float64) float64 {
	if v, err := strconv.ParseFloat(env[key], 64); err == nil && v >= 0 {
		return v
	}
	return def
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// median of a non-empty list.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
