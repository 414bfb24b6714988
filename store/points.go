package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// PointState is the state of one point of a sweep.
//
//	waiting -> pending     ApplySearch releases it (a searched point only)
//	waiting -> pruned      ApplySearch prunes it
//	waiting -> cancelled   CancelPoints, CancelSweep
//	pending -> running     ClaimPoint, ClaimNextPoint (attempts+1)
//	running -> done        FinishPoint, RecordRunAndFinish
//	running -> failed      FinishPoint with a FailureClass
//	running -> cancelled   FinishPoint
//	running -> pending     ReleasePoint, RecoverInterrupted, ResumeSweep, RequeueRunning
//	                       (the attempt's runs become superseded)
//	pending -> cancelled   CancelPoints, CancelSweep
//	failed, cancelled -> pending   RequeuePoints, ResumeSweep (their runs become superseded)
//
// A searched point (NewPoint.Searched: a search decides whether it runs) starts
// waiting, and wherever another point goes back to pending (running -> pending,
// failed, cancelled -> pending) it goes back to waiting instead: the search
// decides it again from the recorded runs, and its reason is cleared. A
// searched point becomes pending only by ApplySearch; a point that is not
// searched is never waiting or pruned.
//
// done and pruned are final. Whenever a point goes back to pending or waiting,
// every run it has is marked superseded, and its outputs and output check are
// cleared, so the ok runs and the outputs of a point always belong to its
// current attempt.
type PointState string

// Point states.
const (
	PointWaiting   PointState = "waiting"
	PointPending   PointState = "pending"
	PointRunning   PointState = "running"
	PointDone      PointState = "done"
	PointFailed    PointState = "failed"
	PointCancelled PointState = "cancelled"
	PointPruned    PointState = "pruned"
)

var pointTransitions = map[PointState][]PointState{
	PointWaiting:   {PointPending, PointPruned, PointCancelled},
	PointPending:   {PointRunning, PointCancelled},
	PointRunning:   {PointDone, PointFailed, PointCancelled, PointPending, PointWaiting},
	PointFailed:    {PointPending, PointWaiting},
	PointCancelled: {PointPending, PointWaiting},
	PointDone:      nil,
	PointPruned:    nil,
}

// Valid reports whether s is a known point state.
func (s PointState) Valid() bool { _, ok := pointTransitions[s]; return ok }

// CanTransition reports whether a point may move from s to to. Whether the
// point is searched narrows this further (see PointState): running,
// failed and cancelled go back to waiting for a searched point and to pending
// for any other.
func (s PointState) CanTransition(to PointState) bool {
	for _, t := range pointTransitions[s] {
		if t == to {
			return true
		}
	}
	return false
}

// Final reports whether no change leaves s (done and pruned).
func (s PointState) Final() bool { return s.Valid() && len(pointTransitions[s]) == 0 }

// requeueState is the state a point goes back to when its attempt is interrupted or it is
// requeued: waiting for a searched point (the search decides it again), pending for any other.
func requeueState(searched bool) PointState {
	if searched {
		return PointWaiting
	}
	return PointPending
}

// FailureClass says why a point failed (docs/schema.md, point_summary.failure_class).
type FailureClass string

// Failure classes.
const (
	FailBadArgs            FailureClass = "bad_args"
	FailOOM                FailureClass = "oom"
	FailCrashDuringLoad    FailureClass = "crash_during_load"
	FailCrashDuringStart   FailureClass = "crash_during_start"
	FailStopTimeoutSigkill FailureClass = "stop_timeout_sigkill"
	FailRestartLoop        FailureClass = "restart_loop"
	FailReadyTimeout       FailureClass = "ready_timeout"
	FailHostUnreachable    FailureClass = "host_unreachable"
	FailGPUBusy            FailureClass = "gpu_busy"
	FailLaunchFailed       FailureClass = "launch_failed"
	FailInterrupted        FailureClass = "interrupted"
	// FailOutputMismatch: the point's greedy outputs differ from its reference's (the baseline
	// of the same tp) beyond the reference's own run-to-run agreement (SetOutputCheck). The
	// orchestrator's own class, as FailInterrupted: no hostctl class maps to it.
	FailOutputMismatch FailureClass = "output_mismatch"
)

