package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
)

// The lossless output check (docs/spec.md, "output_check") in the results table, `status` and
// `runs --best`: a point that does not answer as the baseline of its tp does is shown first and
// never named best.

// mismatch is one point whose output check failed, as the block tells it.
type mismatch struct {
	label     string // "eagle3 s=3 k=1 n=4 tp=4"
	agreement *float64
	evidence  *report.OutputEvidence
	failed    bool // failed before its load (fail_on_mismatch)
}

// excerptWords is how many words of each answer the block quotes from the divergence on.
const excerptWords = 6

// printMismatches writes the block that leads the results and `status` when points mismatch:
// one line per point with its agreement against the reference's own and the threshold, where the
// answers first differ and a few words of each from there. Nothing when none mismatches.
func printMismatches(w io.Writer, ms []mismatch) error {
	if len(ms) == 0 {
		return nil
	}
	fmt.Fprintf(w, "Output check: %d point(s) do NOT answer as the baseline does (lossless check failed):\n", len(ms))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, m := range ms {
		e := m.evidence
		agree := "agreement " + fmtRatio(m.agreement)
		if e != nil {
			agree += fmt.Sprintf(" (the reference agrees with itself %s, threshold %s)", fmtRatio(e.ReferenceAgreement), fmtRatio(e.Threshold))
		}
		where := "no evidence recorded"
		if e != nil && e.Diverged {
			where = fmt.Sprintf("prompt %d differs from word %d: reference %s, got %s", e.Prompt+1, e.Word+1,
				quoteFrom(e.Reference, e.Word), quoteFrom(e.Got, e.Word))
		}
		if m.failed {
			where += "; failed before its load (fail_on_mismatch)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", m.label, agree, where)
	}
	return tw.Flush()
}

// quoteFrom quotes a few words of an answer from word n on, "..." around what it leaves out; an
// answer that ends before word n is "(ends)".
func quoteFrom(text string, n int) string {
	f := strings.Fields(text)
	if n >= len(f) {
		return "(ends)"
	}
	q := strings.Join(f[n:min(len(f), n+excerptWords)], " ")
	if n > 0 {
		q = "..." + q
	}
	if n+excerptWords < len(f) {
		q += "..."
	}
	return strconv.Quote(q)
}

func fmtRatio(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64)
}

// checkCell is a point's output check in a CHECK column: ref, ok, MISMATCH or "-" (not checked).
func checkCell(result string) string {
	switch result {
	case store.OutputCheckReference:
		return "ref"
	case store.OutputCheckOK:
		return "ok"
	case store.OutputCheckMismatch:
		return "MISMATCH"
	}
	return "-"
}

// sweepMismatches are the mismatching points of a loaded sweep, in plan order.
func sweepMismatches(s *report.Sweep) []mismatch {
	var out []mismatch
	for _, p := range s.Mismatches() {
		out = append(out, mismatch{label: fmt.Sprintf("%s tp=%d", p.Label(), p.TP), agreement: p.OutputAgreement,
			evidence: p.OutputEvidence, failed: p.FailureClass == string(store.FailOutputMismatch)})
	}
	return out
}

// storedMismatches are the mismatching points of a sweep's stored points and output checks.
func storedMismatches(pts []store.Point, checks map[string]store.PointOutputs) []mismatch {
	var out []mismatch
	for _, p := range pts {
		c, ok := checks[p.ID]
		if !ok || c.Check != store.OutputCheckMismatch {
			continue
		}
		out = append(out, mismatch{label: pointLabel(p), agreement: c.Agreement, evidence: report.ParseOutputEvidence(c.Evidence),
			failed: p.FailureClass == store.FailOutputMismatch})
	}
	return out
}
