// Package store keeps specsweep's sweeps, hosts, points, runs and events in
// one SQLite file (WAL mode) and exposes the public query views run_summary,
// point_summary and event_log (see docs/schema.md).
//
// Every write happens in one IMMEDIATE transaction, so a process killed at
// any instant leaves either all of an operation or none of it. Point state
// changes are compare-and-set against the current state and attempt number:
// two workers cannot claim the same point, and a stale worker cannot record
// runs for, or finish, an attempt that was already recovered.
//
// Timestamps are stored as INTEGER unix milliseconds (UTC); the Go API uses
// time.Time, where the zero time stands for NULL ("not yet").
//
// store knows nothing about SSH, specs or the orchestrator: callers convert
// their own types into the records defined here.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
	"github.com/pressly/goose/v3"

	"github.com/specsweep/specsweep/migrations"
)

// Errors callers can test with errors.Is.
var (
	// ErrNotFound: no sweep or point matches.
	ErrNotFound = errors.New("not found")
	// ErrTransition: the record's current state does not allow the change
	// (for example claiming a point that another worker is running).
	ErrTransition = errors.New("illegal state transition")
	// ErrStaleAttempt: the caller acts on an attempt that is no longer the
	// point's current one (it was released or recovered meanwhile).
	ErrStaleAttempt = errors.New("stale attempt")
	// ErrDuplicateRun: a run with the same point, attempt, concurrency,
	// repeat and cell (dataset and input tokens) is already recorded.
	ErrDuplicateRun = errors.New("run already recorded")
	// ErrReadOnly: a write through a database opened with OpenReadOnly.
	ErrReadOnly = errors.New("database is open read-only")
	// ErrBadQuery: a user SQL expression that is not exactly one valid
	// read-only expression.
	ErrBadQuery = errors.New("bad query")
)

// BusyTimeout is how long a statement waits for another writer's lock.
const BusyTimeout = 5 * time.Second

// DB is an open store. It is safe for concurrent use by multiple goroutines,
// and several processes may open the same file.
type DB struct {
	path     string
	rw       *sql.DB // writes and internal reads; read-only DSN when readOnly
	query    *sql.DB // user SQL: mode=ro, query_only, authorizer
	readOnly bool
	now      func() time.Time
}

// Option configures Open and OpenReadOnly.
type Option func(*DB)

// WithClock sets the clock used for timestamps (tests use a fake one).
func WithClock(now func() time.Time) Option {
	return func(db *DB) { db.now = now }
}

// Open opens the store at path, creating the file with mode 0600 if it does
// not exist, and applies every pending migration.
func Open(ctx context.Context, path string, opts ...Option) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	// Create the file ourselves so that it never exists with a wider mode.
	// SQLite gives the -wal and -shm files the mode of the database file.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: create database file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("store: create database file: %w", err)
	}
	db := newDB(abs, opts)
	db.rw, err = sql.Open("sqlite3", dsn(abs, false))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", abs, err)
	}
	// Switching a new file to WAL can fail with SQLITE_BUSY without waiting
	// for the busy timeout when another process opens it at the same time.
	var mode string
	err = retryBusy(ctx, func() error {
		return db.rw.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
	})
	if err != nil {
		db.rw.Close()
		return nil, fmt.Errorf("store: open %s: %w", abs, err)
	}
	if mode != "wal" {
		db.rw.Close()
		return nil, fmt.Errorf("store: open %s: journal mode is %q, want wal", abs, mode)
	}
	if err := retryBusy(ctx, func() error { return migrate(ctx, db.rw, abs) }); err != nil {
		db.rw.Close()
		return nil, fmt.Errorf("store: migrate %s: %w", abs, err)
	}
	db.query = openQueryDB(abs)
	return db, nil
}

