package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// LatestInstance returns the newest sweep fired by a schedule (ErrNotFound when none was).
func (db *DB) LatestInstance(ctx context.Context, scheduleID int64) (Sweep, error) {
	s, err := db.sweepWhere(ctx, "WHERE s.schedule_id = ?", scheduleID)
	if err != nil {
		return Sweep{}, fmt.Errorf("store: latest instance of schedule %d: %w", scheduleID, err)
	}
	return s, nil
}

// CancelSweep marks a sweep cancelled and cancels its pending and waiting points, in one
// transaction. Points still running are left to the process that runs them: it sees the state,
// stops them and marks them cancelled (a sweep cancelled while no process runs it is cleaned up by
// the next resume or daemon start).
func (db *DB) CancelSweep(ctx context.Context, id int64, reason string) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		now := db.nowMS()
		if err := setSweepState(ctx, tx, now, id, SweepCancelled, reason); err != nil {
			return err
		}
		_, err := cancelPoints(ctx, tx, now, id, reason)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: cancel sweep %d: %w", id, err)
	}
	return nil
}

// ErrNotResumable: only cancelled, interrupted and failed sweeps can be put back in the queue.
var ErrNotResumable = errors.New("not resumable")

// ResumeSweep puts a cancelled, interrupted or failed sweep back in the queue, in one transaction:
// points left running by a dead process and cancelled points become pending again, searched ones
// waiting (their runs superseded); failed and pruned points stay so. A cancelled schedule template
// becomes scheduled again.
func (db *DB) ResumeSweep(ctx context.Context, id int64, reason string) (Sweep, error) {
	err := db.write(ctx, func(tx *sql.Tx) error {
		now := db.nowMS()
		var state SweepState
		var schedule string
		var scheduleID sql.NullInt64
		var points int
		if err := tx.QueryRowContext(ctx, `SELECT state, schedule, schedule_id, (SELECT count(*) FROM points WHERE sweep_id = s.id)
			FROM sweeps s WHERE id = ?`, id).Scan(&state, &schedule, &scheduleID, &points); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			}
			return err
		}
		switch state {
		case SweepCancelled, SweepInterrupted, SweepFailed:
		default:
			return fmt.Errorf("sweep is %s: %w", state, ErrNotResumable)
		}
		rows, err := pointRows(ctx, tx, id, PointRunning)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := release(ctx, tx, now, id, r, reason); err != nil {
				return err
			}
		}
		if rows, err = pointRows(ctx, tx, id, PointCancelled); err != nil {
			return err
		}
		for _, r := range rows {
			if err := setState(ctx, tx, now, id, r, requeueState(r.searched), "", reason); err != nil {
				return err
			}
		}
		to := SweepQueued
		if state == SweepCancelled && schedule != "" && !scheduleID.Valid && points == 0 {
			to = SweepScheduled // a schedule's template fires again
		}
		// A resume is the operator's word that the sweep may run again: its count of daemon deaths
		// starts afresh.
		if _, err := tx.ExecContext(ctx, `UPDATE sweeps SET daemon_deaths = 0 WHERE id = ?`, id); err != nil {
			return err
		}
		return setSweepState(ctx, tx, now, id, to, reason)
	})
	if err != nil {
		return Sweep{}, fmt.Errorf("store: resume sweep %d: %w", id, err)
	}
	return db.Sweep(ctx, id)
}

// RequeueRunning puts every running sweep back in the queue with its running points pending again
// (searched ones waiting): what a daemon does at start for the sweeps a dead daemon left behind (a
// daemon that stops cleanly requeues its sweeps itself, so a sweep still running here saw its daemon
// die). Each such sweep's count of daemon deaths goes up by one; one whose count reaches holdAfter
// (0: never) is held instead: interrupted, with an event saying why, until a resume releases it. It
// returns the ids requeued and the ids held.
func (db *DB) RequeueRunning(ctx context.Context, reason string, holdAfter int) (requeued, held []int64, err error) {
	err = db.write(ctx, func(tx *sql.Tx) error {
		requeued, held = nil, nil
		now := db.nowMS()
		type dead struct {
			id     int64
			deaths int
		}
		var sweeps []dead
		rows, err := tx.QueryContext(ctx, `SELECT id, daemon_deaths + 1 FROM sweeps WHERE state = 'running' ORDER BY id`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var d dead
			if err := rows.Scan(&d.id, &d.deaths); err != nil {
				rows.Close()
				return err
			}
			sweeps = append(sweeps, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, d := range sweeps {
			pts, err := pointRows(ctx, tx, d.id, PointRunning)
			if err != nil {
				return err
			}
			for _, r := range pts {
				if err := release(ctx, tx, now, d.id, r, reason); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, `UPDATE sweeps SET daemon_deaths = ? WHERE id = ?`, d.deaths, d.id); err != nil {
				return err
			}
			if holdAfter > 0 && d.deaths >= holdAfter {
				detail := fmt.Sprintf("held: the daemon died %d times while running this sweep, so it is not requeued "+
					"(a spec that kills the daemon would kill it at every start); `specsweep resume` releases it", d.deaths)
				if err := setSweepState(ctx, tx, now, d.id, SweepInterrupted, detail); err != nil {
					return err
				}
				held = append(held, d.id)
				continue
			}
			detail := fmt.Sprintf("%s (daemon deaths during this sweep: %d", reason, d.deaths)
			if holdAfter > 0 {
				detail += fmt.Sprintf(" of %d before it is held", holdAfter)
			}
			if err := setSweepState(ctx, tx, now, d.id, SweepQueued, detail+")"); err != nil {
				return err
			}
			requeued = append(requeued, d.id)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("store: requeue running sweeps: %w", err)
	}
	return requeued, held, nil
}
