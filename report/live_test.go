package report_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/specsweep/specsweep/report"
	"github.com/specsweep/specsweep/store"
)

// liveFixtures are the sweeps the live and in-memory renderings are checked on: a searched and a
// grid sweep, a checked one with a mismatch and a failure, one of odd names, a packed one, one
// that recorded nothing, and (without -short) the two real sweeps of sglangsim.
func liveFixtures(t *testing.T) map[string]*report.Sweep {
	t.Helper()
	ctx := context.Background()
	load := func(db *store.DB, ref string) *report.Sweep {
		t.Helper()
		s, err := report.Load(ctx, db, ref)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	out := map[string]*report.Sweep{}
	db, _ := searchDB(t, true)
	out["climb"] = load(db, "climb")
	db, _ = searchDB(t, false)
	out["grid"] = load(db, "grid")
	db, _ = checkDB(t)
	out["checked"] = load(db, "checked")
	odd := oddDB(t)
	t.Cleanup(func() { odd.Close() })
	out["odd"] = load(odd, "odd")
	db, id := searchDB(t, false)
	for pid, others := range map[string][]string{"e1": {"e2", "e4", "b"}, "e2": {"e1"}, "e4": nil} {
		if err := db.AddEvent(ctx, store.RanBesideEvent(id, pid, "a", others)); err != nil {
			t.Fatal(err)
		}
	}
	out["packed"] = load(db, "grid")
	out["empty"] = emptySweep(t)
	if !testing.Short() {
		st, _ := recorded(t)
		out["rep-a"], out["rep-b"] = load(st, "rep-a"), load(st, "rep-b")
	}
	return out
}

// emptySweep is a sweep of two points that has recorded nothing yet.
func emptySweep(t *testing.T) *report.Sweep {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "empty.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	one := 1
	if _, err := db.CreateSweep(ctx, store.NewSweep{Name: "empty", SpecHash: "h", SpecText: "x"},
		[]store.NewHost{{Name: "a", Driver: "local", GPUs: 1}}, []store.NewPoint{
			{ID: "b", Method: "baseline", Baseline: true, TP: 1, Runs: 1},
			{ID: "e", Method: "eagle3", NumSteps: &one, TopK: &one, NumDraftTokens: &one, TP: 1, Runs: 1}}); err != nil {
		t.Fatal(err)
	}
	s, err := report.Load(ctx, db, "empty")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sameTable fails unless got shows what want does: title, note, head, every row cell for cell, and
// the same numeric and monospace columns.
func sameTable(t *testing.T, what string, got, want report.Table) {
	t.Helper()
	if got.Title != want.Title || got.Note != want.Note || !slices.Equal(got.Head, want.Head) {
		t.Errorf("%s: title, note or head differ:\n got %q %q %q\nwant %q %q %q", what, got.Title, got.Note, got.Head,
			want.Title, want.Note, want.Head)
	}
	if len(got.Rows) != len(want.Rows) {
		t.Errorf("%s: %d rows, the report has %d", what, len(got.Rows), len(want.Rows))
		return
	}
	for i := range want.Rows {
		if !slices.Equal(got.Rows[i], want.Rows[i]) {
			t.Errorf("%s: row %d\n got %q\nwant %q", what, i, got.Rows[i], want.Rows[i])
		}
	}
	at := func(v []bool, i int) bool { return i < len(v) && v[i] }
	for i := range want.Head {
		if at(got.Num, i) != at(want.Num, i) || at(got.Code, i) != at(want.Code, i) {
			t.Errorf("%s: column %d (%s): num %v code %v, the report's %v %v", what, i, want.Head[i],
				at(got.Num, i), at(got.Code, i), at(want.Num, i), at(want.Code, i))
		}
	}
	if len(got.Num) != len(got.Head) || len(got.Code) != len(got.Head) {
		t.Errorf("%s: %d num and %d code entries for %d columns", what, len(got.Num), len(got.Code), len(got.Head))
	}
}

// TestLiveTablesMatchReport: LiveTables of every fixture holds, row for row, the summary and the
// tables of the report built for the same sweep.
func TestLiveTablesMatchReport(t *testing.T) {
	for name, s := range liveFixtures(t) {
		want, err := report.ReportTables(s, report.Options{Format: "html"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := report.LiveTables(s)
		if got.SweepID != s.ID || got.Sweep != s.Name || got.State != s.State {
			t.Errorf("%s: sweep %d %q %q, want %d %q %q", name, got.SweepID, got.Sweep, got.State, s.ID, s.Name, s.State)
		}
		if !slices.Equal(got.Summary, want.Summary) {
			t.Errorf("%s: summary\n got %q\nwant %q", name, got.Summary, want.Summary)
		}
		sameTable(t, name+" check", got.Check, want.Check)
		sameTable(t, name+" best", got.Best, want.Best)
		sameTable(t, name+" results", got.Results, want.Results)
		sameTable(t, name+" pruned", got.Pruned, want.Pruned)
		sameTable(t, name+" failures", got.Failures, want.Failures)
	}
}

// TestLiveTablesShowTheFixtures: the fixtures exercise every table: the comparison above is not
// one of empty tables.
func TestLiveTablesShowTheFixtures(t *testing.T) {
	fx := liveFixtures(t)
	climb, checked, odd, packed := report.LiveTables(fx["climb"]), report.LiveTables(fx["checked"]),
		report.LiveTables(fx["odd"]), report.LiveTables(fx["packed"])
	if len(climb.Best.Rows) != 2 || len(climb.Pruned.Rows) != 4 || len(climb.Results.Rows) != 4 {
		t.Errorf("climb: %d best, %d pruned, %d results rows", len(climb.Best.Rows), len(climb.Pruned.Rows), len(climb.Results.Rows))
	}
	if len(checked.Check.Rows) == 0 || !strings.Contains(strings.Join(checked.Summary, " "), "Output check FAILED") {
		t.Errorf("checked: no output check in %q", checked.Summary)
	}
	if len(odd.Failures.Rows) != 1 || odd.Failures.Rows[0][0] != "f" {
		t.Errorf("odd: failures %q", odd.Failures.Rows)
	}
	if !strings.Contains(strings.Join(packed.Summary, " "), "3 of 8 point(s) ran packed") ||
		!slices.Contains(packed.Results.Head, "packed") {
		t.Errorf("packed: summary %q, results head %q", packed.Summary, packed.Results.Head)
	}
}

// TestLiveTablesWithoutRuns: a sweep that recorded nothing yet, an empty Sweep and nil give tables
// without rows (All results lists the points, unmeasured), never an error or a null in JSON.
func TestLiveTablesWithoutRuns(t *testing.T) {
	l := report.LiveTables(emptySweep(t))
	for what, tb := range map[string]report.Table{"check": l.Check, "best": l.Best, "pruned": l.Pruned, "failures": l.Failures} {
		if len(tb.Rows) != 0 || tb.Rows == nil || tb.Title == "" {
			t.Errorf("%s: %q rows (title %q), want none", what, tb.Rows, tb.Title)
		}
	}
	if len(l.Results.Rows) != 2 || l.Results.Rows[0][len(l.Results.Head)-1] != "pending" {
		t.Errorf("results of an unrun sweep: %q", l.Results.Rows)
	}
	if len(l.Summary) == 0 || !strings.HasPrefix(l.Summary[0], "State queued: 2 points, 0 done, 0 failed") {
		t.Errorf("summary %q", l.Summary)
	}
	for _, s := range []*report.Sweep{{}, nil} {
		l := report.LiveTables(s)
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("null")) {
			t.Errorf("null in the JSON of an empty sweep: %s", b)
		}
		if len(l.Best.Rows)+len(l.Results.Rows)+len(l.Failures.Rows)+len(l.Pruned.Rows)+len(l.Check.Rows) != 0 {
			t.Errorf("rows for a sweep of no points: %+v", l)
		}
	}
}

// TestLiveJSON: a Live is sent as JSON with snake_case keys, each table as title, note, head, rows,
// num and code (LaTeX's wide and para left out), and reads back equal.
func TestLiveJSON(t *testing.T) {
	l := report.LiveTables(liveFixtures(t)["climb"])
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]json.RawMessage) []string {
		var k []string
		for key := range m {
			k = append(k, key)
		}
		slices.Sort(k)
		return k
	}
	if got, want := keys(m), []string{"accept", "best", "check", "failures", "pruned", "recommendation", "results", "sources", "state", "summary", "sweep", "sweep_id"}; !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q", got, want)
	}
	var pruned map[string]json.RawMessage
	if err := json.Unmarshal(m["pruned"], &pruned); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(pruned), []string{"code", "head", "note", "num", "rows", "title"}; !slices.Equal(got, want) {
		t.Errorf("table keys %q, want %q", got, want)
	}
	var back report.Live
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, l) {
		t.Errorf("Live does not read back equal:\n%+v\n%+v", back, l)
	}
}

