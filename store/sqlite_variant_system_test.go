//go:build libsqlite3

package store

// linkedSystemSQLite: this test binary links the system's SQLite (go-sqlite3's libsqlite3 tag, which
// the Makefile sets when libsqlite3-dev is there).
const linkedSystemSQLite = true
