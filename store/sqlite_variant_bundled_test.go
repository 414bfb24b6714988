//go:build !libsqlite3

package store

// linkedSystemSQLite: this test binary carries go-sqlite3's own copy of SQLite (its amalgamation).
const linkedSystemSQLite = false
