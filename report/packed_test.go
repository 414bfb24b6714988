package report_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
)

// writeAll writes every format of the sweep's report and returns each main file's text.
func writeAll(t *testing.T, db *store.DB, ref string) map[string]string {
	t.Helper()
	s, err := report.Load(context.Background(), db, ref)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range report.Formats {
		dir := t.TempDir()
		files, err := report.Write(s, report.Options{Format: f, Dir: dir, Now: time.Unix(1700000000, 0)})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		out[f] = string(b)
		if f == "tex" {
			if pdflatex, err := exec.LookPath("pdflatex"); err == nil {
				cmd := exec.Command(pdflatex, "-interaction=nonstopmode", "-halt-on-error", filepath.Base(files[0]))
				cmd.Dir = dir
				if o, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("pdflatex: %v\n%s", err, tail(o, 30))
				}
			}
		}
	}
	return out
}

// TestPackedPointsMarked: a point whose latest "ran_beside" event counts N others is marked "ran
// beside N others" in All results of every format and counted in the summary; a point with only a
// "packed" start event, or none, is unmarked, and a sweep without ran_beside events renders as before.
func TestPackedPointsMarked(t *testing.T) {
	ctx := context.Background()
	db, id := searchDB(t, false)
	before := writeAll(t, db, "grid")
	for f, doc := range before {
		if strings.Contains(doc, "ran beside") || strings.Contains(doc, "ran packed") {
			t.Errorf("%s: a sweep without packed points has a packed mark", f)
		}
	}
	add := func(pid, kind, detail string) {
		t.Helper()
		if err := db.AddEvent(ctx, store.Event{SweepID: id, PointID: pid, Host: "a", Kind: kind, Detail: detail}); err != nil {
			t.Fatal(err)
		}
	}
	// A start event alone (a point still running, say) marks nothing.
	add("e1", "packed", "slot 1: GPUs 0,1, port 31801; beside 0 other point(s) now")
	if again := writeAll(t, db, "grid"); again["md"] != before["md"] || again["html"] != before["html"] || again["tex"] != before["tex"] {
		t.Errorf("a packed start event without ran_beside changed the report")
	}

	beside := func(pid string, others ...string) {
		t.Helper()
		if err := db.AddEvent(ctx, store.RanBesideEvent(id, pid, "a", others)); err != nil {
			t.Fatal(err)
		}
	}
	// Prose alone is not read: the count is the event's structured data.
	add("b", "ran_beside", "ran beside 5 other point(s): e1, e2, e3, e4, e5")
	beside("e1", "e2")
	beside("e1", "e2", "e4", "b") // the latest counts
	add("e2", "packed", "slot 2: GPUs 2,3, port 31802; beside 1 other point(s) now: e1")
	beside("e2", "e1")
	beside("e4")
	s, err := report.Load(ctx, db, "grid")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.PackedPoints()); n != 3 {
		t.Fatalf("%d packed points, want 3", n)
	}
	after := writeAll(t, db, "grid")
	for _, f := range []string{"md", "html", "tex"} {
		doc := after[f]
		for _, want := range []string{"ran beside 3 others", "ran beside 1 other", "ran alone",
			"3 of 8 point(s) ran packed", "2 of them beside other points"} {
			if !strings.Contains(doc, want) {
				t.Errorf("%s: no %q", f, want)
			}
		}
		if strings.Contains(doc, "ran beside 1 others") {
			t.Errorf("%s: the earlier ran_beside event of e1 was used", f)
		}
	}
	// In Markdown, the mark is the last cell of e1's row and unpacked points say "-".
	var e1, b string
	for _, l := range strings.Split(after["md"], "\n") {
		if strings.HasPrefix(l, "| eagle3 | 1 |") {
			e1 = l
		}
		if strings.HasPrefix(l, "| baseline |") {
			b = l
		}
	}
	if !strings.HasSuffix(e1, "| ran beside 3 others |") || !strings.HasSuffix(b, "| - |") {
		t.Errorf("results rows:\n%s\n%s", e1, b)
	}
	if !strings.Contains(after["html"], "<th>packed</th>") && !strings.Contains(after["html"], ">packed</th>") {
		t.Errorf("html: no packed column")
	}
}
