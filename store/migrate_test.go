package store

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/specsweep/specsweep/migrations"
)

// seeds insert representative data into a database at exactly the schema
// version of their key, with plain SQL (the Go API always speaks the latest
// schema). When a migration changes existing tables, add a seed for its
// version; a database at version v gets the seed with the greatest key <= v.
// Every seed must produce the data that checkSeeded expects after upgrading.
var seeds = map[int64]func(ctx context.Context, tx *sql.Tx) error{
	1: func(ctx context.Context, tx *sql.Tx) error {
		stmts := []string{
			`INSERT INTO sweeps (id, name, spec_hash, spec_text, state, created_at) VALUES (7, 'seeded', 'h', 'version: 1', 'running', 1000)`,
			`INSERT INTO hosts (sweep_id, name, gpus) VALUES (7, 'gpu1', 4)`,
			`INSERT INTO points (id, sweep_id, point_id, plan_order, method, baseline, tp, argv, created_at, state, attempts, host, started_at)
			 VALUES (1, 7, 'base', 0, 'baseline', 1, 4, '["/bin/x"]', 1000, 'done', 1, 'gpu1', 1100)`,
			`INSERT INTO points (id, sweep_id, point_id, plan_order, method, baseline, num_steps, topk, num_draft_tokens, tp, argv, created_at, state, attempts, host, started_at)
			 VALUES (2, 7, 'spec', 1, 'eagle3', 0, 3, 1, 4, 4, '["/bin/x"]', 1000, 'running', 1, 'gpu1', 1200)`,
			`INSERT INTO runs (point_ref, attempt, concurrency, repeat, status, host, output_tok_s, started_at, finished_at)
			 VALUES (1, 1, 16, 1, 'ok', 'gpu1', 100, 1100, 1150)`,
			`INSERT INTO runs (point_ref, attempt, concurrency, repeat, status, host, output_tok_s, started_at, finished_at)
			 VALUES (2, 1, 16, 1, 'ok', 'gpu1', 180, 1200, 1250)`,
			`INSERT INTO events (sweep_id, point_ref, host, at, kind, detail) VALUES (7, 2, 'gpu1', 1200, 'state', 'pending -> running (attempt 1)')`,
		}
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return err
			}
		}
		return nil
	},
}

// checkSeeded verifies, through the current API, the data of any seed.
func checkSeeded(t *testing.T, db *DB) {
	t.Helper()
	ctx := context.Background()
	s, err := db.FindSweep(ctx, "seeded")
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != 7 || s.Done != 1 || s.Running != 1 {
		t.Errorf("seeded sweep: %+v", s)
	}
	rows, err := db.QueryRuns(ctx, RunsQuery{Sweep: "seeded", Where: "point_id = 'spec'"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows.Values) != 1 || rows.Values[0][24] != 1.8 {
		t.Errorf("seeded runs: %v", rows.Values)
	}
	// The interrupted point can be recovered and re-run with the new schema.
	if n, err := db.RecoverInterrupted(ctx, 7, ""); err != nil || n != 1 {
		t.Errorf("recover: %d %v", n, err)
	}
	if att, err := db.ClaimPoint(ctx, 7, "spec", "gpu1"); err != nil || att != 2 {
		t.Errorf("claim: %d %v", att, err)
	}
}

// schemaOf returns the normalized schema of a database (without goose's table).
func schemaOf(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.Query(`SELECT type, name, coalesce(sql, '') FROM sqlite_schema
		WHERE name NOT LIKE 'goose%' AND name NOT LIKE 'sqlite_%' ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ws := regexp.MustCompile(`\s+`)
	var b strings.Builder
	for rows.Next() {
		var typ, name, text string
		if err := rows.Scan(&typ, &name, &text); err != nil {
			t.Fatal(err)
		}
		b.WriteString(typ + " " + name + ": " + ws.ReplaceAllString(text, " ") + "\n")
	}
	return b.String()
}

func TestMigrationsFromEveryVersion(t *testing.T) {
	ctx := context.Background()
	versions := migrationVersions()
	fresh := openTest(t)
	want := schemaOf(t, fresh.rw)

	for _, from := range append([]int64{0}, versions...) {
		t.Run(fmt.Sprintf("from_%d", from), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "old.db")
			raw, err := sql.Open("sqlite3", dsn(path, false))
			if err != nil {
				t.Fatal(err)
			}
			seeded := false
			if from > 0 {
				p, err := newProvider(raw)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := p.UpTo(ctx, from); err != nil {
					t.Fatal(err)
				}
				var key int64
				for v := range seeds {
					if v <= from && v > key {
						key = v
					}
				}
				if seed := seeds[key]; seed != nil {
					tx, err := raw.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					if err := seed(ctx, tx); err != nil {
						t.Fatalf("seed %d at version %d: %v", key, from, err)
					}
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
					seeded = true
				}
			}
			raw.Close()

			db, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			cur, latest, err := schemaVersions(ctx, db.rw)
			if err != nil || cur != latest {
				t.Fatalf("version after Open: %d of %d (%v)", cur, latest, err)
			}
			if got := schemaOf(t, db.rw); got != want {
				t.Errorf("schema after upgrade from %d differs from a fresh database:\n%s\nwant:\n%s", from, got, want)
			}
			if seeded {
				checkSeeded(t, db)
			}
		})
	}
}

func TestMigrationsAreForwardOnly(t *testing.T) {
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	for _, f := range files {
		b, _ := fs.ReadFile(migrations.FS, f)
		if !strings.Contains(string(b), "-- +goose Up") {
			t.Errorf("%s: no Up section", f)
		}
		if strings.Contains(string(b), "-- +goose Down") {
			t.Errorf("%s: has a Down section; migrations are forward-only", f)
		}
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	if _, err := db.rw.ExecContext(ctx, "INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, 1)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(ctx, db.Path()); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("newer schema: %v", err)
	}
}
