package report_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
)

// oddDB records, through the store's API, a sweep whose names and evidence hold every character
// that HTML, Markdown, SVG or LaTeX treat specially, plus a point that never ran.
func oddDB(t *testing.T) *store.DB {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "odd.db")
	db, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	three, one, four := 3, 1, 4
	pts := []store.NewPoint{
		{ID: "b", Method: `base<&>"'`, Baseline: true, TP: 2, Runs: 2},
		{ID: "e", Method: `e3_%$#{}~^\|*`, NumSteps: &three, TopK: &one, NumDraftTokens: &four, TP: 2, Runs: 2},
		{ID: "f", Method: "oom`[x](y)", NumSteps: &three, TopK: &one, NumDraftTokens: &four, TP: 2, Runs: 2},
		{ID: "p", Method: "never", NumSteps: &one, TopK: &one, NumDraftTokens: &three, TP: 2, Runs: 2},
	}
	id, err := db.CreateSweep(ctx, store.NewSweep{Name: "odd", SpecHash: "h<a>sh", SpecText: "x"},
		[]store.NewHost{{Name: "h&1", Driver: "local", GPUs: 2}}, pts)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1_800_000_000, 0)
	for i, pid := range []string{"b", "e"} {
		att, err := db.ClaimPoint(ctx, id, pid, "h&1")
		if err != nil {
			t.Fatal(err)
		}
		prov, _ := json.Marshal(map[string]any{"hostname": "<host>", "engine_version": "0.5.9&", "gpus": []map[string]any{{"name": "H100 <SXM>", "driver": "550", "memory_mb": 81559}}})
		if err := db.SetPointInfo(ctx, id, pid, att, store.PointInfo{Provenance: prov}); err != nil {
			t.Fatal(err)
		}
		for j, c := range []int{1, 8} {
			al := 2.5
			m := &store.Metrics{Requests: 8, Completed: 8, OutputTokS: float64(100*(i+1)*c) + 0.25, TPOTMedianMs: 10 / float64(i+1), TTFTP99Ms: 50}
			if i == 1 {
				m.AcceptLength = &al
			}
			var fin *store.PointFinish
			if j == 1 {
				fin = &store.PointFinish{State: store.PointDone}
			}
			if err := db.RecordRunAndFinish(ctx, store.Run{SweepID: id, PointID: pid, Attempt: att, Concurrency: c, Repeat: 1,
				Status: store.RunOK, Metrics: m, StartedAt: t0, FinishedAt: t0.Add(time.Second)}, fin); err != nil {
				t.Fatal(err)
			}
		}
	}
	att, err := db.ClaimPoint(ctx, id, "f", "h&1")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.FinishPoint(ctx, id, "f", att, store.PointFinish{State: store.PointFailed, FailureClass: "oom",
		FailureDetail: "out of memory <b>&amp;</b> 100% $HOME #1 ~x^y_z {a} \\par\n\x1b[31mCUDA out of memory\x1b[0m: ünïcode ✓ \"quoted\" | pipe * star `tick`\n\\end{document}"}); err != nil {
		t.Fatal(err)
	}
	return db
}