// FailureClasses lists every known failure class.
var FailureClasses = []FailureClass{
	FailBadArgs, FailOOM, FailCrashDuringLoad, FailCrashDuringStart, FailStopTimeoutSigkill,
	FailRestartLoop, FailReadyTimeout, FailHostUnreachable, FailGPUBusy, FailLaunchFailed, FailInterrupted,
	FailOutputMismatch,
}

// Valid reports whether c is a known failure class.
func (c FailureClass) Valid() bool {
	for _, k := range FailureClasses {
		if c == k {
			return true
		}
	}
	return false
}

// Point is a stored point. NewPoint.Searched says whether a search decides its running.
type Point struct {
	SweepID   int64
	PlanOrder int
	NewPoint

	State PointState
	// Reason is the search's reason for releasing or pruning the point; "" when it gave none (or
	// the point is waiting, or not searched).
	Reason   string
	Attempts int    // attempts started so far; the current attempt's number
	Host     string // host of the current attempt
	// FailureClass and FailureDetail: why the point failed, or, for a pending
	// (or waiting) point whose attempt was interrupted, FailInterrupted and the
	// reason.
	FailureClass  FailureClass
	FailureDetail string
	PointInfo
	CreatedAt  time.Time
	StartedAt  time.Time // of the current attempt
	FinishedAt time.Time // of the current attempt
}

// PointInfo is what an attempt learns about its server.
type PointInfo struct {
	EffectiveArgs json.RawMessage // JSON, e.g. from /get_server_info
	Provenance    json.RawMessage // JSON: versions, hashes, host facts
	ExecStart     string          // the unit's ExecStart as written
	Load          time.Duration   // start to ready
	// The speculative parameters the server reports it runs with (nil: not reported), stored
	// beside the requested ones: SGLang forces some (topk 1: draft tokens = steps+1) and chooses
	// others when they are not given.
	EffectiveNumSteps, EffectiveTopK, EffectiveNumDraftTokens *int
}

// PointFinish ends an attempt.
type PointFinish struct {
	State         PointState   // PointDone, PointFailed or PointCancelled
	FailureClass  FailureClass // required for PointFailed, empty otherwise
	FailureDetail string
}

const pointSelect = `SELECT p.sweep_id, p.plan_order, p.point_id, p.method, p.baseline, p.num_steps, p.topk,
	p.num_draft_tokens, p.tp, p.argv, p.env, p.planned_runs, p.state, p.attempts, p.host,
	p.failure_class, p.failure_detail, p.effective_args, p.provenance, p.exec_start, p.load_s,
	p.created_at, p.started_at, p.finished_at, p.effective_num_steps, p.effective_topk,
	p.effective_num_draft_tokens, p.searched, p.reason FROM points p `

