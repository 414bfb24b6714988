package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
)

// The lossless output check (docs/schema.md): before its load ladder every point answers a few
// fixed prompts greedily, and its outputs are compared with those of its reference, the baseline
// point of the same tp (which answers them twice, so its own run-to-run agreement is known). The
// comparison may come later than the point's run, so the outputs are stored (SetPointOutputs), read
// back (OutputChecks) and the verdict recorded (SetOutputCheck). The outputs and the verdict belong
// to the point's current attempt: they are cleared whenever the point goes back to pending or
// waiting (with its runs superseded) and whenever new outputs are stored.

// Output check results (OutputCheck.Result, points.output_check).
const (
	// OutputCheckReference: the point is a reference (a baseline); Agreement is the agreement of
	// its own two answers to the prompts.
	OutputCheckReference = "reference"
	// OutputCheckOK: the point's outputs agree with its reference's.
	OutputCheckOK = "ok"
	// OutputCheckMismatch: they do not; Evidence says where they first diverge.
	OutputCheckMismatch = "mismatch"
)

// ErrNoOutputs: an output check of a point that has no stored outputs (none were stored for its
// current attempt, or it went back to pending or waiting since).
var ErrNoOutputs = errors.New("no outputs stored")

// clearOutputs is the SET clause that forgets a point's outputs and output check.
const clearOutputs = "outputs = NULL, output_check = NULL, output_agreement = NULL, output_evidence = NULL"

// OutputCheck is the verdict on a point's stored outputs.
type OutputCheck struct {
	Result string // OutputCheckReference, OutputCheckOK or OutputCheckMismatch
	// Agreement is in [0, 1] (nil: not measured): for a reference, between its own two answers;
	// otherwise between the point's outputs and its reference's.
	Agreement *float64
	// Evidence is JSON (nil: none), e.g. the first divergent prompt and position and the two texts.
	Evidence json.RawMessage
	// Attempt, when not 0, is the attempt whose outputs were compared: the check is refused with
	// ErrStaleAttempt if the point's current attempt is another (it was re-run meanwhile).
	Attempt int
}

