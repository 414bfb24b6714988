package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/specsweep/specsweep/report"
)

func recommendCmd() command {
	return newCommand("recommend", "SWEEP",
		"The one configuration of a sweep for a traffic mix (share of time at each concurrency) and latency SLOs, and how to deploy it.", recommendRun).
		withExamples("specsweep recommend quickstart                                  # equal time at each measured level",
			"specsweep recommend 3 --traffic c=1:0.2,c=16:0.5,c=64:0.3",
			"specsweep recommend 3 --traffic @mix.txt --slo ttft_p99=2s,itl_p50=30ms  # the mix `specsweep observe` wrote",
			"specsweep recommend 3 --tp 4 --format json")
}

type recommendOptions struct {
	DB      string // --db
	Traffic string // --traffic: a mix, or @FILE
	SLO     string // --slo
	TP      int    // --tp: 0 for every tp
	Format  string // --format: recommendFormats
	Sweep   string // SWEEP
}

// recommendFormats are recommend's --format values.
var recommendFormats = []string{"table", "json"}

func (o *recommendOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.DB, "db", "", dbUsage)
	fs.StringVar(&o.Traffic, "traffic", "", "the traffic `MIX`: the share of time at each concurrency, c=1:0.2,c=16:0.5,c=64:0.3, or @FILE (default: equal shares over the measured levels)")
	fs.StringVar(&o.SLO, "slo", "", "latency `SLOS` every level of the mix must meet, e.g. ttft_p99=2s,itl_p50=30ms (metrics: "+strings.Join(report.SLOMetrics(), ", ")+")")
	fs.IntVar(&o.TP, "tp", 0, "only configurations of this `TP` compete (default: every tp)")
	fs.StringVar(&o.Format, "format", "table", formatUsage(recommendFormats, false))
}

func (o *recommendOptions) args(pos []string) (err error) {
	o.Sweep, err = oneArg(pos, "SWEEP")
	return err
}

// recommendRun prints the recommendation of o.Sweep for o's mix and SLOs.
func recommendRun(ctx context.Context, env Env, o *recommendOptions) error {
	format, err := outputFormat(o.Format, false, recommendFormats...)
	if err != nil {
		return err
	}
	if o.TP < 0 || o.TP > maxTP {
		return usagef("--tp %d: want a tp from 1 to %d (0: every tp)", o.TP, maxTP)
	}
	opt, err := mixOptions(o.Traffic, o.SLO)
	if err != nil {
		return err
	}
	opt.TP = o.TP
	st, sw, err := openRecorded(ctx, env, o.DB, o.Sweep, "recommend")
	if err != nil {
		return err
	}
	defer st.Close()
	s, err := report.LoadID(ctx, st, sw.ID)
	if err != nil {
		return fmt.Errorf("loading sweep %s (id %d): %w", sw.Name, sw.ID, err)
	}
	note, err := recordedWords("recommend", sw, countRuns(s))
	if err != nil {
		return err
	}
	r, err := report.Recommend(s, opt)
	if err != nil {
		return fmt.Errorf("sweep %s (id %d): %w", s.Name, s.ID, err)
	}
	if note != "" {
		fmt.Fprintln(env.Stderr, note) // a note for people: stdout stays the recommendation
	}
	if format == "json" {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r.JSON())
	}
	return printRecommendation(env.Stdout, r)
}

// maxTP is the largest tp a spec may sweep (sweep.Limits, matrix.tp[]).
const maxTP = 128

// readTraffic reads --traffic: the mix itself, or @FILE, at most report.MaxTrafficBytes.
func readTraffic(v string) (report.Traffic, error) {
	name, isFile := strings.CutPrefix(v, "@")
	text := v
	if isFile {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("--traffic @%s: reading the mix: %w", name, err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, report.MaxTrafficBytes+1))
		if err != nil {
			return nil, fmt.Errorf("--traffic @%s: reading the mix: %w", name, err)
		}
		if len(b) > report.MaxTrafficBytes {
			return nil, usagef("--traffic @%s: the file is larger than %d KiB: a mix has at most %d terms", name, report.MaxTrafficBytes>>10, report.MaxTrafficTerms)
		}
		text = string(b)
	}
	t, err := report.ParseTraffic(text)
	if err != nil {
		if isFile {
			return nil, usagef("--traffic @%s: %v", name, err)
		}
		return nil, usagef("--traffic %s: %v", v, err)
	}
	return t, nil
}