// TestHTMLIsWritesReport: HTML returns byte for byte the report.html that Write writes, for every
// fixture and for a comparison, without a directory.
func TestHTMLIsWritesReport(t *testing.T) {
	now := time.Unix(1700000000, 0)
	fx := liveFixtures(t)
	cases := map[string]report.Options{}
	for name := range fx {
		cases[name] = report.Options{Generator: "specsweep test"}
	}
	cases["climb vs grid"] = report.Options{Compare: fx["grid"]}
	for name, opt := range cases {
		s := fx[strings.Fields(name)[0]]
		opt.Now = now
		got, err := report.HTML(s, opt)
		if err != nil {
			t.Fatalf("%s: HTML: %v", name, err)
		}
		opt.Format, opt.Dir = "html", t.TempDir()
		files, err := report.Write(s, opt)
		if err != nil {
			t.Fatalf("%s: Write: %v", name, err)
		}
		want, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(files[0]) != "report.html" || len(files) != 1 {
			t.Errorf("%s: Write wrote %q", name, files)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: HTML's %d bytes differ from report.html's %d", name, len(got), len(want))
		}
		if !bytes.Contains(got, []byte("<svg")) && len(s.Levels) > 0 {
			t.Errorf("%s: no inline chart", name)
		}
	}
	if _, err := report.HTML(fx["grid"], report.Options{Format: "md"}); err == nil {
		t.Errorf("HTML with format md: no error")
	}
	if _, err := report.HTML(fx["grid"], report.Options{Fragment: true}); err == nil {
		t.Errorf("HTML with a fragment: no error")
	}
}