func TestOddNamesAndEvidenceAreEscaped(t *testing.T) {
	db := oddDB(t)
	defer db.Close()
	s, err := report.Load(context.Background(), db, "odd")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Points) != 4 || len(s.Failures()) != 1 {
		t.Fatalf("%d points, %d failures", len(s.Points), len(s.Failures()))
	}
	for _, f := range report.Formats {
		dir := t.TempDir()
		files, err := report.Write(s, report.Options{Format: f, Dir: dir})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		doc, _ := os.ReadFile(files[0])
		for _, c := range files[1:] {
			if strings.HasSuffix(c, ".svg") {
				b, _ := os.ReadFile(c)
				parseXML(t, c, b)
			}
		}
		switch f {
		case "html":
			for _, svg := range regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(string(doc), -1) {
				parseXML(t, "inline svg", []byte(svg))
			}
			for _, raw := range []string{"<b>&amp;</b>", `base<&>`, "<host>", "<SXM>"} {
				if strings.Contains(string(doc), raw) {
					t.Errorf("html: %q not escaped", raw)
				}
			}
			if !strings.Contains(string(doc), "&lt;b&gt;&amp;amp;&lt;/b&gt;") || !strings.Contains(string(doc), "1× H100 &lt;SXM&gt;") {
				t.Errorf("html: escaped evidence or GPU missing")
			}
		case "md":
			if strings.Contains(string(doc), "<b>") || strings.Contains(string(doc), "<host>") || strings.Contains(string(doc), "[x](y)") {
				t.Errorf("md: raw HTML or a link from the data")
			}
		case "tex":
			if strings.Contains(string(doc), `\end{document}`+"\n") && strings.Count(string(doc), `\end{document}`) != 1 {
				t.Errorf("tex: evidence ended the document")
			}
			if pdflatex, err := exec.LookPath("pdflatex"); err == nil {
				cmd := exec.Command(pdflatex, "-interaction=nonstopmode", "-halt-on-error", "report.tex")
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("pdflatex: %v\n%s", err, tail(out, 30))
				}
			}
		}
	}
}

// TestLongTablesCompile: a sweep of 60 points gets tables that break across pages (longtable) and
// still compiles, as a document and as a fragment.
func TestLongTablesCompile(t *testing.T) {
	s := &report.Sweep{ID: 7, Name: "long", State: "done", TPs: []int{4}, Levels: []int{1, 16}, Repeats: 1}
	for i := 0; i < 60; i++ {
		p := &report.Point{ID: fmt.Sprintf("p%02d", i), State: "done", Cells: map[int]*report.Cell{},
			Config: report.Config{Method: "eagle3", NumSteps: 1 + i%6, TopK: 1 + i/6, NumDraftTokens: 2 + i%6 + i/6, TP: 4}}
		if i == 0 {
			p.Config = report.Config{Method: "baseline", TP: 4, Baseline: true}
		}
		for _, c := range s.Levels {
			v := float64(100+i) * float64(c)
			p.Cells[c] = &report.Cell{Point: p, Concurrency: c, TokS: report.Stat{N: 1, Median: v, Min: v, Max: v},
				TPOTP50: report.Stat{N: 1, Median: 10 + float64(i%7)}, TTFTP99: report.Stat{N: 1, Median: 30}}
		}
		s.Points = append(s.Points, p)
	}
	dir := t.TempDir()
	files, err := report.Write(s, report.Options{Format: "tex", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := os.ReadFile(files[0])
	if !strings.Contains(string(doc), `\begin{longtable}`) || !strings.Contains(string(doc), `\endhead`) {
		t.Fatalf("the 60-row results table is not a longtable")
	}
	pdflatex, err := exec.LookPath("pdflatex")
	if err != nil {
		t.Skip("pdflatex is not installed: structure checked, compiling skipped")
	}
	cmd := exec.Command(pdflatex, "-interaction=nonstopmode", "-halt-on-error", "report.tex")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pdflatex: %v\n%s", err, tail(out, 30))
	}
}

// TestSweepWithoutRuns: a sweep that recorded nothing yet still gives a report in every format.
func TestSweepWithoutRuns(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "empty.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.CreateSweep(ctx, store.NewSweep{Name: "empty", SpecHash: "h", SpecText: "x"},
		[]store.NewHost{{Name: "a", Driver: "local", GPUs: 1}}, []store.NewPoint{{ID: "b", Method: "baseline", Baseline: true, TP: 1, Runs: 1}}); err != nil {
		t.Fatal(err)
	}
	s, err := report.Load(ctx, db, "empty")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range report.Formats {
		dir := t.TempDir()
		files, err := report.Write(s, report.Options{Format: f, Dir: dir})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(files) != 1 {
			t.Errorf("%s: %d files for a sweep without runs", f, len(files))
		}
		if f == "tex" {
			if pdflatex, err := exec.LookPath("pdflatex"); err == nil {
				cmd := exec.Command(pdflatex, "-interaction=nonstopmode", "-halt-on-error", "report.tex")
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("pdflatex: %v\n%s", err, tail(out, 30))
				}
			}
		}
	}
}

