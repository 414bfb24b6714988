package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// What a live event stream polls: RunsAfter, EventsAfter and LastIDs.

// TestLivePollEmptyDatabase: a database without runs or events gives ids 0 and nothing after
// them; a limit below 1 is refused.
func TestLivePollEmptyDatabase(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	if r, e, err := db.LastIDs(ctx); err != nil || r != 0 || e != 0 {
		t.Fatalf("LastIDs of an empty database: %d, %d, %v", r, e, err)
	}
	if rs, err := db.RunsAfter(ctx, 0, 10); err != nil || len(rs) != 0 {
		t.Errorf("RunsAfter(0, 10): %v, %v", rs, err)
	}
	if es, err := db.EventsAfter(ctx, 0, 10); err != nil || len(es) != 0 {
		t.Errorf("EventsAfter(0, 10): %v, %v", es, err)
	}
	if _, err := db.RunsAfter(ctx, 0, 0); err == nil || !strings.Contains(err.Error(), "reading runs after 0") {
		t.Errorf("RunsAfter with limit 0: %v", err)
	}
	if _, err := db.EventsAfter(ctx, 0, -1); err == nil {
		t.Errorf("EventsAfter with limit -1: no error")
	}
	// A sweep without runs still has no run id.
	sampleSweep(t, db, "a")
	if r, _, err := db.LastIDs(ctx); err != nil || r != 0 {
		t.Errorf("LastIDs of a sweep without runs: run id %d, %v", r, err)
	}
}