func scanPoint(sc interface{ Scan(...any) error }) (Point, error) {
	var p Point
	var steps, topk, draft sql.NullInt64
	var argv, env string
	var host, class, detail, effArgs, prov, execStart sql.NullString
	var load sql.NullFloat64
	var created, started, finished sql.NullInt64
	var effSteps, effTopK, effDraft sql.NullInt64
	var reason sql.NullString
	err := sc.Scan(&p.SweepID, &p.PlanOrder, &p.ID, &p.Method, &p.Baseline, &steps, &topk, &draft,
		&p.TP, &argv, &env, &p.Runs, &p.State, &p.Attempts, &host, &class, &detail, &effArgs, &prov,
		&execStart, &load, &created, &started, &finished, &effSteps, &effTopK, &effDraft, &p.Searched, &reason)
	if err != nil {
		return Point{}, err
	}
	p.Reason = reason.String
	p.NumSteps, p.TopK, p.NumDraftTokens = intPtr(steps), intPtr(topk), intPtr(draft)
	p.EffectiveNumSteps, p.EffectiveTopK, p.EffectiveNumDraftTokens = intPtr(effSteps), intPtr(effTopK), intPtr(effDraft)
	if err := json.Unmarshal([]byte(argv), &p.Argv); err != nil {
		return Point{}, fmt.Errorf("point %s: argv: %w", p.ID, err)
	}
	if err := json.Unmarshal([]byte(env), &p.Env); err != nil {
		return Point{}, fmt.Errorf("point %s: env: %w", p.ID, err)
	}
	p.Host, p.FailureClass, p.FailureDetail = host.String, FailureClass(class.String), detail.String
	if effArgs.Valid {
		p.EffectiveArgs = json.RawMessage(effArgs.String)
	}
	if prov.Valid {
		p.Provenance = json.RawMessage(prov.String)
	}
	p.ExecStart = execStart.String
	p.Load = time.Duration(load.Float64 * float64(time.Second))
	p.CreatedAt, p.StartedAt, p.FinishedAt = fromMS(created), fromMS(started), fromMS(finished)
	return p, nil
}

func intPtr(v sql.NullInt64) *int {
	if !v.Valid {
		return nil
	}
	i := int(v.Int64)
	return &i
}

// Points returns a sweep's points in plan order.
func (db *DB) Points(ctx context.Context, sweepID int64) ([]Point, error) {
	rows, err := db.rw.QueryContext(ctx, pointSelect+"WHERE p.sweep_id = ? ORDER BY p.plan_order", sweepID)
	if err != nil {
		return nil, fmt.Errorf("store: points of sweep %d: %w", sweepID, err)
	}
	defer rows.Close()
	var out []Point
	for rows.Next() {
		p, err := scanPoint(rows)
		if err != nil {
			return nil, fmt.Errorf("store: points of sweep %d: %w", sweepID, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: points of sweep %d: %w", sweepID, err)
	}
	return out, nil
}

// Point returns one point of a sweep.
func (db *DB) Point(ctx context.Context, sweepID int64, pointID string) (Point, error) {
	p, err := scanPoint(db.rw.QueryRowContext(ctx, pointSelect+"WHERE p.sweep_id = ? AND p.point_id = ?", sweepID, pointID))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Point{}, fmt.Errorf("store: point %s of sweep %d: %w", pointID, sweepID, err)
	}
	return p, nil
}

// pointRow is the part of a point a transition checks.
type pointRow struct {
	ref         int64
	state       PointState
	attempts    int
	host        string
	plannedRuns int
	searched    bool
}

func lookupPoint(ctx context.Context, tx *sql.Tx, sweepID int64, pointID string) (pointRow, error) {
	var r pointRow
	var host sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT id, state, attempts, host, planned_runs, searched FROM points
		WHERE sweep_id = ? AND point_id = ?`, sweepID, pointID).Scan(&r.ref, &r.state, &r.attempts, &host, &r.plannedRuns, &r.searched)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	r.host = host.String
	return r, err
}

// checkAttempt verifies that the point is running the caller's attempt.
func (r pointRow) checkRunning(attempt int) error {
	if r.state != PointRunning {
		return fmt.Errorf("point is %s, not running: %w", r.state, ErrTransition)
	}
	if attempt != r.attempts {
		return fmt.Errorf("attempt %d, but the point is running attempt %d: %w", attempt, r.attempts, ErrStaleAttempt)
	}
	return nil
}

// setState performs a checked update of a point's state (compare-and-set
// on the state read in the same transaction) and logs a "state" event.
func setState(ctx context.Context, tx *sql.Tx, now, sweepID int64, r pointRow, to PointState, set string, detail string, args ...any) error {
	if err := transition(ctx, tx, r, to, set, args...); err != nil {
		return err
	}
	msg := fmt.Sprintf("%s -> %s", r.state, to)
	if detail != "" {
		msg += " (" + detail + ")"
	}
	return insertEvent(ctx, tx, now, sweepID, &r.ref, r.host, "state", msg)
}

// transition is setState without the event: the checked update, and the
// superseding of the point's runs (and the clearing of its outputs and output
// check) when it goes back to pending or waiting.
func transition(ctx context.Context, tx *sql.Tx, r pointRow, to PointState, set string, args ...any) error {
	if !r.state.CanTransition(to) {
		return fmt.Errorf("point is %s, cannot become %s: %w", r.state, to, ErrTransition)
	}
	switch {
	case to == PointWaiting && !r.searched:
		return fmt.Errorf("point is not searched, cannot become %s: %w", to, ErrTransition)
	case to == PointPending && r.searched && r.state != PointWaiting:
		return fmt.Errorf("point is searched: it goes back to waiting, not pending: %w", ErrTransition)
	}
	q := "UPDATE points SET state = ?"
	if set != "" {
		q += ", " + set
	}
	if to == PointWaiting {
		q += ", reason = NULL" // the search decides it again
	}
	if to == PointPending || to == PointWaiting {
		q += ", " + clearOutputs // they were the attempt's, as its runs
	}
	q += " WHERE id = ? AND state = ?"
	res, err := tx.ExecContext(ctx, q, append(append([]any{to}, args...), r.ref, r.state)...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return fmt.Errorf("point changed concurrently: %w", ErrTransition)
	}
	if to == PointPending || to == PointWaiting {
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = 'superseded'
			WHERE point_ref = ? AND status <> 'superseded'`, r.ref); err != nil {
			return err
		}
	}
	return nil
}

