package store

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// minSQLite is the oldest SQLite the store runs on: sqlite_schema (3.33) is the newest name it uses.
// The Makefile's SQLITE_PROBE refuses a system library older than this.
const minSQLite = 3033000

// TestLinkedSQLite checks, on whichever SQLite this binary links (the system's with -tags libsqlite3,
// else go-sqlite3's amalgamation), every feature the store relies on beyond plain SQL: the version,
// the JSON functions of the CHECK constraints and views, window functions, sqlite_schema, WAL, the
// read-only authorizer of the user's queries, and the Go function the migrations call.
func TestLinkedSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openTest(t) // every migration applied: views, CHECK (json_valid(...)), indexes
	one := func(q string) string {
		t.Helper()
		var s string
		if err := db.rw.QueryRowContext(ctx, q).Scan(&s); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return s
	}
	v := one("SELECT sqlite_version()")
	t.Logf("SQLite %s (system library: %v)", v, linkedSystemSQLite)
	if n := versionNumber(t, v); n < minSQLite {
		t.Fatalf("SQLite %s is older than the store needs (%d)", v, minSQLite)
	}
	for q, want := range map[string]string{
		`SELECT json_valid('{"a":[1,2]}') || json_valid('{')`:                                                              "10",
		`SELECT json_extract(json_object('k', 'v', 'n', 3), '$.n')`:                                                        "3",
		`SELECT group_concat(r) FROM (SELECT row_number() OVER (ORDER BY x) AS r FROM (SELECT 5 AS x UNION ALL SELECT 4))`: "1,2",
		`SELECT count(*) > 0 FROM sqlite_schema WHERE type = 'view'`:                                                       "1",
		`PRAGMA journal_mode`: "wal",
	} {
		if got := one(q); got != want {
			t.Errorf("%s = %q, want %q", q, got, want)
		}
	}
	// The migrations' own SQL function, registered on the migration connection.
	mdb := openMigrationDB(db.Path())
	defer mdb.Close()
	var n int
	if err := mdb.QueryRowContext(ctx, `SELECT specsweep_spec_workload('workload: {input_tokens: 3}', 'input_tokens')`).Scan(&n); err != nil || n != 3 {
		t.Errorf("specsweep_spec_workload on the migration connection: %d, %v", n, err)
	}
	if _, err := db.Query(ctx, "SELECT 1 FROM sweeps; DELETE FROM sweeps"); err == nil {
		t.Error("a user's query that writes was accepted")
	}
	_, err := db.Query(ctx, "SELECT count(*) FROM run_summary")
	if err != nil {
		t.Fatalf("a user's read through the authorizer: %v", err)
	}
}

// TestStoreOnTheOtherSQLite runs the store's tests again on the SQLite this binary does not link, so
// both builds the Makefile can choose are tested (the bundled one costs a minute of cgo when the build
// cache is cold).
func TestStoreOnTheOtherSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the store's tests a second time")
	}
	if os.Getenv("SPECSWEEP_OTHER_SQLITE") != "" {
		t.Skip("already the other build")
	}
	t.Parallel()
	flags := strings.Fields(os.Getenv("GOFLAGS"))
	kept := flags[:0]
	for _, f := range flags {
		if !strings.HasPrefix(f, "-tags=") && !strings.HasPrefix(f, "--tags=") {
			kept = append(kept, f)
		}
	}
	if !linkedSystemSQLite {
		if err := exec.Command("sh", "-c", "printf '#include <sqlite3.h>\\nint main(void){return 0;}\\n' | ${CC:-cc} -x c - -lsqlite3 -o /dev/null").Run(); err != nil {
			t.Skipf("no system SQLite to link (libsqlite3-dev): %v", err)
		}
		kept = append(kept, "-tags=libsqlite3")
	}
	cmd := exec.Command("go", "test", "-short", "-count=1", ".")
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.Join(kept, " "), "SPECSWEEP_OTHER_SQLITE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("store tests with GOFLAGS=%q: %v\n%s", strings.Join(kept, " "), err, out)
	}
}

func versionNumber(t *testing.T, v string) int {
	t.Helper()
	p := strings.Split(v, ".")
	if len(p) < 3 {
		t.Fatalf("SQLite version %q", v)
	}
	n := 0
	for _, s := range p[:3] {
		x, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("SQLite version %q: %v", v, err)
		}
		n = n*1000 + x
	}
	return n
}