// SetPointOutputs stores what the current attempt of a running point answered to the output
// check's prompts: JSON the store does not interpret (e.g. {"prompts": N, "runs": [[text, ...],
// [text, ...]]}). It replaces earlier outputs and clears the output check (its agreement and
// evidence), which was about other outputs. It fails with ErrTransition if the point is not
// running and ErrStaleAttempt if attempt is not its current attempt.
func (db *DB) SetPointOutputs(ctx context.Context, sweepID int64, pointID string, attempt int, outputs json.RawMessage) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		if len(outputs) == 0 {
			return errors.New("no outputs given")
		}
		if !json.Valid(outputs) {
			return errors.New("outputs are not valid JSON")
		}
		r, err := lookupPoint(ctx, tx, sweepID, pointID)
		if err != nil {
			return err
		}
		if err := r.checkRunning(attempt); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE points SET `+clearOutputs+`, outputs = ? WHERE id = ?`, string(outputs), r.ref)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: set outputs of point %s of sweep %d: %w", pointID, sweepID, err)
	}
	return nil
}

// SetOutputCheck records the verdict on a point's stored outputs, in any state (the comparison may
// come after the point finished), and an event of kind "output_check" whose detail is one line,
// e.g. "mismatch: agreement 0.31 (reference 1.00)": the reference's figure is the agreement
// between its own answers of the point of the same tp checked as the reference (the first in plan
// order), when there is one. A later check replaces an earlier one. Only a baseline point can be a
// reference. It fails with ErrNoOutputs when the point has no stored outputs, and with
// ErrStaleAttempt when check.Attempt is given and is not the point's current attempt, or the
// outputs of that attempt were cleared (the point went back to pending or waiting: the error is
// then both ErrNoOutputs and ErrStaleAttempt).
func (db *DB) SetOutputCheck(ctx context.Context, sweepID int64, pointID string, check OutputCheck) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		switch check.Result {
		case OutputCheckReference, OutputCheckOK, OutputCheckMismatch:
		default:
			return fmt.Errorf("unknown output check result %q (want %s, %s or %s)", check.Result,
				OutputCheckReference, OutputCheckOK, OutputCheckMismatch)
		}
		if a := check.Agreement; a != nil && !(*a >= 0 && *a <= 1) { // NaN too
			return fmt.Errorf("agreement %v is not in [0, 1]", *a)
		}
		if len(check.Evidence) > 0 && !json.Valid(check.Evidence) {
			return errors.New("evidence is not valid JSON")
		}
		r, err := lookupPoint(ctx, tx, sweepID, pointID)
		if err != nil {
			return err
		}
		if check.Attempt != 0 && check.Attempt != r.attempts {
			return fmt.Errorf("attempt %d, but the point's current attempt is %d: %w", check.Attempt, r.attempts, ErrStaleAttempt)
		}
		var baseline, hasOutputs bool
		var tp int
		if err := tx.QueryRowContext(ctx, `SELECT baseline, outputs IS NOT NULL, tp FROM points WHERE id = ?`,
			r.ref).Scan(&baseline, &hasOutputs, &tp); err != nil {
			return err
		}
		if !hasOutputs {
			if check.Attempt != 0 {
				// The outputs compared were the attempt's, cleared since: the point went back.
				return fmt.Errorf("point is %s, the outputs of attempt %d are gone: %w: %w", r.state, check.Attempt,
					ErrNoOutputs, ErrStaleAttempt)
			}
			return fmt.Errorf("point is %s: %w", r.state, ErrNoOutputs)
		}
		if check.Result == OutputCheckReference && !baseline {
			return errors.New("only a baseline point can be a reference")
		}
		var agreement sql.NullFloat64
		if check.Agreement != nil {
			agreement = sql.NullFloat64{Float64: *check.Agreement, Valid: true}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE points SET output_check = ?, output_agreement = ?, output_evidence = ?
			WHERE id = ?`, check.Result, agreement, nullRaw(check.Evidence), r.ref); err != nil {
			return err
		}
		detail := check.Result
		if check.Agreement != nil {
			detail += fmt.Sprintf(": agreement %.2f", *check.Agreement)
		}
		if check.Result == OutputCheckReference {
			if check.Agreement != nil {
				detail += " between its own runs"
			}
		} else {
			// The reference of the tp: its (first) point checked as one.
			var ref sql.NullFloat64
			err := tx.QueryRowContext(ctx, `SELECT output_agreement FROM points
				WHERE sweep_id = ? AND tp = ? AND output_check = 'reference' ORDER BY plan_order LIMIT 1`,
				sweepID, tp).Scan(&ref)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if ref.Valid {
				detail += fmt.Sprintf(" (reference %.2f)", ref.Float64)
			}
		}
		return insertEvent(ctx, tx, db.nowMS(), sweepID, &r.ref, r.host, "output_check", detail)
	})
	if err != nil {
		return fmt.Errorf("store: set output check of point %s of sweep %d: %w", pointID, sweepID, err)
	}
	return nil
}

// PointOutputs is one point's stored outputs and output check.
type PointOutputs struct {
	PointID  string
	TP       int
	Baseline bool // runs without speculative decoding: a reference candidate
	State    PointState
	// Attempt is the point's current attempt, the one its outputs (if any) belong to; 0 if it
	// never started. Pass it as OutputCheck.Attempt.
	Attempt int
	// Outputs is what the attempt answered (the JSON given to SetPointOutputs); nil when none.
	Outputs json.RawMessage
	// Check is the verdict (OutputCheckReference, OutputCheckOK, OutputCheckMismatch); "" when
	// not checked.
	Check     string
	Agreement *float64        // nil when not measured
	Evidence  json.RawMessage // nil when none
}

// OutputChecks reads every point of a sweep in plan order with its stored outputs and output
// check, in one query on the read-only connection.
func (db *DB) OutputChecks(ctx context.Context, sweepID int64) ([]PointOutputs, error) {
	var out []PointOutputs
	err := db.scan(ctx, `SELECT point_id, tp, baseline, state, attempts, outputs, output_check, output_agreement,
		output_evidence FROM points WHERE sweep_id = ? ORDER BY plan_order`, []any{sweepID},
		func(_ []string, v []driver.Value) error {
			p := PointOutputs{PointID: vString(v[0]), TP: int(vInt64(v[1])), Baseline: vInt64(v[2]) != 0,
				State: PointState(vString(v[3])), Attempt: int(vInt64(v[4])), Check: vString(v[6])}
			if v[5] != nil {
				p.Outputs = json.RawMessage(vString(v[5]))
			}
			var a float64
			p.Agreement = vFloat(v[7], &a)
			if v[8] != nil {
				p.Evidence = json.RawMessage(vString(v[8]))
			}
			out = append(out, p)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("store: output checks of sweep %d: %w", sweepID, err)
	}
	return out, nil
}