// ClaimPoint moves a pending point to running on host, starting attempt
// attempts+1, and returns that attempt number. It fails with ErrTransition
// if the point is not pending (another worker claimed it), and with
// ErrNotFound if the point or the host is not part of the sweep.
func (db *DB) ClaimPoint(ctx context.Context, sweepID int64, pointID, host string) (attempt int, err error) {
	err = db.write(ctx, func(tx *sql.Tx) error {
		r, err := lookupPoint(ctx, tx, sweepID, pointID)
		if err != nil {
			return err
		}
		if err := checkHost(ctx, tx, sweepID, host); err != nil {
			return err
		}
		attempt, err = claim(ctx, tx, db.nowMS(), sweepID, r, host)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: claim point %s of sweep %d on host %s: %w", pointID, sweepID, host, err)
	}
	return attempt, nil
}

func checkHost(ctx context.Context, tx *sql.Tx, sweepID int64, host string) error {
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM hosts WHERE sweep_id = ? AND name = ?",
		sweepID, host).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("host %q is not a host of the sweep: %w", host, ErrNotFound)
	}
	return nil
}

func claim(ctx context.Context, tx *sql.Tx, now, sweepID int64, r pointRow, host string) (int, error) {
	attempt := r.attempts + 1
	r.host = host
	err := setState(ctx, tx, now, sweepID, r, PointRunning,
		"attempts = attempts + 1, host = ?, started_at = ?, finished_at = NULL, failure_class = NULL, failure_detail = NULL, "+clearOutputs,
		fmt.Sprintf("attempt %d", attempt), host, now)
	return attempt, err
}

// ClaimNextPoint claims, for host, the first pending point in plan order
// whose tp fits the host's GPUs. It returns the claimed point (its Attempts
// is the new attempt number), or ErrNotFound when no pending point fits.
func (db *DB) ClaimNextPoint(ctx context.Context, sweepID int64, host string) (Point, error) {
	return db.ClaimNextPointUpTo(ctx, sweepID, host, 0)
}

