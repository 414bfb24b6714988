package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Event is one entry of the event log.
type Event struct {
	SweepID int64  // 0 for an event of no sweep (e.g. the daemon's)
	PointID string // "" for an event of no point
	Host    string
	At      time.Time // zero means now
	Kind    string    // e.g. state, sweep_state, stop, stop_timeout_sigkill, reconnect
	Detail  string
}

// AddEvent appends an event to the log.
func (db *DB) AddEvent(ctx context.Context, e Event) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		at := db.nowMS()
		if !e.At.IsZero() {
			at = e.At.UnixMilli()
		}
		var ref *int64
		if e.PointID != "" {
			r, err := lookupPoint(ctx, tx, e.SweepID, e.PointID)
			if err != nil {
				return err
			}
			ref = &r.ref
		}
		return insertEvent(ctx, tx, at, e.SweepID, ref, e.Host, e.Kind, e.Detail)
	})
	if err != nil {
		return fmt.Errorf("store: add %s event (sweep %d, point %q): %w", e.Kind, e.SweepID, e.PointID, err)
	}
	return nil
}

func insertEvent(ctx context.Context, tx *sql.Tx, at, sweepID int64, pointRef *int64, host, kind, detail string) error {
	if kind == "" {
		return fmt.Errorf("event without kind")
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO events (sweep_id, point_ref, host, at, kind, detail)
		VALUES (?, ?, ?, ?, ?, ?)`,
		sql.NullInt64{Int64: sweepID, Valid: sweepID != 0}, pointRef,
		sql.NullString{String: host, Valid: host != ""}, at, kind, detail)
	return err
}

// Events returns a sweep's events in order (all of them, or those of one
// point when pointID is not empty).
func (db *DB) Events(ctx context.Context, sweepID int64, pointID string) ([]Event, error) {
	rows, err := db.rw.QueryContext(ctx, `SELECT coalesce(p.point_id, ''), coalesce(e.host, ''), e.at, e.kind, e.detail
		FROM events e LEFT JOIN points p ON p.id = e.point_ref
		WHERE e.sweep_id = ? AND (? = '' OR p.point_id = ?) ORDER BY e.at, e.id`, sweepID, pointID, pointID)
	if err != nil {
		return nil, fmt.Errorf("store: events of sweep %d: %w", sweepID, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		e := Event{SweepID: sweepID}
		var at int64
		if err := rows.Scan(&e.PointID, &e.Host, &at, &e.Kind, &e.Detail); err != nil {
			return nil, fmt.Errorf("store: events of sweep %d: %w", sweepID, err)
		}
		e.At = time.UnixMilli(at).UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: events of sweep %d: %w", sweepID, err)
	}
	return out, nil
}