// OpenReadOnly opens an existing store without writing to it: no file is
// created and no migration runs. Every write method returns ErrReadOnly.
// It fails if the file does not exist or its schema is not the current one.
func OpenReadOnly(ctx context.Context, path string, opts ...Option) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: open %s read-only: %w", path, err)
	}
	if _, err := os.Stat(abs); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("store: open %s read-only: database file does not exist: %w", abs, err)
		}
		return nil, fmt.Errorf("store: open %s read-only: %w", abs, err)
	}
	db := newDB(abs, opts)
	db.readOnly = true
	db.rw, err = sql.Open("sqlite3", dsn(abs, true))
	if err != nil {
		return nil, fmt.Errorf("store: open %s read-only: %w", abs, err)
	}
	cur, want, err := schemaVersions(ctx, db.rw)
	if err != nil {
		db.rw.Close()
		return nil, fmt.Errorf("store: open %s read-only: %w", abs, err)
	}
	if cur != want {
		db.rw.Close()
		return nil, fmt.Errorf("store: open %s read-only: schema version is %d, this program needs %d (open it read-write once to migrate)", abs, cur, want)
	}
	db.query = openQueryDB(abs)
	return db, nil
}

func newDB(path string, opts []Option) *DB {
	db := &DB{path: path, now: time.Now}
	for _, o := range opts {
		o(db)
	}
	return db
}

// Path is the absolute path of the database file.
func (db *DB) Path() string { return db.path }

