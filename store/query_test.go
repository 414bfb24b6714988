package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestSingleStatement(t *testing.T) {
	ok := []string{
		"concurrency = 16",
		"method = ';'",
		`"weird;name" = 1`,
		"[a;b] = 1",
		"`x;y` = 1",
		"x = 1 -- comment; here\n",
		"x = 1 /* ; */ AND y = 2",
		"method = 'it''s;'",
	}
	for _, s := range ok {
		if err := singleStatement(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	bad := []string{"1; DROP TABLE runs", "1) ; DELETE FROM runs; SELECT (1", "x = ';' ; y", "/* a */ ;"}
	for _, s := range bad {
		if err := singleStatement(s); !errors.Is(err, ErrBadQuery) {
			t.Errorf("%q: %v, want ErrBadQuery", s, err)
		}
	}
}

func TestQueryRuns(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sw := sampleSweep(t, db, "q")
	sampleSweep(t, db, "other")
	for i, p := range []string{"b4", "s1", "s2"} {
		att, _ := db.ClaimPoint(ctx, sw, p, "h4")
		for _, c := range []int{16, 1} {
			if err := db.RecordRun(ctx, okRun(sw, p, att, c, 1, float64(100*(i+1)*c))); err != nil {
				t.Fatal(err)
			}
		}
	}
	col := func(rows *Rows, name string) []string {
		var out []string
		for i, c := range rows.Columns {
			if c == name {
				for _, r := range rows.Values {
					out = append(out, fmtAny(r[i]))
				}
			}
		}
		return out
	}
	// Default order: plan order, then concurrency.
	rows, err := db.QueryRuns(ctx, RunsQuery{Sweep: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(col(rows, "point_id"), ",") + " " + strings.Join(col(rows, "concurrency"), ","); got != "b4,b4,s1,s1,s2,s2 1,16,1,16,1,16" {
		t.Errorf("default order: %s", got)
	}
	if len(rows.Columns) != len(runSummaryColumns) {
		t.Errorf("columns %v", rows.Columns)
	}
	rows, err = db.QueryRuns(ctx, RunsQuery{Sweep: "q", Where: "concurrency = 16 -- trailing comment", OrderBy: "output_tok_s DESC", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(col(rows, "point_id"), ","); got != "s2,s1" {
		t.Errorf("where/order/limit: %s", got)
	}
	// No sweep: all sweeps; sweep by id.
	if rows, err = db.QueryRuns(ctx, RunsQuery{Sweep: fmtAny(sw)}); err != nil || len(rows.Values) != 6 {
		t.Errorf("by id: %v %v", rows, err)
	}
	if _, err = db.QueryRuns(ctx, RunsQuery{Sweep: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown sweep: %v", err)
	}
	for _, where := range []string{
		"concurrency = = 16",
		"no_such_column > 1",
		"1; DELETE FROM runs",
		"1) ; DELETE FROM runs; SELECT (1",
		"1) UNION SELECT * FROM sweeps --",
		"(SELECT count(*) FROM sqlite_master WHERE 1=1); ATTACH 'x.db' AS x",
		"1 /* unterminated",
	} {
		_, err := db.QueryRuns(ctx, RunsQuery{Where: where})
		if !errors.Is(err, ErrBadQuery) || !strings.Contains(err.Error(), where) {
			t.Errorf("where %q: %v, want ErrBadQuery naming it", where, err)
		}
	}
	if _, err := db.QueryRuns(ctx, RunsQuery{OrderBy: "nope DESC"}); !errors.Is(err, ErrBadQuery) {
		t.Errorf("bad order: %v", err)
	}
	// Nothing was deleted.
	if rows, _ := db.QueryRuns(ctx, RunsQuery{}); len(rows.Values) != 6 {
		t.Errorf("runs after attacks: %d", len(rows.Values))
	}
}

func fmtAny(v any) string { return fmt.Sprint(v) }

func TestQueryIsReadOnly(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	sampleSweep(t, db, "ro")
	for _, q := range []string{
		"DELETE FROM runs",
		"UPDATE points SET state = 'done'",
		"INSERT INTO events (at, kind) VALUES (1, 'x')",
		"DROP VIEW run_summary",
		"ATTACH DATABASE '" + t.TempDir() + "/x.db' AS x",
		"PRAGMA query_only = 0",
		"CREATE TABLE t (x)",
		"SELECT 1; DELETE FROM points",
		"WITH x AS (SELECT 1) DELETE FROM points",
	} {
		if _, err := db.Query(ctx, q); err == nil {
			t.Errorf("%q: allowed", q)
		}
	}
	if s, _ := db.FindSweep(ctx, "ro"); s.Points != 5 {
		t.Errorf("points after attempts: %d", s.Points)
	}
	rows, err := db.Query(ctx, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 3) SELECT sum(i), json_extract('{\"a\":2}', '$.a') FROM n")
	if err != nil || rows.Values[0][0] != int64(6) || rows.Values[0][1] != int64(2) {
		t.Errorf("recursive select: %v %v", rows, err)
	}
}
