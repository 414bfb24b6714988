package report_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
)

// Reasons the search gave the pruned points of searchDB (as sweep.Spec.Decide words them).
var prunedReasons = map[string]string{
	"e3": "eagle3 tp=4 k=1: steps 3 not run: predicted at most +1.6% at c=1, at most -2.3% at c=16, below min_gain 2%",
	"e5": "eagle3 tp=4 k=1: steps 5 not run: the climb stopped after steps 4 (-3.1% at c=1, +0.2% at c=16 against the best so far, below min_gain 2%)",
	"e6": "eagle3 tp=4 k=1: steps 6 not run: the climb stopped after steps 4 (-3.1% at c=1, +0.2% at c=16 against the best so far, below min_gain 2%)",
	"t2": "eagle3 tp=4 k=4 n=8: steps 2 not run: the shape's ratio to the chain cannot beat the best by min_gain 2%",
}

// searchDB records through the store's API a sweep whose points are decided by a search (searched
// true) or not: a baseline and eagle3 steps 1, 2 and 4 at topk 1 run (two repeats at concurrency 1
// and 16), steps 3, 5 and 6 and a tree shape (topk 4, 8 draft tokens) are pruned with a reason.
// Without searched, every point runs the grid way and none is pruned.
func searchDB(t *testing.T, searched bool) (*store.DB, int64) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "search.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ip := func(i int) *int { return &i }
	pts := []store.NewPoint{{ID: "b", Method: "baseline", Baseline: true, TP: 4, Runs: 4}}
	for _, s := range []int{1, 2, 3, 4, 5, 6} {
		pts = append(pts, store.NewPoint{ID: "e" + string(rune('0'+s)), Method: "eagle3", NumSteps: ip(s), TopK: ip(1),
			NumDraftTokens: ip(s + 1), TP: 4, Runs: 4, Argv: []string{"x", "--speculative-algorithm", "EAGLE3"}})
	}
	pts = append(pts, store.NewPoint{ID: "t2", Method: "eagle3", NumSteps: ip(2), TopK: ip(4), NumDraftTokens: ip(8), TP: 4, Runs: 4,
		Argv: []string{"x", "--speculative-algorithm", "EAGLE3"}})
	for i := range pts {
		pts[i].Searched = searched
	}
	name := "grid"
	if searched {
		name = "climb"
	}
	id, err := db.CreateSweep(ctx, store.NewSweep{Name: name, SpecHash: "h", SpecText: "x"},
		[]store.NewHost{{Name: "a", Driver: "local", GPUs: 4}}, pts)
	if err != nil {
		t.Fatal(err)
	}
	tok := map[string]float64{"b": 100, "e1": 150, "e2": 180, "e4": 190}
	run := []string{"b", "e1", "e2", "e4"}
	if !searched {
		tok["e3"], tok["e5"], tok["e6"], tok["t2"] = 185, 188, 170, 160
		run = append(run, "e3", "e5", "e6", "t2")
	}
	for _, pid := range run {
		if searched {
			if err := db.ApplySearch(ctx, id, []store.SearchDecision{{PointID: pid, Reason: "climb to " + pid}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		att, err := db.ClaimPoint(ctx, id, pid, "a")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range []int{1, 16} {
			for rep := 1; rep <= 2; rep++ {
				n++
				al := 2.5
				m := &store.Metrics{Requests: 8, Completed: 8, OutputTokS: tok[pid] * float64(c) * (1 + 0.01*float64(rep)),
					TPOTMedianMs: 10, TTFTP99Ms: 40}
				if pid != "b" {
					m.AcceptLength = &al
				}
				var fin *store.PointFinish
				if n == 4 {
					fin = &store.PointFinish{State: store.PointDone}
				}
				if err := db.RecordRunAndFinish(ctx, store.Run{SweepID: id, PointID: pid, Attempt: att, Concurrency: c, Repeat: rep,
					Status: store.RunOK, Metrics: m}, fin); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if searched {
		var prune []store.SearchDecision
		for _, pid := range []string{"e3", "e5", "e6", "t2"} {
			prune = append(prune, store.SearchDecision{PointID: pid, Reason: prunedReasons[pid]})
		}
		if err := db.ApplySearch(ctx, id, nil, prune); err != nil {
			t.Fatal(err)
		}
	}
	return db, id
}

// TestSearchedSweepReport: every format lists the pruned points with the search's reasons, and has
// the search-path chart of the searched chain (the shape the search ran nothing of has none).
func TestSearchedSweepReport(t *testing.T) {
	db, _ := searchDB(t, true)
	s, err := report.Load(context.Background(), db, "climb")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pruned()) != 4 || !s.Searched() {
		t.Fatalf("%d pruned points, searched %v", len(s.Pruned()), s.Searched())
	}
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
		plain := doc
		switch f {
		case "html":
			plain = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'", "&amp;", "&").Replace(doc)
		case "md":
			plain = strings.NewReplacer(`\_`, "_", `\*`, "*").Replace(doc)
		case "tex":
			plain = strings.NewReplacer(`\%`, "%", `\_`, "_", `\allowbreak{}`, "").Replace(doc)
		}
		if !strings.Contains(plain, "Pruned by the search") {
			t.Errorf("%s: no pruned block", f)
		}
		for pid, why := range prunedReasons {
			if !strings.Contains(plain, why) {
				t.Errorf("%s: the reason of %s is missing: %q", f, pid, why)
			}
		}
		if !strings.Contains(plain, "4 pruned by the search") {
			t.Errorf("%s: the summary does not count the pruned points", f)
		}
		if !strings.Contains(plain, "Search path (eagle3, tp=4, topk=1)") || !strings.Contains(plain, "Pruned: num_steps 3, 5, 6.") {
			t.Errorf("%s: no search-path chart of the chain with its pruned steps", f)
		}
		if strings.Contains(plain, "Search path (eagle3, tp=4, topk=4") {
			t.Errorf("%s: a search-path chart for a shape that ran nothing", f)
		}
		if !strings.Contains(plain, "ran nothing of 1 more tree shape") {
			t.Errorf("%s: the chart does not say a shape ran nothing", f)
		}
		switch f {
		case "html":
			if !strings.Contains(doc, `<a href="#pruned">Pruned by the search (4)</a>`) || !strings.Contains(doc, `<figure id="search-eagle3-tp4-k1">`) {
				t.Errorf("html: no link to the pruned points or no search-path figure")
			}
			for _, svg := range regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(doc, -1) {
				parseXML(t, "inline svg", []byte(svg))
			}
		case "md":
			svg, err := os.ReadFile(filepath.Join(dir, "charts", "search-eagle3-tp4-k1.svg"))
			if err != nil {
				t.Fatal(err)
			}
			parseXML(t, "search chart", svg)
			if !strings.Contains(string(svg), "pruned by the search (not run)") {
				t.Errorf("md: the search chart has no legend entry for the pruned steps")
			}
			if !strings.Contains(doc, "| e3 | eagle3 s=3 k=1 n=4 | 4 | eagle3 tp=4 k=1: steps 3 not run:") &&
				!strings.Contains(plain, "| e3 | eagle3 s=3 k=1 n=4 | 4 | eagle3 tp=4 k=1: steps 3 not run:") {
				t.Errorf("md: no pruned row for e3:\n%s", doc)
			}
		case "tex":
			if !strings.Contains(doc, `\label{tab:pruned}`) || !strings.Contains(doc, `charts/search-eagle3-tp4-k1.pdf`) {
				t.Errorf("tex: no pruned table or search chart")
			}
			if pdflatex, err := exec.LookPath("pdflatex"); err == nil {
				cmd := exec.Command(pdflatex, "-interaction=nonstopmode", "-halt-on-error", "report.tex")
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("pdflatex: %v\n%s", err, tail(out, 30))
				}
			}
		}
		// The results table lists the points that ran; the pruned ones only in their block.
		if strings.Count(plain, "steps 3 not run") != 1 {
			t.Errorf("%s: the reason of e3 appears %d times", f, strings.Count(plain, "steps 3 not run"))
		}
	}
}

// TestGridSweepHasNoSearchParts: the same points run as a grid give no pruned block, no search-path
// chart and no search sentence.
func TestGridSweepHasNoSearchParts(t *testing.T) {
	db, _ := searchDB(t, false)
	s, err := report.Load(context.Background(), db, "grid")
	if err != nil {
		t.Fatal(err)
	}
	if s.Searched() || len(s.Pruned()) != 0 {
		t.Fatalf("a grid sweep: searched %v, %d pruned", s.Searched(), len(s.Pruned()))
	}
	charts, err := report.Charts(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range charts {
		if strings.HasPrefix(c.Name, "search-") {
			t.Errorf("a grid sweep has the chart %s", c.Name)
		}
	}
	for _, f := range report.Formats {
		files, err := report.Write(s, report.Options{Format: f, Dir: t.TempDir()})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		b, _ := os.ReadFile(files[0])
		for _, no := range []string{"Pruned by the search", "pruned", "search", "Search path"} {
			if strings.Contains(string(b), no) {
				t.Errorf("%s: a grid sweep's report says %q", f, no)
			}
		}
		if !strings.Contains(string(b), "8 points, 8 done, 0 failed;") {
			t.Errorf("%s: the summary of a grid sweep changed", f)
		}
	}
}
