package report

import (
	"fmt"
	"strings"
)

// The report's recommendation (docs/report.md, "Recommendation"): the default mix (equal time at
// each measured level), no SLO, every tp competing, as `specsweep recommend SWEEP` prints it. The
// summary says it in sentences (every format) and Live carries it whole (the dashboard's card).

// liveRecommendation is the report's recommendation of s, its summary sentences and its JSON.
func liveRecommendation(s *Sweep) ([]string, RecommendationJSON) {
	r, err := Recommend(s, RecommendOptions{})
	if err != nil {
		var words []string
		if len(s.Levels) > 0 {
			words = []string{fmt.Sprintf("No recommendation of one configuration for equal time at each measured concurrency: %s.", err)}
		}
		return words, NoRecommendationJSON(s, RecommendOptions{}, err)
	}
	return recommendSentences(r), r.JSON()
}

// recommendSentences says r in the summary.
func recommendSentences(r *Recommendation) []string {
	w := r.Winner
	var b strings.Builder
	fmt.Fprintf(&b, "Recommended for %s: %s (point %s), %.1f tok/s over the mix (the time-weighted mean of its median output tok/s)",
		MixWords(r.Traffic, r.DefaultTraffic), pointLabel(w.Point), w.Point.ID, w.TokS)
	var gains []string
	switch {
	case w.Point.Baseline:
		gains = append(gains, "a baseline: speculative decoding does not pay for this mix")
	case r.Baseline != nil:
		gains = append(gains, fmt.Sprintf("%s over the baseline at tp=%d (%s)", fmtPct(r.OverBaseline.Pct), w.Point.TP, NoiseWords(r.OverBaseline.Noise)))
	default:
		gains = append(gains, fmt.Sprintf("no baseline at tp=%d measured at every level to compare with", w.Point.TP))
	}
	if r.RunnerUp != nil {
		gains = append(gains, fmt.Sprintf("%s over the runner-up, %s (%s)", fmtPct(r.OverRunnerUp.Pct), pointLabel(r.RunnerUp.Point), NoiseWords(r.OverRunnerUp.Noise)))
	}
	fmt.Fprintf(&b, ", %s", strings.Join(gains, ", "))
	var behind []string
	for _, st := range r.Levels {
		if !st.IsBest() {
			behind = append(behind, fmt.Sprintf("c=%d (%s vs %s, %s)", st.Concurrency, fmtPct(st.Pct), pointLabel(st.Best.Point), NoiseWords(st.Noise)))
		}
	}
	if len(behind) == 0 {
		fmt.Fprintf(&b, "; of the %d configuration(s) measured at every level, the best at each.", r.Candidates)
	} else {
		fmt.Fprintf(&b, "; of the %d configuration(s) measured at every level, not the best at %s.", r.Candidates, strings.Join(behind, ", "))
	}
	out := []string{b.String()}
	if d := r.Deploy; d.Args != nil {
		s := "Deploy it with these SGLang arguments"
		if d.Command != nil {
			s += " after the server command"
		}
		s += ": " + d.ArgsLine()
		if len(d.Env) > 0 {
			s += " (environment: " + d.EnvLine() + ")"
		}
		out = append(out, s+".")
	}
	if n := r.Next; n != nil {
		out = append(out, fmt.Sprintf("It sits at the edge of the swept range at c=%s: %s; `specsweep recommend` prints the next sweep as a spec fragment.",
			joinInts(n.Levels), strings.Join(n.Why, "; ")))
	}
	out = append(out, "`specsweep recommend SWEEP --traffic c=1:0.2,c=16:0.8 --slo ttft_p99=2s` recommends for another traffic mix (`specsweep observe` measures a server's) and latency targets.")
	return out
}

// fmtPct is a signed percentage: "+35.2%", "-2.1%".
func fmtPct(v float64) string { return fmt.Sprintf("%+.1f%%", v) }

// NoiseWords is a noise verdict for a sentence: "clear", "within noise", "noise unknown: one
// repeat".
func NoiseWords(n Noise) string {
	if n == NoiseUnknown {
		return "noise unknown: one repeat"
	}
	return string(n)
}
