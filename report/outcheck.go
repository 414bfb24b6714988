package report

import (
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/specsweep/specsweep/store"
)

// The output check's part of a report (docs/spec.md, "output_check"; docs/report.md): a table of
// every point's check per tp, and for each point that mismatches its divergent answer beside the
// reference's. A sweep without any check has neither, so its report reads as before.

// divergence is one mismatching point's first divergent answer beside the reference's.
type divergence struct {
	Title string // the point and how far it agrees
	// Prompt is "Prompt 3: ..." ("" when the prompt was not recorded).
	Prompt string
	// RefLabel and GotLabel head the two columns.
	RefLabel, GotLabel string
	// Each answer in two parts: before the divergent word and from it on (the part to mark).
	// A tail "" means the answer ends there.
	RefHead, RefTail, GotHead, GotTail string
	// Missing says why there is no text ("" when there is).
	Missing string
}

// Excerpts: the words kept before the divergence and from it on (the answers are short at the
// default max_tokens of 64; a long one is cut with "...").
const (
	excerptBefore = 40
	excerptAfter  = 200
)

const (
	checkMismatch = "MISMATCH"
	endOfAnswer   = "[the answer ends here]"
)

// checkWord is a check result as the tables show it.
func checkWord(result string) string {
	switch result {
	case store.OutputCheckMismatch:
		return checkMismatch
	case "":
		return "not checked"
	}
	return result
}

func fmtAgreement(a *float64) string {
	if a == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *a)
}

// where spells the earliest divergence, 1-based: "prompt 3, word 12"; "none (the same answers)"
// when the answers agree.
func (e *OutputEvidence) where() string {
	if e == nil {
		return "-"
	}
	if !e.Diverged {
		return "none (the same answers)"
	}
	return fmt.Sprintf("prompt %d, word %d", e.Prompt+1, e.Word+1)
}

// refAgreement is the reference's agreement with itself for p: from p's evidence, else the
// reference point's agreement at its tp.
func (s *Sweep) refAgreement(p *Point) *float64 {
	if e := p.OutputEvidence; e != nil && e.ReferenceAgreement != nil {
		return e.ReferenceAgreement
	}
	if r := s.Reference(p.TP); r != nil {
		return r.OutputAgreement
	}
	return nil
}

func threshold(p *Point) *float64 {
	if e := p.OutputEvidence; e != nil {
		return e.Threshold
	}
	return nil
}

// checkOrder ranks the rows of the output check table: the points that do not pass first (the
// mismatching ones, then those not checked), then the references and the points that agree.
func checkOrder(result string) int {
	switch result {
	case store.OutputCheckMismatch:
		return 0
	case store.OutputCheckReference:
		return 2
	case store.OutputCheckOK:
		return 3
	}
	return 1
}

// checkSummary is the report's sentence on the output check; "" when nothing was checked. When
// no point mismatches it is the check's one line (the table is left out), naming the points that
// could not be checked; otherwise it names the mismatching points, which the table shows first.
func checkSummary(s *Sweep) string {
	if !s.Checked() {
		return ""
	}
	checked := 0
	for _, p := range s.Points {
		if p.OutputCheck == store.OutputCheckOK || p.OutputCheck == store.OutputCheckMismatch {
			checked++
		}
	}
	bad := s.Mismatches()
	if len(bad) == 0 {
		return passedSummary(s, checked)
	}
	labels := make([]string, len(bad))
	for i, p := range bad {
		labels[i] = fmt.Sprintf("%s tp=%d", p.Label(), p.TP)
	}
	return fmt.Sprintf("Output check FAILED: %d of %d checked point(s) do NOT answer as the baseline of their tp does (%s). "+
		"Their speed is still listed, but they are never named best, runner-up or plateau, nor put on the Pareto front; "+
		"their divergent answers are under \"Output check\".", len(bad), checked, strings.Join(labels, ", "))
}

// passedSummary is the output check's one line when no point mismatches: how many points produced
// the baseline's output, on how many prompts, and which points were not checked and why.
func passedSummary(s *Sweep, ok int) string {
	how := "fixed prompts, greedy"
	if s.CheckPrompts > 0 {
		how = fmt.Sprintf("%d prompts each, greedy", s.CheckPrompts)
	}
	var out string
	switch ok {
	case 0:
		out = "Output check: no point has been compared with the baseline of its tp yet (only the baseline answered)."
	case 1:
		out = fmt.Sprintf("Output check: the one checked point produced the baseline's output (%s): lossless.", how)
	default:
		out = fmt.Sprintf("Output check: all %d points produced the baseline's output (%s): lossless.", ok, how)
	}
	var noRef, failed, noAnswer []string
	for _, p := range s.Points {
		if p.OutputCheck != "" || p.State == string(store.PointPruned) {
			continue
		}
		l := fmt.Sprintf("%s tp=%d", p.Label(), p.TP)
		switch {
		case p.State == string(store.PointFailed):
			failed = append(failed, l)
		case s.Reference(p.TP) == nil:
			noRef = append(noRef, l)
		default:
			noAnswer = append(noAnswer, l)
		}
	}
	var not []string
	for _, g := range []struct {
		pts  []string
		what string
	}{{noRef, "without a baseline at its tp"}, {failed, "that failed before answering"}, {noAnswer, "that has not answered (yet)"}} {
		if len(g.pts) > 0 {
			not = append(not, fmt.Sprintf("%d point(s) %s (%s)", len(g.pts), g.what, listSome(g.pts, 5)))
		}
	}
	if len(not) > 0 {
		out += " Not checked: " + strings.Join(not, "; ") + "."
	}
	return out
}

