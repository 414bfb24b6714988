package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// The apply history (issue 29; migration 11, docs/schema.md "applies"): each `specsweep apply` and
// `restore --applied` is a row, begun before the host is touched and ended with its result.

// Apply actions, choices and results (the applies table's CHECK constraints).
const (
	ApplyActionApply   = "apply"
	ApplyActionUnapply = "unapply"

	ApplyRunning        = "running"
	ApplyApplied        = "applied"
	ApplyRolledBack     = "rolled_back"
	ApplyRollbackFailed = "rollback_failed"
	ApplyUnapplied      = "unapplied"
	ApplyDryRun         = "dry_run"
	ApplyFailed         = "failed"
)

// NewApply is an apply (or unapply) as it begins.
type NewApply struct {
	Action  string
	Host    string
	Unit    string
	SweepID int64 // 0: none (an unapply)
	PointID string
	Choice  string // recommended, adaptive, point; "" for an unapply
	Label   string
	By      string
}

// ApplyEnd is how an apply ended.
type ApplyEnd struct {
	Result        string
	Failure       string // "", start, output, speed, host
	Detail        string
	Evidence      json.RawMessage // nil: none
	EngineVersion string
}

// Apply is a row of the history.
type Apply struct {
	ID int64
	NewApply
	StartedAt  time.Time
	FinishedAt time.Time // zero while running
	ApplyEnd
}

// BeginApply records an apply as it begins (result running) and returns its id.
func (db *DB) BeginApply(ctx context.Context, a NewApply) (int64, error) {
	var id int64
	err := db.write(ctx, func(tx *sql.Tx) error {
		var sweep any
		if a.SweepID != 0 {
			sweep = a.SweepID
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO applies (action, host, unit, sweep_id, point_id, choice, label, by, started_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, a.Action, a.Host, a.Unit, sweep, a.PointID, a.Choice, a.Label, a.By, db.nowMS())
		if err != nil {
			return err
		}
		id, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: begin %s on host %q: %w", a.Action, a.Host, err)
	}
	return id, nil
}

// FinishApply records how apply id ended.
func (db *DB) FinishApply(ctx context.Context, id int64, e ApplyEnd) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		var ev any
		if len(e.Evidence) > 0 {
			ev = string(e.Evidence)
		}
		res, err := tx.ExecContext(ctx, `UPDATE applies SET finished_at = ?, result = ?, failure = ?, detail = ?, evidence = ?,
			engine_version = ? WHERE id = ?`, db.nowMS(), e.Result, e.Failure, e.Detail, ev, e.EngineVersion, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("no apply %d", id)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: finish apply %d: %w", id, err)
	}
	return nil
}

// Applies is the history of host (every host when ""), newest first, at most limit rows.
func (db *DB) Applies(ctx context.Context, host string, limit int) ([]Apply, error) {
	if limit < 1 {
		return nil, fmt.Errorf("store: applies: limit %d, want at least 1", limit)
	}
	rows, err := db.rw.QueryContext(ctx, `SELECT id, action, host, unit, coalesce(sweep_id, 0), point_id, choice, label, by,
		started_at, coalesce(finished_at, 0), result, failure, detail, coalesce(evidence, ''), engine_version
		FROM applies WHERE ? = '' OR host = ? ORDER BY started_at DESC, id DESC LIMIT ?`, host, host, limit)
	if err != nil {
		return nil, fmt.Errorf("store: applies of %q: %w", host, err)
	}
	defer rows.Close()
	var out []Apply
	for rows.Next() {
		var a Apply
		var started, finished int64
		var ev string
		if err := rows.Scan(&a.ID, &a.Action, &a.Host, &a.Unit, &a.SweepID, &a.PointID, &a.Choice, &a.Label, &a.By,
			&started, &finished, &a.Result, &a.Failure, &a.Detail, &ev, &a.EngineVersion); err != nil {
			return nil, fmt.Errorf("store: applies of %q: %w", host, err)
		}
		a.StartedAt = time.UnixMilli(started).UTC()
		if finished != 0 {
			a.FinishedAt = time.UnixMilli(finished).UTC()
		}
		if ev != "" {
			a.Evidence = json.RawMessage(ev)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: applies of %q: %w", host, err)
	}
	return out, nil
}
