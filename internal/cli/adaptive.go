package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/specsweep/specsweep/hostctl"
	"github.com/specsweep/specsweep/report"
)

func adaptiveCmd() command {
	return newCommand("adaptive", "SWEEP",
		"Fit SGLang's adaptive speculative schedule (--speculative-adaptive-config) to a sweep's measured curves, and say how to start the server with it.", adaptiveRun).
		withExamples("specsweep adaptive -o adaptive.json nightly",
			"specsweep adaptive 3 > adaptive.json   # the schedule on stdout, the explanation on stderr")
}

type adaptiveOptions struct {
	DB    string // --db
	Out   string // -o: the config file to write, "" for stdout
	Sweep string // SWEEP
}

func (o *adaptiveOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", dbUsage)
	fs.StringVar(&o.Out, "o", "", "write the schedule to `FILE` (default: stdout, the explanation on stderr)")
}

func (o *adaptiveOptions) args(pos []string) (err error) {
	o.Sweep, err = oneArg(pos, "SWEEP")
	return err
}

// adaptiveRun fits the schedule (report.FitAdaptive), writes it and explains each slot.
func adaptiveRun(ctx context.Context, env Env, o *adaptiveOptions) error {
	st, sw, err := openRecorded(ctx, env, o.DB, o.Sweep, "adaptive")
	if err != nil {
		return err
	}
	defer st.Close()
	s, err := report.LoadID(ctx, st, sw.ID)
	if err != nil {
		return err
	}
	fit, err := report.FitAdaptive(s)
	if err != nil {
		return exitError{code: ExitFailure, err: err}
	}
	explain, path := env.Stdout, o.Out
	if o.Out == "" {
		explain, path = env.Stderr, "adaptive.json"
		if _, err := env.Stdout.Write(fit.JSON()); err != nil {
			return err
		}
	} else if err := os.WriteFile(o.Out, fit.JSON(), 0o644); err != nil {
		return fmt.Errorf("adaptive: write %s: %w", o.Out, err)
	}
	fmt.Fprintf(explain, "SGLang adaptive schedule for %s (%s, tp %d) from sweep %s (id %d):\n", fit.Method, fit.Algorithm, fit.TP, s.Name, s.ID)
	tw := tabwriter.NewWriter(explain, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BATCH SIZES\tLEVEL\tCANDIDATE STEPS\tBEST\tTOK/S\tWHY THE OTHERS\t")
	for i, sl := range fit.Slots {
		var steps, why []string
		for _, st := range sl.Steps {
			steps = append(steps, fmt.Sprint(st))
			if w, ok := sl.Why[st]; ok {
				why = append(why, fmt.Sprintf("%d: %s", st, w))
			}
		}
		slices.Sort(why)
		sizes := fmt.Sprintf("%d+", sl.BatchSize)
		if i+1 < len(fit.Slots) {
			sizes = fmt.Sprintf("%d-%d", sl.BatchSize, fit.Slots[i+1].BatchSize-1)
		}
		fmt.Fprintf(tw, "%s\tc=%d\t%s\t%d\t%.1f\t%s\t\n", sizes, sl.Level, strings.Join(steps, ","), sl.Best, sl.BestTokS, strings.Join(why, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if fit.MaxRunning > 0 {
		fmt.Fprintf(explain, "--max-running-requests %d: SGLang caps a speculative server at %d running requests unless it is given, and the slot without speculation serves levels up to %d, where the baseline ran them all.\n",
			fit.MaxRunning, report.SpecMaxRunning, fit.MaxRunning)
	}
	argv := fit.ServerArgs(path)
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = hostctl.ShellQuote(a)
	}
	fmt.Fprintf(explain, "Each level's slot serves the batch sizes from the geometric middle between it and the level below (SGLang routes a batch, padded to a CUDA-graph size, to the slot with the largest key not above it). Steps 0 is no speculation at those batch sizes. Start the server with (SGLang refuses a --speculative-num-steps outside the candidates):\n  %s\n",
		strings.Join(quoted, " "))
	if o.Out != "" {
		fmt.Fprintf(explain, "Wrote %s.\n", o.Out)
	}
	return nil
}