// printRecommendation is the table format: the winner, how to deploy it, its gains, its standing
// at each level, what did not compete and the next sweep.
func printRecommendation(w io.Writer, r *report.Recommendation) error {
	win := r.Winner
	p := win.Point
	fmt.Fprintf(w, "Recommended for sweep %s (id %d), %s", r.Sweep.Name, r.Sweep.ID, report.MixWords(r.Traffic, r.DefaultTraffic))
	if len(r.SLOs) > 0 {
		var slos []string
		for _, o := range r.SLOs {
			slos = append(slos, o.Metric+"<="+o.Max.String())
		}
		fmt.Fprintf(w, ", SLOs %s at every level", strings.Join(slos, ", "))
	}
	if r.TP != 0 {
		fmt.Fprintf(w, ", tp %d only", r.TP)
	}
	fmt.Fprintf(w, ":\n  %s tp=%d (point %s): %.1f tok/s over the mix (Σ share × median output tok/s; %d configuration(s) competed)\n",
		p.Label(), p.TP, p.ID, win.TokS, r.Candidates)

	d := r.Deploy
	switch {
	case d.Args == nil:
		fmt.Fprintln(w, "\nDeploy: the point's server argv is not recorded.")
	default:
		what := "SGLang's arguments after the server command"
		if d.Command == nil {
			what = "the server's whole command line (the sweep's spec is not stored: its command is not known)"
		}
		fmt.Fprintf(w, "\nDeploy with %s (the point's argv as planned; secrets %s):\n  %s\n", what, report.Redacted, d.ArgsLine())
		if d.Command != nil {
			fmt.Fprintf(w, "  command in the sweep: %s\n", strings.Join(d.Command, " "))
		}
		if len(d.Env) > 0 {
			fmt.Fprintf(w, "  environment: %s\n", d.EnvLine())
		}
	}

	fmt.Fprintln(w, "\nExpected gain over the mix:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	switch {
	case p.Baseline:
		fmt.Fprintln(tw, "  over the baseline\t-\tthe winner is a baseline: speculative decoding does not pay for this mix")
	case r.Baseline == nil:
		fmt.Fprintf(tw, "  over the baseline\t-\tno baseline at tp=%d was measured at every level of the mix\n", p.TP)
	default:
		fmt.Fprintf(tw, "  over the baseline (tp=%d, %.1f tok/s)\t%+.1f%%\t%s\n", p.TP, r.Baseline.TokS, r.OverBaseline.Pct, report.NoiseWords(r.OverBaseline.Noise))
	}
	if r.RunnerUp != nil {
		ru := r.RunnerUp.Point
		fmt.Fprintf(tw, "  over the runner-up, %s tp=%d (%.1f tok/s)\t%+.1f%%\t%s\n", ru.Label(), ru.TP, r.RunnerUp.TokS, r.OverRunnerUp.Pct, report.NoiseWords(r.OverRunnerUp.Noise))
	} else {
		fmt.Fprintln(tw, "  over the runner-up\t-\tno other configuration competed")
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nAt each level of the mix (median output tok/s; the level's best among the configurations that competed):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  LEVEL\tSHARE\tTOK/S\tSTANDING")
	for _, st := range r.Levels {
		standing := "the best"
		if !st.IsBest() {
			standing = fmt.Sprintf("%+.1f%% vs %s tp=%d (%.1f tok/s, %s)", st.Pct, st.Best.Point.Label(), st.Best.Point.TP, st.Best.TokS.Median, report.NoiseWords(st.Noise))
		}
		fmt.Fprintf(tw, "  c=%d\t%.1f%%\t%.1f\t%s\n", st.Concurrency, 100*st.Share, st.Cell.TokS.Median, standing)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(r.Dropped) > 0 || r.Unmeasured > 0 {
		fmt.Fprintf(w, "\nDid not compete (%d):\n", len(r.Dropped)+r.Unmeasured)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, dr := range r.Dropped {
			fmt.Fprintf(tw, "  %s tp=%d (%s)\t%s\n", dr.Point.Label(), dr.Point.TP, dr.Point.ID, dr.Reason)
		}
		if r.Unmeasured > 0 {
			fmt.Fprintf(tw, "  %d point(s)\tno figure at any level of the mix (failed, pruned, or not run yet)\n", r.Unmeasured)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	if n := r.Next; n != nil {
		fmt.Fprintf(w, "\nNext sweep: the recommendation sits at the edge of the swept range at c=%s: %s. As a spec fragment:\n",
			intList(n.Levels), strings.Join(n.Why, "; "))
		for _, line := range strings.Split(strings.TrimRight(n.Spec, "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
	return nil
}

// intList is "1, 16, 64".
func intList(v []int) string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = strconv.Itoa(x)
	}
	return strings.Join(out, ", ")
}

// mixOptions reads --traffic (a mix or @FILE) and --slo, as recommend, verify and apply take them.
func mixOptions(traffic, slo string) (report.RecommendOptions, error) {
	var opt report.RecommendOptions
	var err error
	if traffic != "" {
		if opt.Traffic, err = readTraffic(traffic); err != nil {
			return opt, err
		}
	}
	if slo != "" {
		if opt.SLOs, err = report.ParseSLOs(slo); err != nil {
			return opt, usagef("--slo %s: %v", slo, err)
		}
	}
	return opt, nil
}
