// Package migrations holds the SQL schema of the specsweep store as embedded,
// versioned, forward-only goose migrations (NNNNN_name.sql). The store package
// applies them when it opens a database.
//
// Rules for adding a migration: never edit a released file; add the next
// number; write only a "-- +goose Up" section (the schema moves forward only);
// a table rebuild needs "-- +goose NO TRANSACTION" because SQLite ignores
// PRAGMA foreign_keys inside a transaction. The store's migration tests apply
// every earlier version, insert data and upgrade, so add a seed for the new
// version there when the change touches existing tables. Besides SQLite's own
// functions a migration may call those of the store's migration connection
// (store/migrate.go: specsweep_spec_workload), so migration 10 on is applied
// by specsweep, not by the goose command.
package migrations

import "embed"

// FS holds the migration files at its root.
//
//go:embed *.sql
var FS embed.FS