// listSome joins the first n of v, saying how many more there are.
func listSome(v []string, n int) string {
	if len(v) <= n {
		return strings.Join(v, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(v[:n], ", "), len(v)-n)
}

// checkTable lists every point's output check when some point mismatches: the mismatching points
// first, then those not checked, the references (with their agreement with themselves) and the
// points that agree, each group by tp. No rows when no point mismatches: the summary's one line
// (checkSummary) says the check passed.
func checkTable(s *Sweep) Table {
	t := Table{Title: "Output check",
		Head: []string{"point", "configuration", "tp", "check", "agreement", "reference self-agreement", "threshold", "first divergence"},
		Code: []bool{true}, Num: []bool{false, false, true, false, true, true, true, false}, Wide: true,
		Note: "Before its load every point answers fixed prompts greedily (temperature 0); the baseline of its tp answers them twice, all at once in order and then last first in batches of half the size, " +
			"and is the reference: its agreement is with itself (greedy decoding is not bit-exact across batch shapes). " +
			"Agreement is the mean over prompts of the common prefix of the two answers over the reference answer's length, in words. " +
			"A point mismatches (it is not lossless) when its agreement is below the threshold, self - max(0.1, 2 x (1 - self)). " +
			"Not checked: no baseline answered at that tp, or the point did not answer (yet)."}
	if len(s.Mismatches()) == 0 {
		return t
	}
	var pts []*Point
	for _, p := range s.Points {
		if p.State != string(store.PointPruned) {
			pts = append(pts, p)
		}
	}
	sort.SliceStable(pts, func(i, j int) bool {
		if a, b := checkOrder(pts[i].OutputCheck), checkOrder(pts[j].OutputCheck); a != b {
			return a < b
		}
		return pts[i].TP < pts[j].TP
	})
	for _, p := range pts {
		row := []string{p.ID, p.Label(), fmt.Sprint(p.TP), checkWord(p.OutputCheck), fmtAgreement(p.OutputAgreement), "-",
			fmtAgreement(threshold(p)), "-"}
		switch p.OutputCheck {
		case store.OutputCheckReference:
			row[5] = fmtAgreement(p.OutputAgreement)
			if e := p.OutputEvidence; e != nil && e.Diverged {
				row[7] = e.where() + " (between its own two answers)"
			} else if e != nil {
				row[7] = "none (its two answers are the same)"
			}
		case store.OutputCheckOK, store.OutputCheckMismatch:
			row[5] = fmtAgreement(s.refAgreement(p))
			row[7] = p.OutputEvidence.where()
		default:
			if s.Reference(p.TP) == nil {
				row[7] = "no reference at this tp"
			}
		}
		if p.State == string(store.PointFailed) && p.FailureClass == string(store.FailOutputMismatch) {
			row[3] += " (failed before its load)"
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// divergences are the mismatching points' first divergent answers beside the reference's.
func divergences(s *Sweep) []divergence {
	var out []divergence
	for _, p := range s.Mismatches() {
		d := divergence{Title: fmt.Sprintf("%s, tp=%d (point %s): agreement %s, below the threshold %s (the reference agrees with itself %s)",
			p.Label(), p.TP, p.ID, fmtAgreement(p.OutputAgreement), fmtAgreement(threshold(p)), fmtAgreement(s.refAgreement(p))),
			RefLabel: fmt.Sprintf("reference (baseline, tp=%d)", p.TP), GotLabel: fmt.Sprintf("%s, tp=%d", p.Label(), p.TP)}
		if r := s.Reference(p.TP); r != nil {
			d.RefLabel = fmt.Sprintf("reference: %s, tp=%d (point %s)", r.Label(), r.TP, r.ID)
		}
		e := p.OutputEvidence
		switch {
		case e == nil:
			d.Missing = "No evidence was recorded for this check."
		case !e.Diverged:
			d.Missing = "The recorded evidence shows no divergent answer."
		default:
			d.Title = fmt.Sprintf("%s, tp=%d (point %s): prompt %d differs from word %d; agreement %s, below the threshold %s (the reference agrees with itself %s)",
				p.Label(), p.TP, p.ID, e.Prompt+1, e.Word+1, fmtAgreement(p.OutputAgreement), fmtAgreement(threshold(p)), fmtAgreement(s.refAgreement(p)))
			if e.PromptText != "" {
				d.Prompt = fmt.Sprintf("Prompt %d: %s", e.Prompt+1, e.PromptText)
			}
			d.RefHead, d.RefTail = excerpt(e.Reference, e.Word)
			d.GotHead, d.GotTail = excerpt(e.Got, e.Word)
		}
		out = append(out, d)
	}
	return out
}

// splitAtWord splits text before its n-th whitespace-separated word (0-based), keeping the text's
// own spacing; the tail is "" when the text has n words or fewer.
func splitAtWord(text string, n int) (head, tail string) {
	word := 0
	inSpace := true
	for i, r := range text {
		space := unicode.IsSpace(r)
		if inSpace && !space {
			if word == n {
				return text[:i], text[i:]
			}
			word++
		}
		inSpace = space
	}
	return text, ""
}

// excerpt splits an answer at the divergent word, trimmed, keeping at most excerptBefore words
// before it and excerptAfter from it on ("..." marks a cut).
func excerpt(text string, word int) (head, tail string) {
	text = strings.TrimSpace(text)
	head, tail = splitAtWord(text, word)
	if word > excerptBefore {
		_, head = splitAtWord(head, word-excerptBefore)
		head = "... " + head
	}
	if rest, cut := splitAtWord(tail, excerptAfter); cut != "" {
		tail = strings.TrimRightFunc(rest, unicode.IsSpace) + " ..."
	}
	return head, strings.TrimRightFunc(tail, unicode.IsSpace)
}
