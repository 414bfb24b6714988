package report_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
)

// The output check's texts of checkDB: the prompt, and the reference's and e2's answers, which
// differ from word 11 (0-based) on; special characters of every format on both sides.
const (
	checkPrompt = "Explain in plain words how a hash table finds a key. (Question 3.)"
	checkRef    = "A hash table stores keys in buckets.\nThe key is hashed to an index & the bucket at that index is searched for key_name with 100% certainty [always]."
	checkGot    = "A hash table stores keys in buckets.\nThe key is hashed into <b>a list</b> | of 50% *stars* and {braces} ~ ^ $ #."
	// f answers the first three words of the reference and stops.
	checkShort = "A hash table"
)

// checkDB records through the store's API a sweep with output checks: at tp 4 the baseline b is
// the reference, e1 and e3 agree with it, e2 (the fastest at every level, and on the Pareto
// front's corner) mismatches, and f mismatched and failed before its load (fail_on_mismatch); at
// tp 8, e8 has no baseline and is not checked. Two repeats at concurrency 1 and 16.
func checkDB(t *testing.T) (*store.DB, int64) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "check.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ip := func(i int) *int { return &i }
	argv := []string{"x", "--speculative-algorithm", "EAGLE3"}
	pts := []store.NewPoint{{ID: "b", Method: "baseline", Baseline: true, TP: 4, Runs: 4}}
	for s := 1; s <= 4; s++ {
		id := "e" + string(rune('0'+s))
		if s == 4 {
			id = "f"
		}
		pts = append(pts, store.NewPoint{ID: id, Method: "eagle3", NumSteps: ip(s), TopK: ip(1), NumDraftTokens: ip(s + 1),
			TP: 4, Runs: 4, Argv: argv})
	}
	pts = append(pts, store.NewPoint{ID: "e8", Method: "eagle3", NumSteps: ip(5), TopK: ip(1), NumDraftTokens: ip(6), TP: 8, Runs: 4, Argv: argv})
	id, err := db.CreateSweep(ctx, store.NewSweep{Name: "checked", SpecHash: "h", SpecText: "x"},
		[]store.NewHost{{Name: "a", Driver: "local", GPUs: 8}}, pts)
	if err != nil {
		t.Fatal(err)
	}
	tok := map[string]float64{"b": 100, "e1": 150, "e2": 300, "e3": 190, "e8": 120}
	tpot := map[string]float64{"b": 12, "e1": 10, "e2": 4, "e3": 9, "e8": 11}
	outputs := json.RawMessage(`{"prompts":["p"],"runs":[["a"]]}`)
	for _, p := range pts {
		att, err := db.ClaimPoint(ctx, id, p.ID, "a")
		if err != nil {
			t.Fatal(err)
		}
		if p.TP == 4 {
			if err := db.SetPointOutputs(ctx, id, p.ID, att, outputs); err != nil {
				t.Fatal(err)
			}
		}
		if p.ID == "f" {
			if err := db.FinishPoint(ctx, id, "f", att, store.PointFinish{State: store.PointFailed, FailureClass: store.FailOutputMismatch,
				FailureDetail: "output check: mismatch: prompt 3 differs from word 4 (agreement 0.20)"}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		n := 0
		for _, c := range []int{1, 16} {
			for rep := 1; rep <= 2; rep++ {
				n++
				al := 2.5
				m := &store.Metrics{Requests: 8, Completed: 8, OutputTokS: tok[p.ID] * float64(c) * (1 + 0.01*float64(rep)),
					TPOTMedianMs: tpot[p.ID], TTFTP99Ms: 40}
				if !p.Baseline {
					m.AcceptLength = &al
				}
				var fin *store.PointFinish
				if n == 4 {
					fin = &store.PointFinish{State: store.PointDone}
				}
				if err := db.RecordRunAndFinish(ctx, store.Run{SweepID: id, PointID: p.ID, Attempt: att, Concurrency: c, Repeat: rep,
					Status: store.RunOK, Metrics: m}, fin); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	fp := func(f float64) *float64 { return &f }
	ev := func(v map[string]any) json.RawMessage {
		v["reference_agreement"], v["threshold"] = 1.0, 0.9
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		pid string
		chk store.OutputCheck
	}{
		{"b", store.OutputCheck{Result: store.OutputCheckReference, Agreement: fp(1),
			Evidence: ev(map[string]any{"agreement": 1, "diverged": false, "prompt": 0, "word": 0})}},
		{"e1", store.OutputCheck{Result: store.OutputCheckOK, Agreement: fp(0.97), Evidence: ev(map[string]any{"agreement": 0.97,
			"diverged": true, "prompt": 5, "word": 40, "reference": "r", "got": "g", "prompt_text": "p"})}},
		{"e2", store.OutputCheck{Result: store.OutputCheckMismatch, Agreement: fp(0.31), Evidence: ev(map[string]any{"agreement": 0.31,
			"diverged": true, "prompt": 2, "word": 11, "reference": checkRef, "got": checkGot, "prompt_text": checkPrompt})}},
		{"e3", store.OutputCheck{Result: store.OutputCheckOK, Agreement: fp(1), Evidence: ev(map[string]any{"agreement": 1,
			"diverged": false, "prompt": 0, "word": 0})}},
		{"f", store.OutputCheck{Result: store.OutputCheckMismatch, Agreement: fp(0.2), Evidence: ev(map[string]any{"agreement": 0.2,
			"diverged": true, "prompt": 2, "word": 3, "reference": checkRef, "got": checkShort, "prompt_text": checkPrompt})}},
	} {
		if err := db.SetOutputCheck(ctx, id, c.pid, c.chk); err != nil {
			t.Fatal(err)
		}
	}
	return db, id
}

// TestMismatchIsNeverBest: a mismatching point, though the fastest everywhere, is never the best,
// runner-up or plateau of a level, nor on the Pareto front, nor a sweep's best in a comparison.
func TestMismatchIsNeverBest(t *testing.T) {
	db, _ := checkDB(t)
	s, err := report.Load(context.Background(), db, "checked")
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, p := range s.Mismatches() {
		bad = append(bad, p.ID)
	}
	if strings.Join(bad, ",") != "e2,f" {
		t.Fatalf("mismatches %v, want e2,f", bad)
	}
	if e := s.Points[2].OutputEvidence; e == nil || e.Word != 11 || e.Got != checkGot || e.PromptText != checkPrompt {
		t.Fatalf("e2's evidence: %+v", e)
	}
	bests := report.BestPerLevel(s)
	if len(bests) != 4 {
		t.Fatalf("%d bests, want 4 (2 tps x 2 levels)", len(bests))
	}
	for _, b := range bests {
		for what, c := range map[string]*report.Cell{"best": b.Best, "runner-up": b.RunnerUp, "plateau": b.Plateau} {
			if c != nil && c.Point.Mismatch() {
				t.Errorf("tp %d c=%d: the %s %s mismatches", b.TP, b.Concurrency, what, c.Point.ID)
			}
		}
		if b.TP == 4 && (b.Best.Point.ID != "e3" || b.Mismatched != 1 || b.Candidates != 3) {
			t.Errorf("tp 4 c=%d: best %s, %d mismatched, %d candidates; want e3, 1, 3", b.Concurrency, b.Best.Point.ID, b.Mismatched, b.Candidates)
		}
	}
	for _, p := range report.Pareto(s) {
		if p.Cell.Point.Mismatch() {
			t.Errorf("the Pareto points hold %s at c=%d", p.Cell.Point.ID, p.Cell.Concurrency)
		}
	}
	if f := report.Front(report.Pareto(s)); len(f) == 0 {
		t.Error("no Pareto front")
	}
	for _, bp := range report.Compare(s, s).Bests {
		if bp.A.Best.Point.Mismatch() || bp.B.Best.Point.Mismatch() {
			t.Errorf("comparison at tp %d c=%d: a mismatching best", bp.TP, bp.Concurrency)
		}
	}
	files, err := report.Write(s, report.Options{Format: "md", Dir: t.TempDir(), Compare: s})
	if err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(files[0])
	if !strings.Contains(string(md), "| eagle3 s=2 k=1 n=3 (output MISMATCH in A and B) | 4 | 1 |") {
		t.Errorf("md: the matching points do not mark the mismatching one:\n%s", md)
	}
}

// TestOutputCheckReport: every format has the output check first (before the best configurations):
// each point's result per tp, and for each mismatching point the prompt and both answers side by
// side, marked from the divergent word on, escaped; the best table never names e2; the LaTeX
// document and a paper that \input's the fragment compile.
func TestOutputCheckReport(t *testing.T) {
	db, _ := checkDB(t)
	s, err := report.Load(context.Background(), db, "checked")
	if err != nil {
		t.Fatal(err)
	}
	refHead, refTail := "The key is hashed", "to an index"
	gotTail := "into"
	for _, f := range report.Formats {
		dir := t.TempDir()
		files, err := report.Write(s, report.Options{Format: f, Dir: dir})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		doc := string(b)
		var plain string
		switch f {
		case "html":
			plain = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'", "&amp;", "&").Replace(doc)
			for _, want := range []string{refHead + " <mark>" + refTail + " &amp; the bucket", "hashed <mark>" + gotTail + " &lt;b&gt;a list&lt;/b&gt; | of 50% *stars*",
				`<a href="#check">Output check (2 MISMATCH)</a>`, `<em class="end"> [the answer ends here]</em>`, `<td class="bad">MISMATCH</td>`} {
				if !strings.Contains(doc, want) {
					t.Errorf("html lacks %q", want)
				}
			}
			if strings.Contains(doc, "<b>a list") {
				t.Error("html: an answer's markup is not escaped")
			}
			for _, svg := range regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(doc, -1) {
				parseXML(t, "inline svg", []byte(svg))
			}
		case "md":
			plain = strings.NewReplacer(`\_`, "_", `\*`, "*", `\|`, "|", `\~`, "~", `\$`, "$", "&lt;", "<", "&gt;", ">", `\\`, `\`).Replace(doc)
			for _, want := range []string{"| reference: baseline, tp=4 (point b) | eagle3 s=2 k=1 n=3, tp=4 |\n|---|---|\n",
				"buckets.<br>The key is hashed **" + refTail + " & the bucket", "hashed **" + gotTail + " &lt;b&gt;a list&lt;/b&gt; \\| of 50% \\*stars\\*",
				"A hash table *[the answer ends here]*", "Prompt 3: " + checkPrompt} {
				if !strings.Contains(doc, want) {
					t.Errorf("md lacks %q", want)
				}
			}
		case "tex":
			plain = strings.NewReplacer(`\%`, "%", `\_`, "_", `\&`, "&", `\allowbreak{}`, "", `\newline `, "\n", `\{`, "{", `\}`, "}",
				`\textless{}`, "<", `\textgreater{}`, ">", `\textbar{}`, "|", `\textasciitilde{}`, "~", `\textasciicircum{}`, "^", `\$`, "$", `\#`, "#").Replace(doc)
			for _, want := range []string{`\label{tab:outputcheck}`, `buckets.\newline The key is hashed {\bfseries to an index \& the bucket`,
				`hashed {\bfseries into \textless{}b\textgreater{}a list\textless{}/b\textgreater{} \textbar{} of 50\% *stars* and \{braces\} \textasciitilde{} \textasciicircum{} \$ \#.}`,
				`A hash table \emph{[the answer ends here]}`, `{}A hash table`} {
				if !strings.Contains(doc, want) {
					t.Errorf("tex lacks %q", want)
				}
			}
		}
		check := strings.Index(plain, "Output check")
		best := strings.Index(plain, "Best configuration per concurrency level")
		if check < 0 || best < 0 || check > best {
			t.Errorf("%s: the output check (at %d) does not come before the best configurations (at %d)", f, check, best)
		}
		for _, want := range []string{"Output check FAILED: 2 of 4 checked point(s) do NOT answer as the baseline of their tp does (eagle3 s=2 k=1 n=3 tp=4, eagle3 s=4 k=1 n=5 tp=4)",
			checkPrompt, "A hash table stores keys in buckets.", "to an index & the bucket at that index is searched for key_name with 100% certainty [always].",
			"into <b>a list</b> | of 50% *stars* and {braces} ~ ^ $ #.",
			"eagle3 s=2 k=1 n=3, tp=4 (point e2): prompt 3 differs from word 12; agreement 0.31, below the threshold 0.90 (the reference agrees with itself 1.00)",
			"no reference at this tp", "MISMATCH (failed before its load)", "MISMATCH 0.31", "ok 0.97", "reference 1.00",
			"Output check: 1 measured point(s) mismatch (eagle3 s=2 k=1 n=3 tp=4). They are left out of the ranking"} {
			if !strings.Contains(plain, want) {
				t.Errorf("%s lacks %q", f, want)
			}
		}
		// The best table never names e2: at tp 4 every level's best is e3, its runner-up e1.
		rows := plain[best:]
		rows = rows[:strings.Index(rows, "Output check: 1 measured point(s) mismatch")] // the note names it
		if strings.Contains(rows, "s=2 k=1 n=3") || strings.Count(rows, "eagle3 s=3 k=1 n=4") != 2 {
			t.Errorf("%s: the best table names the mismatching point, or not e3 at tp 4:\n%s", f, rows)
		}
		if f == "tex" {
			paper := filepath.Join(t.TempDir(), "paper.tex")
			frag, err := report.Write(s, report.Options{Format: "tex", Dir: dir, Fragment: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(paper, []byte(`\documentclass{article}
\usepackage{booktabs}
\usepackage{graphicx}
\usepackage{array}
\usepackage{longtable}
\newcommand{\specsweepdir}{`+dir+`/}
\begin{document}
\section{Results}
\input{`+frag[0]+`}
\end{document}
`), 0o644); err != nil {
				t.Fatal(err)
			}
			pdflatex, err := exec.LookPath("pdflatex")
			if err != nil {
				t.Log("pdflatex is not installed: the LaTeX structure is checked, compiling is skipped")
				continue
			}
			for _, tf := range []string{files[0], paper} {
				cmd := exec.Command(pdflatex, "-interaction=nonstopmode", "-halt-on-error", filepath.Base(tf))
				cmd.Dir = filepath.Dir(tf)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("pdflatex %s: %v\n%s", tf, err, tail(out, 30))
				}
			}
		}
	}
}

// TestOutputCheckCharts: the throughput and speedup charts ring the mismatching point and say so;
// the Pareto chart says it left it out.
func TestOutputCheckCharts(t *testing.T) {
	db, _ := checkDB(t)
	s, err := report.Load(context.Background(), db, "checked")
	if err != nil {
		t.Fatal(err)
	}
	charts, err := report.Charts(s)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range charts {
		switch c.Name {
		case "throughput-eagle3-tp4", "speedup-eagle3-tp4":
			seen[c.Name] = true
			svg, err := c.Render("svg")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(c.Answers, "Red rings (s2): the output check failed") || !strings.Contains(string(svg), "output MISMATCH (not lossless)") {
				t.Errorf("%s: no mark of the mismatching point: %s", c.Name, c.Answers)
			}
		case "throughput-eagle3-tp8":
			if strings.Contains(c.Answers, "Red rings") {
				t.Errorf("%s rings a point: %s", c.Name, c.Answers)
			}
		case "pareto":
			seen[c.Name] = true
			if !strings.Contains(c.Answers, "Left out: eagle3 s2, whose output check failed") {
				t.Errorf("pareto: %s", c.Answers)
			}
		}
	}
	if len(seen) != 3 {
		t.Errorf("charts seen: %v", seen)
	}
}

// TestUncheckedSweepHasNoOutputCheck: a sweep without any output check (older sweeps, or
// output_check: false) has no output-check section, column, sentence or chart mark.
func TestUncheckedSweepHasNoOutputCheck(t *testing.T) {
	db, _ := searchDB(t, false)
	s, err := report.Load(context.Background(), db, "grid")
	if err != nil {
		t.Fatal(err)
	}
	if s.Checked() || len(s.Mismatches()) != 0 {
		t.Fatalf("checked %v, %d mismatches", s.Checked(), len(s.Mismatches()))
	}
	for _, f := range report.Formats {
		files, err := report.Write(s, report.Options{Format: f, Dir: t.TempDir()})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		b, _ := os.ReadFile(files[0])
		for _, no := range []string{"Output check", "output check", "MISMATCH", "mismatch", "lossless", "Red rings"} {
			if strings.Contains(string(b), no) {
				t.Errorf("%s: an unchecked sweep's report says %q", f, no)
			}
		}
	}
}