// ClaimNextPointUpTo is ClaimNextPoint for a host that runs several points at once: only a point
// whose tp is at most maxTP (the GPUs free there now; 0: the host's GPUs) is claimed.
func (db *DB) ClaimNextPointUpTo(ctx context.Context, sweepID int64, host string, maxTP int) (Point, error) {
	return db.claimNext(ctx, sweepID, host, func(gpus int) (string, []any) {
		if maxTP > 0 {
			gpus = min(gpus, maxTP)
		}
		return "tp <= ?", []any{gpus}
	})
}

// ClaimNextPointOf is ClaimNextPoint for a host that spans nodes (a group, a cluster whose jobs take
// several): only a point whose tp is one of tps, those the host runs (sweep.Host.Span), is claimed.
func (db *DB) ClaimNextPointOf(ctx context.Context, sweepID int64, host string, tps []int) (Point, error) {
	return db.claimNext(ctx, sweepID, host, func(int) (string, []any) {
		if len(tps) == 0 {
			return "0", nil
		}
		args := make([]any, len(tps))
		for i, tp := range tps {
			args[i] = tp
		}
		return "tp IN (?" + strings.Repeat(", ?", len(tps)-1) + ")", args
	})
}

// claimNext claims the first pending point in plan order that the condition fits (given the host's
// GPUs, it returns a WHERE term on points and its arguments).
func (db *DB) claimNext(ctx context.Context, sweepID int64, host string, fits func(gpus int) (string, []any)) (Point, error) {
	var pointID string
	err := db.write(ctx, func(tx *sql.Tx) error {
		var gpus int
		err := tx.QueryRowContext(ctx, "SELECT gpus FROM hosts WHERE sweep_id = ? AND name = ?",
			sweepID, host).Scan(&gpus)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("host %q is not a host of the sweep: %w", host, ErrNotFound)
		}
		if err != nil {
			return err
		}
		cond, args := fits(gpus)
		err = tx.QueryRowContext(ctx, `SELECT point_id FROM points
			WHERE sweep_id = ? AND state = 'pending' AND `+cond+` ORDER BY plan_order LIMIT 1`,
			append([]any{sweepID}, args...)...).Scan(&pointID)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("no pending point fits: %w", ErrNotFound)
		}
		if err != nil {
			return err
		}
		r, err := lookupPoint(ctx, tx, sweepID, pointID)
		if err != nil {
			return err
		}
		_, err = claim(ctx, tx, db.nowMS(), sweepID, r, host)
		return err
	})
	if err != nil {
		return Point{}, fmt.Errorf("store: claim next point of sweep %d for host %s: %w", sweepID, host, err)
	}
	return db.Point(ctx, sweepID, pointID)
}

// FinishPoint ends the running attempt of a point as done, failed (with a
// failure class) or cancelled. Done is refused with ErrIncomplete while the
// attempt has fewer runs than the point planned.
func (db *DB) FinishPoint(ctx context.Context, sweepID int64, pointID string, attempt int, f PointFinish) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		return finish(ctx, tx, db.nowMS(), sweepID, pointID, attempt, f)
	})
	if err != nil {
		return fmt.Errorf("store: finish point %s of sweep %d as %s: %w", pointID, sweepID, f.State, err)
	}
	return nil
}

// ErrIncomplete: a point cannot be done before all its planned runs are recorded.
var ErrIncomplete = errors.New("planned runs missing")