// TestRunsAfter: the runs of every sweep after an id, ascending, at most limit; the ids grow as
// runs are recorded and LastIDs follows them; a superseded run keeps its row and id.
func TestRunsAfter(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	a, b := sampleSweep(t, db, "a"), sampleSweep(t, db, "b")
	claim := func(sw int64, pid string) int {
		t.Helper()
		att, err := db.ClaimPoint(ctx, sw, pid, "h4")
		if err != nil {
			t.Fatal(err)
		}
		return att
	}
	type want struct {
		sweep    int64
		point    string
		conc     int
		status   RunStatus
		tok      float64 // -1: nil
		finished time.Time
	}
	var wants []want
	var last int64
	record := func(r Run) {
		t.Helper()
		if err := db.RecordRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		tok := -1.0
		if r.Metrics != nil {
			tok = r.Metrics.OutputTokS
		}
		wants = append(wants, want{r.SweepID, r.PointID, r.Concurrency, r.Status, tok, r.FinishedAt})
		id, _, err := db.LastIDs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if id <= last {
			t.Fatalf("run id %d after %d: ids do not grow", id, last)
		}
		// The new run is what comes after the previous last id, and nothing after it.
		got, err := db.RunsAfter(ctx, last, 10)
		if err != nil || len(got) != 1 || got[0].ID != id || got[0].PointID != r.PointID {
			t.Fatalf("RunsAfter(%d, 10) after recording run %d: %+v, %v", last, id, got, err)
		}
		if got, err := db.RunsAfter(ctx, id, 10); err != nil || len(got) != 0 {
			t.Fatalf("RunsAfter(last id %d): %+v, %v", id, got, err)
		}
		last = id
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	aS1, bB4 := claim(a, "s1"), claim(b, "b4")
	r := okRun(a, "s1", aS1, 1, 1, 120)
	r.StartedAt, r.FinishedAt = t0, t0.Add(7*time.Second)
	record(r)
	record(okRun(b, "b4", bB4, 1, 1, 100)) // sweeps interleave
	record(okRun(a, "s1", aS1, 16, 1, 900))
	record(Run{SweepID: b, PointID: "b4", Attempt: bB4, Concurrency: 16, Repeat: 1, Status: RunFailed, Error: "server died"})
	// s1's attempt is interrupted: its runs become superseded in place; the re-run adds rows.
	if err := db.ReleasePoint(ctx, a, "s1", aS1, "interrupted"); err != nil {
		t.Fatal(err)
	}
	wants[0].status, wants[2].status = RunSuperseded, RunSuperseded
	record(okRun(a, "s1", claim(a, "s1"), 1, 1, 121))

	all, err := db.RunsAfter(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(wants) {
		t.Fatalf("%d runs, want %d", len(all), len(wants))
	}
	for i, g := range all {
		w := wants[i]
		tok := -1.0
		if g.OutputTokS != nil {
			tok = *g.OutputTokS
		}
		if (i > 0 && g.ID <= all[i-1].ID) || g.SweepID != w.sweep || g.PointID != w.point || g.Concurrency != w.conc ||
			g.Repeat != 1 || g.Status != w.status || tok != w.tok {
			t.Errorf("run %d: %+v (tok %v), want %+v", i, g, tok, w)
		}
		if g.At.IsZero() || (!w.finished.IsZero() && !g.At.Equal(w.finished)) {
			t.Errorf("run %d: at %v, want %v (or the recording time)", i, g.At, w.finished)
		}
	}
	// afterID and limit: the next runs after any id, never more than limit; paging visits each once.
	for after := int64(0); after <= all[len(all)-1].ID; after++ {
		for limit := 1; limit <= len(all)+1; limit++ {
			got, err := db.RunsAfter(ctx, after, limit)
			if err != nil {
				t.Fatal(err)
			}
			var exp []int64
			for _, r := range all {
				if r.ID > after && len(exp) < limit {
					exp = append(exp, r.ID)
				}
			}
			ids := make([]int64, len(got))
			for i, r := range got {
				ids[i] = r.ID
			}
			if !slices.Equal(ids, exp) {
				t.Errorf("RunsAfter(%d, %d): ids %v, want %v", after, limit, ids, exp)
			}
		}
	}
	var paged []int64
	for cursor := int64(0); ; {
		page, err := db.RunsAfter(ctx, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, r := range page {
			paged = append(paged, r.ID)
		}
		cursor = page[len(page)-1].ID
	}
	allIDs := make([]int64, len(all))
	for i, r := range all {
		allIDs[i] = r.ID
	}
	if !slices.Equal(paged, allIDs) {
		t.Errorf("paging by 2: %v", paged)
	}
	// A read-only store reads the same.
	ro, err := OpenReadOnly(ctx, db.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got, err := ro.RunsAfter(ctx, all[1].ID, 2); err != nil || len(got) != 2 || got[0].ID != all[2].ID {
		t.Errorf("read-only RunsAfter: %+v, %v", got, err)
	}
}

// TestEventsAfter: the events after an id, of every sweep and of none, in id (insertion) order even
// where their times are not in order, at most limit; LastIDs gives the largest event id.
func TestEventsAfter(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "a")
	if _, err := db.ClaimPoint(ctx, sw, "s1", "h4"); err != nil { // a state event of s1
		t.Fatal(err)
	}
	before, err := db.EventsAfter(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	_, start, err := db.LastIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) == 0 || before[len(before)-1].ID != start {
		t.Fatalf("LastIDs event id %d, last event %+v", start, before)
	}
	early := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	add := []Event{
		{SweepID: sw, PointID: "s1", Host: "h4", Kind: "stop", Detail: "stopped in 4.1s"},
		{Kind: "daemon", Detail: "started"}, // of no sweep
		{SweepID: sw, Host: "h8", At: early, Kind: "reconnect", Detail: "after 3s"},
	}
	for _, e := range add {
		if err := db.AddEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.EventsAfter(ctx, start, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(add) {
		t.Fatalf("%d events after %d, want %d: %+v", len(got), start, len(add), got)
	}
	for i, g := range got {
		w := add[i]
		if g.ID != start+int64(i)+1 || g.SweepID != w.SweepID || g.PointID != w.PointID || g.Host != w.Host ||
			g.Kind != w.Kind || g.Detail != w.Detail || g.At.IsZero() || (!w.At.IsZero() && !g.At.Equal(w.At)) {
			t.Errorf("event %d: %+v, want id %d and %+v", i, g, start+int64(i)+1, w)
		}
	}
	if got[2].At.After(got[1].At) {
		t.Errorf("the event added with an earlier time is not earlier: %v, %v", got[1].At, got[2].At)
	}
	if one, err := db.EventsAfter(ctx, start, 1); err != nil || len(one) != 1 || one[0].ID != start+1 {
		t.Errorf("EventsAfter(%d, 1): %+v, %v", start, one, err)
	}
	if none, err := db.EventsAfter(ctx, start+3, 10); err != nil || len(none) != 0 {
		t.Errorf("EventsAfter(last id): %+v, %v", none, err)
	}
	if _, e, err := db.LastIDs(ctx); err != nil || e != start+3 {
		t.Errorf("LastIDs event id %d, want %d (%v)", e, start+3, err)
	}
	// The events of the sweep are those Events reads, in the same insertion order for equal times.
	all, err := db.EventsAfter(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range all {
		if e.SweepID == sw {
			n++
		}
	}
	of, err := db.Events(ctx, sw, "")
	if err != nil {
		t.Fatal(err)
	}
	if n != len(of) {
		t.Errorf("%d events of the sweep after 0, Events reads %d", n, len(of))
	}
}

// TestLivePollPlans: the three queries go by the primary keys (EXPLAIN QUERY PLAN): a search by
// rowid range or the max seek, no scan of a table, no sort.
func TestLivePollPlans(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	fillBench(t, db, "bench", 20)
	for name, q := range map[string]struct {
		sql  string
		args []any
		want []string
	}{
		"RunsAfter":   {runsAfterSQL, []any{5, 100}, []string{"SEARCH r USING INTEGER PRIMARY KEY (rowid>?)", "SEARCH p USING INTEGER PRIMARY KEY (rowid=?)"}},
		"EventsAfter": {eventsAfterSQL, []any{5, 100}, []string{"SEARCH e USING INTEGER PRIMARY KEY (rowid>?)", "SEARCH p USING INTEGER PRIMARY KEY (rowid=?)"}},
		"LastIDs":     {lastIDsSQL, nil, []string{"SEARCH runs", "SEARCH events"}},
	} {
		rows, err := db.rw.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q.sql, q.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := strings.Join(plan, "\n")
		for _, w := range q.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: no %q in the plan:\n%s", name, w, text)
			}
		}
		for _, l := range plan {
			if (strings.HasPrefix(l, "SCAN") && l != "SCAN CONSTANT ROW") || strings.Contains(l, "TEMP B-TREE") {
				t.Errorf("%s: %q in the plan:\n%s", name, l, text)
			}
		}
		t.Logf("%s:\n%s", name, text)
	}
}