// Close closes the database.
func (db *DB) Close() error {
	var errs []error
	if db.query != nil {
		errs = append(errs, db.query.Close())
	}
	if db.rw != nil {
		errs = append(errs, db.rw.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: close %s: %w", db.path, err)
	}
	return nil
}

// dsn builds the go-sqlite3 DSN. Pragmas live in the DSN so that every pooled
// connection gets them.
func dsn(path string, readOnly bool) string {
	u := "file:" + (&url.URL{Path: path}).EscapedPath() + "?"
	ms := BusyTimeout.Milliseconds()
	if readOnly {
		return u + fmt.Sprintf("mode=ro&_query_only=on&_busy_timeout=%d&_foreign_keys=on", ms)
	}
	return u + fmt.Sprintf("_journal_mode=WAL&_busy_timeout=%d&_txlock=immediate&_foreign_keys=on&_synchronous=NORMAL", ms)
}

// queryDriver is go-sqlite3 with an authorizer that allows only reading:
// even a statement that slipped past the single-statement check cannot
// write, attach, or change pragmas.
const queryDriver = "sqlite3_specsweep_query"

var registerQueryDriver sync.Once

func openQueryDB(path string) *sql.DB {
	registerQueryDriver.Do(func() {
		sql.Register(queryDriver, &sqlite3.SQLiteDriver{
			ConnectHook: func(c *sqlite3.SQLiteConn) error {
				// Sorts of large results stay in memory (the default spills
				// to temporary files beyond the 2 MB page cache).
				if _, err := c.Exec("PRAGMA temp_store = MEMORY; PRAGMA cache_size = -65536; PRAGMA mmap_size = 268435456", nil); err != nil {
					return err
				}
				c.RegisterAuthorizer(authorizeRead)
				return nil
			},
		})
	})
	// sql.Open with a registered driver and a string DSN does not fail.
	db, _ := sql.Open(queryDriver, dsn(path, true))
	return db
}

const sqliteRecursive = 33 // SQLITE_RECURSIVE, not exported by go-sqlite3

func authorizeRead(op int, _, _, _ string) int {
	switch op {
	case sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqliteRecursive:
		return sqlite3.SQLITE_OK
	}
	return sqlite3.SQLITE_DENY
}

func newProvider(db *sql.DB) (*goose.Provider, error) {
	return goose.NewProvider(goose.DialectSQLite3, db, migrations.FS,
		goose.WithDisableGlobalRegistry(true),
		goose.WithLogger(goose.NopLogger()),
	)
}

// schemaVersions returns the database's schema version and the latest one
// this program knows.
func schemaVersions(ctx context.Context, db *sql.DB) (current, latest int64, err error) {
	sources := migrationVersions()
	latest = sources[len(sources)-1]
	var exists int
	err = db.QueryRowContext(ctx,
		"SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'goose_db_version'").Scan(&exists)
	if err != nil {
		return 0, 0, fmt.Errorf("read schema version: %w", err)
	}
	if exists == 0 {
		return 0, latest, nil
	}
	err = db.QueryRowContext(ctx,
		"SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied").Scan(&current)
	if err != nil {
		return 0, 0, fmt.Errorf("read schema version: %w", err)
	}
	return current, latest, nil
}

// migrationVersions lists the embedded migrations' versions in order.
func migrationVersions() []int64 {
	entries, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(entries) == 0 {
		panic("store: no embedded migrations")
	}
	var vs []int64
	for _, e := range entries {
		v, err := goose.NumericComponent(e)
		if err != nil {
			panic(fmt.Sprintf("store: migration %s: %v", e, err))
		}
		vs = append(vs, v)
	}
	return vs // fs.Glob sorts names, and names are zero-padded
}

// migrate applies the pending migrations to the database at path, whose open handle is db.
//
// Several processes may open an old file at once and all start migrating: a migration that
// another process applied first fails here ("table already exists"). That is fine once nothing is
// pending; while another process is still migrating, migrate waits and tries again, for as long
// as the schema version keeps moving (BusyTimeout without progress ends it with the error).
func migrate(ctx context.Context, db *sql.DB, path string) error {
	cur, latest, err := schemaVersions(ctx, db)
	if err != nil {
		return err
	}
	if cur > latest {
		return fmt.Errorf("schema version %d is newer than this program's %d: use a newer specsweep", cur, latest)
	}
	deadline := time.Now().Add(BusyTimeout)
	for cur < latest {
		err := migrateUp(ctx, path)
		if err == nil {
			return nil
		}
		got, _, err2 := schemaVersions(ctx, db)
		switch {
		case err2 != nil:
			return errors.Join(err, err2)
		case got >= latest:
			return nil
		case got > cur: // another process is migrating
			deadline = time.Now().Add(BusyTimeout)
		case time.Now().After(deadline):
			return err
		}
		cur = got
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// migrateUp runs goose on a pool of its own (with the migrations' SQL functions: openMigrationDB),
// closed afterwards: a migration that rebuilds a table turns foreign keys off on its connection and
// runs its own transaction, and neither that setting nor a transaction left open by a failed
// migration may reach a connection of the store's pool. Closing the pool rolls such a transaction
// back and releases its lock.
func migrateUp(ctx context.Context, path string) error {
	mdb := openMigrationDB(path)
	defer mdb.Close()
	p, err := newProvider(mdb)
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// write runs fn in one IMMEDIATE transaction.
func (db *DB) write(ctx context.Context, fn func(tx *sql.Tx) error) (err error) {
	if db.readOnly {
		return ErrReadOnly
	}
	tx, err := db.rw.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// ms converts a time to unix milliseconds; the zero time becomes NULL.
func ms(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

// fromMS converts nullable unix milliseconds to a UTC time (zero for NULL).
func fromMS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64).UTC()
}

func (db *DB) nowMS() int64 { return db.now().UnixMilli() }

// retryBusy retries fn while it fails with SQLITE_BUSY or SQLITE_LOCKED,
// for at most BusyTimeout.
func retryBusy(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(BusyTimeout)
	for {
		err := fn()
		var se sqlite3.Error
		if err == nil || !errors.As(err, &se) || (se.Code != sqlite3.ErrBusy && se.Code != sqlite3.ErrLocked) ||
			time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func isUniqueViolation(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.Code == sqlite3.ErrConstraint &&
		(se.ExtendedCode == sqlite3.ErrConstraintUnique || se.ExtendedCode == sqlite3.ErrConstraintPrimaryKey)
}
