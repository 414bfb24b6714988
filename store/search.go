package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
)

// A search (spec `search:`) decides which of a sweep's searched points run: it reads its inputs
// with SearchInputs and records its decisions with ApplySearch. Its decisions are a pure function
// of the recorded runs, so a searched point that goes back (requeued, interrupted) waits for the
// search again instead of becoming pending (see PointState).

// SearchDecision is the search's decision about one waiting point.
type SearchDecision struct {
	PointID string // the plan's id of the point
	// Reason says why, for people, e.g. "after steps 6: +0.3% at c=1, -2.1% at c=64, below
	// min_gain 2%". Stored as the point's reason ("" stores none) and as the event's detail.
	Reason string
}

// ApplySearch records a search's decisions, in one transaction: each point of release goes from
// waiting to pending (the workers claim it as any other), each of prune from waiting to pruned
// (final), with its reason, and each decision writes an event (kind "released" or "pruned", the
// reason as detail). A point that is not waiting (ErrTransition) or not part of the sweep
// (ErrNotFound), or named twice, fails the call and nothing is applied.
func (db *DB) ApplySearch(ctx context.Context, sweepID int64, release []SearchDecision, prune []SearchDecision) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		now := db.nowMS()
		for _, step := range []struct {
			decisions []SearchDecision
			to        PointState
			verb      string
		}{{release, PointPending, "release"}, {prune, PointPruned, "prune"}} {
			for _, d := range step.decisions {
				if err := decide(ctx, tx, now, sweepID, d, step.to, step.verb+"d"); err != nil {
					return fmt.Errorf("%s point %q: %w", step.verb, d.PointID, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: apply search to sweep %d: %w", sweepID, err)
	}
	return nil
}

func decide(ctx context.Context, tx *sql.Tx, now, sweepID int64, d SearchDecision, to PointState, kind string) error {
	r, err := lookupPoint(ctx, tx, sweepID, d.PointID)
	if err != nil {
		return err
	}
	if r.state != PointWaiting {
		return fmt.Errorf("point is %s, not waiting: %w", r.state, ErrTransition)
	}
	set, args := "reason = ?", []any{sql.NullString{String: d.Reason, Valid: d.Reason != ""}}
	if to == PointPruned {
		set += ", finished_at = ?"
		args = append(args, now)
	}
	if err := transition(ctx, tx, r, to, set, args...); err != nil {
		return err
	}
	return insertEvent(ctx, tx, now, sweepID, &r.ref, r.host, kind, d.Reason)
}

// SearchPoint is one point of a sweep as a search sees it.
type SearchPoint struct {
	PointID  string
	State    PointState
	Searched bool   // a search decides whether it runs
	Reason   string // the search's reason for releasing or pruning it; "" when none
	// Runs are the runs of the point's current attempt that are not superseded (ok and failed),
	// by concurrency, repeat, then cell (dataset, input tokens; the NULL ones first); none when
	// it has not run (or went back to waiting).
	Runs []SearchRun
}

// SearchRun is one run a search reads.
type SearchRun struct {
	Concurrency, Repeat int
	// Dataset and InputTokens are the run's cell, as in Run: "" and 0 for NULL. A level measured
	// on several cells has one run each.
	Dataset     string
	InputTokens int
	Status      RunStatus
	// OutputTokS and AcceptLength are nil when the run did not measure them (a failed run, a
	// baseline's accept length).
	OutputTokS, AcceptLength *float64
	// TokSLow and TokSHigh are the run's confidence interval of output tok/s (ci_metric
	// output_tok_s), nil without one.
	TokSLow, TokSHigh *float64
}

// SearchInputs reads what a search decides from: every point of the sweep in plan order, with its
// state, reason and the runs of its current attempt that are not superseded. One query, on the
// read-only connection.
func (db *DB) SearchInputs(ctx context.Context, sweepID int64) ([]SearchPoint, error) {
	var out []SearchPoint
	err := db.scan(ctx, `SELECT p.point_id, p.state, p.searched, p.reason,
		r.concurrency, r.repeat, r.status, r.output_tok_s, r.accept_length, r.dataset, r.input_tokens,
		CASE WHEN r.ci_metric = 'output_tok_s' THEN r.ci_low END, CASE WHEN r.ci_metric = 'output_tok_s' THEN r.ci_high END
		FROM points p
		LEFT JOIN runs r ON r.point_ref = p.id AND r.attempt = p.attempts AND r.status <> 'superseded'
		WHERE p.sweep_id = ?
		ORDER BY p.plan_order, r.concurrency, r.repeat, r.dataset, r.input_tokens`, []any{sweepID}, func(_ []string, v []driver.Value) error {
		id := vString(v[0])
		if len(out) == 0 || out[len(out)-1].PointID != id {
			out = append(out, SearchPoint{PointID: id, State: PointState(vString(v[1])),
				Searched: vInt64(v[2]) != 0, Reason: vString(v[3])})
		}
		if v[4] == nil { // no run
			return nil
		}
		f := make([]float64, 4) // one allocation for the run's figures
		p := &out[len(out)-1]
		p.Runs = append(p.Runs, SearchRun{Concurrency: int(vInt64(v[4])), Repeat: int(vInt64(v[5])),
			Dataset: vString(v[9]), InputTokens: int(vInt64(v[10])),
			Status: RunStatus(vString(v[6])), OutputTokS: vFloat(v[7], &f[0]), AcceptLength: vFloat(v[8], &f[1]),
			TokSLow: vFloat(v[11], &f[2]), TokSHigh: vFloat(v[12], &f[3])})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: search inputs of sweep %d: %w", sweepID, err)
	}
	return out, nil
}
