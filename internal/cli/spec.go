package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/specsweep/specsweep/sweep"
)

func validateCmd() command {
	return newCommand("validate", "SPEC",
		"Parse and validate a sweep spec; print every error (and warning) as SPEC:LINE:COL: message.", validateRun).
		withExamples("specsweep validate sweep.yaml")
}

type validateOptions struct {
	Spec string // SPEC
}

func (o *validateOptions) flags(fs *flag.FlagSet) {}

func (o *validateOptions) args(pos []string) (err error) {
	o.Spec, err = oneArg(pos, "SPEC")
	return err
}

// validateRun validates the spec, printing its warnings and a line with its counts.
func validateRun(ctx context.Context, env Env, o *validateOptions) error {
	spec, err := loadSpec(o.Spec)
	if err != nil {
		return err
	}
	// Warnings (an option given twice) do not fail validation: the spec runs as SGLang reads it,
	// which each warning spells out.
	for _, w := range spec.Warnings {
		fmt.Fprintln(env.Stderr, w)
	}
	p := spec.Plan()
	if err := checkOnThisMachine(ctx, env, spec, p.Points, o.Spec); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s: ok: sweep %q, %d points (%d skipped), %d runs\n",
		o.Spec, spec.Name, len(p.Points), len(p.Skipped), p.Runs)
	return nil
}

func planCmd() command {
	return newCommand("plan", "SPEC",
		"Print the expanded plan: points in run order, skipped combinations with reasons, run count, rough duration.", planRun).
		withExamples("specsweep plan sweep.yaml",
			"specsweep plan --db specsweep.db sweep.yaml  # the estimate from this model's measured times",
			"specsweep plan --format json sweep.yaml | jq -r '.points[].id'")
}

type planOptions struct {
	DB     string // --db: measured load times and decode speeds for the estimate
	Format string // --format: table or json
	JSON   bool   // --json: --format json
	Spec   string // SPEC
}

// planFormats are plan's --format values: the text plan, or the plan as one JSON object.
var planFormats = []string{"table", "json"}

func (o *planOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", "database `PATH` whose measured load times and decode speeds of the model the duration estimate uses (default $SPECSWEEP_DB or ./specsweep.db, when it exists)")
	fs.StringVar(&o.Format, "format", "table", formatUsage(planFormats, true)+"; json is the plan as one object")
	fs.BoolVar(&o.JSON, "json", false, "the same as --format json")
}

func (o *planOptions) args(pos []string) (err error) {
	o.Spec, err = oneArg(pos, "SPEC")
	return err
}

// planRun prints the expanded plan of the spec.
func planRun(ctx context.Context, env Env, o *planOptions) error {
	format, err := outputFormat(o.Format, o.JSON, planFormats...)
	if err != nil {
		return err
	}
	spec, err := loadSpec(o.Spec)
	if err != nil {
		return err
	}
	p := spec.Plan()
	if err := checkOnThisMachine(ctx, env, spec, p.Points, o.Spec); err != nil {
		return err
	}
	if len(spec.Workload.Datasets) > 0 {
		p.SpecHash = spec.Hash() // with the prompt sets' content hashes, read by the checks
	}
	if format == "json" {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	}
	timings, dbFile, err := storedTimings(ctx, env, o.DB)
	if err != nil {
		return err
	}
	d, basis := planEstimate(ctx, spec, p.Points, timings, dbFile)
	printPlan(env, spec, p, d, basis)
	return nil
}

// checkOnThisMachine prints machineChecks' warnings and fails with its errors.
func checkOnThisMachine(ctx context.Context, env Env, spec *sweep.Spec, points []sweep.Point, path string) error {
	errs, warns := machineChecks(ctx, spec, points, path)
	for _, w := range warns {
		fmt.Fprintln(env.Stderr, w)
	}
	if len(errs) > 0 {
		return exitError{code: ExitFailure, err: errors.New(strings.Join(errs, "\n"))}
	}
	return nil
}

// loadSpec loads and validates a spec; validation problems become exit 1 with every error printed.
func loadSpec(path string) (*sweep.Spec, error) {
	spec, err := sweep.Load(path)
	if err == nil {
		// A prompt set's relative path is the spec file's folder's, as a local command's.
		spec.ResolveSetPaths(specDir(path))
		return spec, nil
	}
	var list sweep.ErrorList
	if errors.As(err, &list) {
		return nil, exitError{code: ExitFailure, err: fmt.Errorf("%w\n%s: %d error(s)", list, path, len(list))}
	}
	return nil, err
}

// printPlan writes the text plan, with the duration estimate d and the words of its basis.
func printPlan(env Env, spec *sweep.Spec, p *sweep.Plan, d time.Duration, basis string) {
	w := env.Stdout
	fmt.Fprintf(w, "sweep %s  spec_hash %s\n\n", p.Name, shortHash(p.SpecHash))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tID\tMETHOD\tSTEPS\tTOPK\tDRAFT\tTP")
	for i, pt := range p.Points {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\n", i+1, pt.ID, pt.Method,
			optInt(pt.NumSteps), optInt(pt.TopK), optInt(pt.NumDraftTokens), pt.TP)
	}
	tw.Flush()
	if len(p.Skipped) > 0 {
		fmt.Fprintf(w, "\nskipped (%d):\n", len(p.Skipped))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "METHOD\tSTEPS\tTOPK\tDRAFT\tTP\tREASON")
		for _, s := range p.Skipped {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", s.Method, optInt(s.NumSteps), optInt(s.TopK),
				orDash(s.NumDraftTokens), s.TP, s.Reason)
		}
		tw.Flush()
	}
	if len(p.Spans) > 0 {
		// Which machines a multi-node point takes, and the rendezvous every rank is given.
		fmt.Fprintf(w, "\npoints that span nodes (one SGLang rank per node: --nnodes, --node-rank, --dist-init-addr):\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "HOST\tTP\tNODES\tRANKS 0..\tDIST-INIT-ADDR")
		for _, sp := range p.Spans {
			ranks := strings.Join(sp.Ranks, ", ")
			if ranks == "" {
				ranks = "the job's nodes"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d x %d GPUs\t%s\t%s\n", sp.Host, sp.TP, sp.Nodes, sp.GPUsPerNode, ranks, sp.DistInit)
		}
		tw.Flush()
	}
	if len(p.Notes) > 0 {
		fmt.Fprintf(w, "\nnotes:\n")
		for _, n := range p.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	levels := len(spec.Workload.Concurrency)
	if words := searchWords(spec, len(p.Points)); words != "" {
		// The runs and the duration are of every planned point: the most the search may run.
		fmt.Fprintf(w, "\n%s.\n%d points x %d concurrency levels x %d repeats = at most %d runs; rough duration at most %s\n",
			words, len(p.Points), levels, spec.Workload.Repeats, p.Runs, roundDuration(d))
	} else {
		fmt.Fprintf(w, "\n%d points x %d concurrency levels x %d repeats = %d runs; rough duration %s\n",
			len(p.Points), levels, spec.Workload.Repeats, p.Runs, roundDuration(d))
	}
	fmt.Fprintf(w, "  based on %s\n", basis)
	if pr := spec.Workload.Precision; pr != nil {
		fmt.Fprintf(w, "  %s: the duration is the most, at the cap\n", pr.Words(spec.Workload.Requests))
	}
}

func optInt(v *int) string {
	if v == nil {
		return "-"
	}
	return strconv.Itoa(*v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func roundDuration(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute).String()
	case d >= time.Minute:
		return d.Round(time.Second).String()
	default:
		return d.Round(100 * time.Millisecond).String()
	}
}
