package store

import (
	"database/sql"
	"sync"

	sqlite3 "github.com/mattn/go-sqlite3"
	"go.yaml.in/yaml/v3"
)

// migrationDriver is go-sqlite3 with the SQL functions the migrations call that SQLite does not
// have: specsweep_spec_workload. Only the connections that apply migrations (migrateUp) use it.
const migrationDriver = "sqlite3_specsweep_migrate"

var registerMigrationDriver sync.Once

// openMigrationDB opens path read-write with the migrations' functions.
func openMigrationDB(path string) *sql.DB {
	registerMigrationDriver.Do(func() {
		sql.Register(migrationDriver, &sqlite3.SQLiteDriver{
			ConnectHook: func(c *sqlite3.SQLiteConn) error {
				return c.RegisterFunc("specsweep_spec_workload", specWorkload, true)
			},
		})
	})
	// sql.Open with a registered driver and a string DSN does not fail.
	db, _ := sql.Open(migrationDriver, dsn(path, false))
	return db
}

// specWorkload is the SQL function specsweep_spec_workload(spec_text, key): the scalar at
// workload.KEY of a stored spec (sweeps.spec_text, the YAML or JSON as the user wrote it, which
// SQL cannot read), as an integer or a text, or NULL when the text is no such mapping or the key is
// absent or not an integer or a string. Migration 10 reads the dataset and input_tokens of the
// specs stored before it with it; it knows the spec's shape of those versions, not the current one.
func specWorkload(spec, key string) (v any) {
	defer func() {
		// The YAML library has panicked on malformed input in the past: a stored text that is not
		// a spec gives NULL, never a failed migration.
		if recover() != nil {
			v = nil
		}
	}()
	var doc struct {
		Workload map[string]any `yaml:"workload"`
	}
	if yaml.Unmarshal([]byte(spec), &doc) != nil {
		return nil
	}
	switch x := doc.Workload[key].(type) {
	case int:
		return int64(x)
	case int64:
		return x
	case string:
		return x
	}
	return nil
}