func finish(ctx context.Context, tx *sql.Tx, now, sweepID int64, pointID string, attempt int, f PointFinish) error {
	switch f.State {
	case PointDone, PointCancelled:
		if f.FailureClass != "" {
			return fmt.Errorf("failure class %q given for state %s", f.FailureClass, f.State)
		}
	case PointFailed:
		if !f.FailureClass.Valid() {
			return fmt.Errorf("unknown failure class %q", f.FailureClass)
		}
	default:
		return fmt.Errorf("finishing state must be done, failed or cancelled: %w", ErrTransition)
	}
	r, err := lookupPoint(ctx, tx, sweepID, pointID)
	if err != nil {
		return err
	}
	if err := r.checkRunning(attempt); err != nil {
		return err
	}
	if f.State == PointDone && r.plannedRuns > 0 {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE point_ref = ? AND attempt = ?`,
			r.ref, attempt).Scan(&n); err != nil {
			return err
		}
		if n < r.plannedRuns {
			return fmt.Errorf("%d of %d planned runs recorded: %w", n, r.plannedRuns, ErrIncomplete)
		}
	}
	detail := ""
	if f.FailureClass != "" {
		detail = string(f.FailureClass)
		if f.FailureDetail != "" {
			detail += ": " + f.FailureDetail
		}
	} else if f.FailureDetail != "" {
		detail = f.FailureDetail
	}
	return setState(ctx, tx, now, sweepID, r, f.State,
		"finished_at = ?, failure_class = ?, failure_detail = ?", detail,
		now, sql.NullString{String: string(f.FailureClass), Valid: f.FailureClass != ""},
		sql.NullString{String: f.FailureDetail, Valid: f.FailureDetail != ""})
}

// ReleasePoint puts a running point back to pending (its attempt was
// interrupted and will be re-run), or a searched one back to waiting: the
// attempt's runs become superseded and the point records FailInterrupted with
// the reason.
func (db *DB) ReleasePoint(ctx context.Context, sweepID int64, pointID string, attempt int, reason string) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		r, err := lookupPoint(ctx, tx, sweepID, pointID)
		if err != nil {
			return err
		}
		if err := r.checkRunning(attempt); err != nil {
			return err
		}
		return release(ctx, tx, db.nowMS(), sweepID, r, reason)
	})
	if err != nil {
		return fmt.Errorf("store: release point %s of sweep %d: %w", pointID, sweepID, err)
	}
	return nil
}

func release(ctx context.Context, tx *sql.Tx, now, sweepID int64, r pointRow, reason string) error {
	detail := "interrupted"
	if reason != "" {
		detail += ": " + reason
	}
	return setState(ctx, tx, now, sweepID, r, requeueState(r.searched),
		"finished_at = ?, failure_class = ?, failure_detail = ?",
		detail, now, FailInterrupted, sql.NullString{String: reason, Valid: reason != ""})
}

// RecoverInterrupted releases every running point of a sweep (back to pending,
// or waiting for a searched one), as after a crash of the process that ran
// them, and returns how many it released.
// Call it before resuming a sweep, while no worker runs it.
func (db *DB) RecoverInterrupted(ctx context.Context, sweepID int64, reason string) (int, error) {
	if reason == "" {
		reason = "recovered after the process running it ended"
	}
	n := 0
	err := db.write(ctx, func(tx *sql.Tx) error {
		rows, err := pointRows(ctx, tx, sweepID, PointRunning)
		if err != nil {
			return err
		}
		now := db.nowMS()
		for _, r := range rows {
			if err := release(ctx, tx, now, sweepID, r, reason); err != nil {
				return err
			}
		}
		n = len(rows)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: recover interrupted points of sweep %d: %w", sweepID, err)
	}
	return n, nil
}

func pointRows(ctx context.Context, tx *sql.Tx, sweepID int64, states ...PointState) ([]pointRow, error) {
	args := []any{sweepID}
	for _, s := range states {
		args = append(args, s)
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, state, attempts, coalesce(host, ''), planned_runs, searched FROM points
		WHERE sweep_id = ? AND state IN (?`+strings.Repeat(", ?", len(states)-1)+`) ORDER BY plan_order`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pointRow
	for rows.Next() {
		var r pointRow
		if err := rows.Scan(&r.ref, &r.state, &r.attempts, &r.host, &r.plannedRuns, &r.searched); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// CancelPoints cancels every pending and waiting point of a sweep and returns
// how many. Running points are left to the workers that own them (they finish
// them with PointCancelled).
func (db *DB) CancelPoints(ctx context.Context, sweepID int64, reason string) (int, error) {
	n := 0
	err := db.write(ctx, func(tx *sql.Tx) error {
		var err error
		n, err = cancelPoints(ctx, tx, db.nowMS(), sweepID, reason)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: cancel pending points of sweep %d: %w", sweepID, err)
	}
	return n, nil
}

// cancelPoints cancels a sweep's pending and waiting points.
func cancelPoints(ctx context.Context, tx *sql.Tx, now, sweepID int64, reason string) (int, error) {
	rows, err := pointRows(ctx, tx, sweepID, PointPending, PointWaiting)
	if err != nil {
		return 0, err
	}
	for _, r := range rows {
		if err := setState(ctx, tx, now, sweepID, r, PointCancelled, "finished_at = ?", reason, now); err != nil {
			return 0, err
		}
	}
	return len(rows), nil
}

// RequeuePoints puts a sweep's points in the given states (failed and/or
// cancelled) back to pending, or waiting for a searched one, superseding
// their runs, and returns how many.
func (db *DB) RequeuePoints(ctx context.Context, sweepID int64, reason string, from ...PointState) (int, error) {
	n := 0
	err := db.write(ctx, func(tx *sql.Tx) error {
		if len(from) == 0 {
			return errors.New("no state given")
		}
		for _, s := range from {
			if s != PointFailed && s != PointCancelled {
				return fmt.Errorf("cannot requeue %s points: %w", s, ErrTransition)
			}
		}
		rows, err := pointRows(ctx, tx, sweepID, from...)
		if err != nil {
			return err
		}
		now := db.nowMS()
		for _, r := range rows {
			if err := setState(ctx, tx, now, sweepID, r, requeueState(r.searched), "", reason); err != nil {
				return err
			}
		}
		n = len(rows)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: requeue points of sweep %d: %w", sweepID, err)
	}
	return n, nil
}

// SetPointInfo records what the current attempt learned about its server.
// Only the non-zero fields of info are written. attempt must be the point's
// current attempt (ErrStaleAttempt otherwise).
func (db *DB) SetPointInfo(ctx context.Context, sweepID int64, pointID string, attempt int, info PointInfo) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		for name, raw := range map[string]json.RawMessage{"effective args": info.EffectiveArgs, "provenance": info.Provenance} {
			if len(raw) > 0 && !json.Valid(raw) {
				return fmt.Errorf("%s is not valid JSON", name)
			}
		}
		r, err := lookupPoint(ctx, tx, sweepID, pointID)
		if err != nil {
			return err
		}
		if attempt != r.attempts {
			return fmt.Errorf("attempt %d, but the point's current attempt is %d: %w", attempt, r.attempts, ErrStaleAttempt)
		}
		var load sql.NullFloat64
		if info.Load > 0 {
			load = sql.NullFloat64{Float64: info.Load.Seconds(), Valid: true}
		}
		_, err = tx.ExecContext(ctx, `UPDATE points SET
			effective_args = coalesce(?, effective_args), provenance = coalesce(?, provenance),
			exec_start = coalesce(?, exec_start), load_s = coalesce(?, load_s),
			effective_num_steps = coalesce(?, effective_num_steps), effective_topk = coalesce(?, effective_topk),
			effective_num_draft_tokens = coalesce(?, effective_num_draft_tokens) WHERE id = ?`,
			nullRaw(info.EffectiveArgs), nullRaw(info.Provenance),
			sql.NullString{String: info.ExecStart, Valid: info.ExecStart != ""}, load,
			nullInt(info.EffectiveNumSteps), nullInt(info.EffectiveTopK), nullInt(info.EffectiveNumDraftTokens), r.ref)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: set info of point %s of sweep %d: %w", pointID, sweepID, err)
	}
	return nil
}

func nullRaw(b json.RawMessage) sql.NullString {
	return sql.NullString{String: string(b), Valid: len(b) > 0}
}