// TestEffectiveValuesShown: a point whose server reports other speculative parameters than the
// requested ones shows both in the results; one that ran as requested shows only its values.
func TestEffectiveValuesShown(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "eff.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	two, one, eight, three := 2, 1, 8, 3
	id, err := db.CreateSweep(ctx, store.NewSweep{Name: "eff", SpecHash: "h", SpecText: "x"},
		[]store.NewHost{{Name: "a", Driver: "local", GPUs: 1}}, []store.NewPoint{
			{ID: "d", Method: "dflash", NumSteps: &one, TopK: &one, NumDraftTokens: &eight, TP: 1, Runs: 1},
			{ID: "e", Method: "eagle3", NumSteps: &two, TopK: &one, NumDraftTokens: &three, TP: 1, Runs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	sixteen := 16
	for pid, eff := range map[string]store.PointInfo{
		"d": {EffectiveNumSteps: &one, EffectiveTopK: &one, EffectiveNumDraftTokens: &sixteen},
		"e": {EffectiveNumSteps: &two, EffectiveTopK: &one, EffectiveNumDraftTokens: &three}} {
		att, err := db.ClaimPoint(ctx, id, pid, "a")
		if err != nil {
			t.Fatal(err)
		}
		if err := db.SetPointInfo(ctx, id, pid, att, eff); err != nil {
			t.Fatal(err)
		}
		if err := db.RecordRunAndFinish(ctx, store.Run{SweepID: id, PointID: pid, Attempt: att, Concurrency: 1, Repeat: 1,
			Status: store.RunOK, Metrics: &store.Metrics{Requests: 4, Completed: 4, OutputTokS: 100}}, &store.PointFinish{State: store.PointDone}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := report.Load(ctx, db, "eff")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := report.Write(s, report.Options{Format: "md", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(files[0])
	if !strings.Contains(string(b), "8 (ran 16)") {
		t.Errorf("the dflash point's draft tokens: want \"8 (ran 16)\" in the report")
	}
	if strings.Count(string(b), "(ran ") != 1+strings.Count(string(b), "\"4 (ran 5)\"") {
		t.Errorf("a point that ran as requested is marked too")
	}
}

// TestSpeculativePointWithoutSteps: an NGRAM point has no num_steps (NGRAM does not use it), yet it
// is no baseline: the report, its label and its speedup treat it as speculative.
func TestSpeculativePointWithoutSteps(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "ngram.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ten, twelve := 10, 12
	id, err := db.CreateSweep(ctx, store.NewSweep{Name: "ngram", SpecHash: "h", SpecText: "x"},
		[]store.NewHost{{Name: "a", Driver: "local", GPUs: 1}}, []store.NewPoint{
			{ID: "b", Method: "baseline", Baseline: true, TP: 1, Runs: 1},
			{ID: "n", Method: "ngram", TopK: &ten, NumDraftTokens: &twelve, TP: 1, Runs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for pid, tok := range map[string]float64{"b": 100, "n": 130} {
		att, err := db.ClaimPoint(ctx, id, pid, "a")
		if err != nil {
			t.Fatal(err)
		}
		if err := db.RecordRunAndFinish(ctx, store.Run{SweepID: id, PointID: pid, Attempt: att, Concurrency: 1, Repeat: 1,
			Status: store.RunOK, Metrics: &store.Metrics{Requests: 4, Completed: 4, OutputTokS: tok}}, &store.PointFinish{State: store.PointDone}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := report.Load(ctx, db, "ngram")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range s.Points {
		if (p.ID == "n") == p.Baseline {
			t.Errorf("point %s (%s): baseline %v", p.ID, p.Method, p.Baseline)
		}
	}
	best, err := report.FromRuns(ctx, db, store.RunsQuery{Sweep: "ngram"})
	if err != nil {
		t.Fatal(err)
	}
	for _, sw := range best {
		for _, p := range sw.Points {
			if (p.ID == "n") == p.Baseline {
				t.Errorf("runs --best: point %s baseline %v", p.ID, p.Baseline)
			}
		}
	}
}
