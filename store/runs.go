package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"
)

// RunStatus is the outcome of one run.
type RunStatus string

// Run statuses. RecordRun accepts ok and failed; superseded is set by the
// store when the run's attempt is re-run.
const (
	RunOK         RunStatus = "ok"
	RunFailed     RunStatus = "failed"
	RunSuperseded RunStatus = "superseded"
)

// Metrics are the figures of one load level, as SGLang's bench_serving
// reports them (latencies in milliseconds).
type Metrics struct {
	Requests          int // requests sent
	Completed         int
	Failed            int
	DurationS         float64
	TotalInputTokens  int64
	TotalOutputTokens int64
	RequestS          float64 // requests per second
	InputTokS         float64 // input tokens per second
	OutputTokS        float64 // output tokens per second

	TTFTMeanMs, TTFTMedianMs, TTFTP99Ms float64
	ITLMeanMs, ITLMedianMs, ITLP99Ms    float64
	TPOTMeanMs, TPOTMedianMs, TPOTP99Ms float64
	E2EMeanMs, E2EMedianMs, E2EP99Ms    float64

	// AcceptLength is the mean speculative accept length; nil when the
	// server reports none (a baseline).
	AcceptLength *float64
	// AcceptLengthSource says where AcceptLength came from (docs/schema.md:
	// "metrics", "decode_log", "server_info"; "" when none).
	AcceptLengthSource string

	// Interval is the confidence interval of one figure of the level, nil when there is none
	// (docs/schema.md, runs.ci_*).
	Interval *Interval
}

// Interval is a level's confidence interval of one figure, and the precision target that ended the
// level when the spec had one.
type Interval struct {
	Metric     string // output_tok_s, ttft_ms or tpot_ms
	Mean       float64
	Low, High  float64
	Confidence float64
	Batches    int
	// Target is workload.precision's relative half-width (0: the level ran a fixed count); Reached
	// says whether the interval was within it when the level ended.
	Target  float64
	Reached bool
}

// Run is one measured load level of a point's attempt.
type Run struct {
	SweepID     int64
	PointID     string
	Attempt     int // the point's current attempt, as ClaimPoint returned it
	Concurrency int
	Repeat      int // 1-based
	// Dataset and InputTokens are the run's cell: a level may be measured on several (each named
	// prompt set and/or each prompt length of the spec), one run each. Dataset is the set's name,
	// "" for specsweep's random prompts (stored as NULL); InputTokens is the target prompt length
	// (the random prompts' length, or the length a set was padded to), 0 for a set sent at its
	// own lengths (stored as NULL).
	Dataset     string
	InputTokens int
	Status      RunStatus
	// Metrics is nil when the level produced no figures (its columns are NULL).
	Metrics    *Metrics
	StartedAt  time.Time
	FinishedAt time.Time
	Error      string // why the run failed
}

// cell describes a run's cell for an error message: "" for the zero cell.
func (r Run) cell() string {
	var s string
	if r.Dataset != "" {
		s += ", dataset " + r.Dataset
	}
	if r.InputTokens != 0 {
		s += fmt.Sprintf(", input tokens %d", r.InputTokens)
	}
	return s
}

// RecordRun stores one run of a running point's current attempt. It fails
// with ErrDuplicateRun if that run (its level and cell) is already recorded,
// and with ErrStaleAttempt or ErrTransition if the point no longer runs that
// attempt.
func (db *DB) RecordRun(ctx context.Context, run Run) error {
	return db.RecordRunAndFinish(ctx, run, nil)
}

// RecordRunAndFinish stores a run and, if finish is not nil, ends the
// point's attempt, in one transaction: either both happen or neither.
func (db *DB) RecordRunAndFinish(ctx context.Context, run Run, finish *PointFinish) error {
	err := db.write(ctx, func(tx *sql.Tx) error {
		now := db.nowMS()
		if err := recordRun(ctx, tx, now, run); err != nil {
			return err
		}
		if finish != nil {
			return finishPoint(ctx, tx, now, run.SweepID, run.PointID, run.Attempt, *finish)
		}
		return nil
	})
	if err != nil {
		what := "record run"
		if finish != nil {
			what = "record run and finish as " + string(finish.State)
		}
		return fmt.Errorf("store: %s for point %s of sweep %d (attempt %d, concurrency %d, repeat %d%s): %w",
			what, run.PointID, run.SweepID, run.Attempt, run.Concurrency, run.Repeat, run.cell(), err)
	}
	return nil
}

func recordRun(ctx context.Context, tx *sql.Tx, now int64, run Run) error {
	if run.Status != RunOK && run.Status != RunFailed {
		return fmt.Errorf("status must be ok or failed, not %q", run.Status)
	}
	if run.InputTokens < 0 {
		return fmt.Errorf("input tokens must be positive, or 0 for none, not %d", run.InputTokens)
	}
	r, err := lookupPoint(ctx, tx, run.SweepID, run.PointID)
	if err != nil {
		return err
	}
	if err := r.checkRunning(run.Attempt); err != nil {
		return err
	}
	started, finished := ms(run.StartedAt), ms(run.FinishedAt)
	if !started.Valid {
		started = sql.NullInt64{Int64: now, Valid: true}
	}
	if !finished.Valid {
		finished = sql.NullInt64{Int64: now, Valid: true}
	}
	m := make([]any, 23)
	m[22] = ""
	if x := run.Metrics; x != nil {
		m = []any{x.Requests, x.Completed, x.Failed, x.DurationS, x.TotalInputTokens, x.TotalOutputTokens,
			x.RequestS, x.InputTokS, x.OutputTokS,
			x.TTFTMeanMs, x.TTFTMedianMs, x.TTFTP99Ms, x.ITLMeanMs, x.ITLMedianMs, x.ITLP99Ms,
			x.TPOTMeanMs, x.TPOTMedianMs, x.TPOTP99Ms, x.E2EMeanMs, x.E2EMedianMs, x.E2EP99Ms, x.AcceptLength,
			x.AcceptLengthSource}
	}
	args := append([]any{r.ref, run.Attempt, run.Concurrency, run.Repeat, run.Status, r.host}, m...)
	args = append(args, started, finished, run.Error,
		sql.NullString{String: run.Dataset, Valid: run.Dataset != ""},
		sql.NullInt64{Int64: int64(run.InputTokens), Valid: run.InputTokens != 0})
	ci := make([]any, 8)
	if run.Metrics != nil && run.Metrics.Interval != nil {
		iv := run.Metrics.Interval
		ci = []any{iv.Metric, iv.Mean, iv.Low, iv.High, iv.Confidence, iv.Batches, nil, nil}
		if iv.Target > 0 {
			ci[6], ci[7] = iv.Target, iv.Reached
		}
	}
	args = append(args, ci...)
	_, err = tx.ExecContext(ctx, `INSERT INTO runs (point_ref, attempt, concurrency, repeat, status, host,
		requests, completed, failed, duration_s, total_input_tokens, total_output_tokens,
		request_s, input_tok_s, output_tok_s,
		ttft_mean_ms, ttft_p50_ms, ttft_p99_ms, itl_mean_ms, itl_p50_ms, itl_p99_ms,
		tpot_mean_ms, tpot_p50_ms, tpot_p99_ms, e2e_mean_ms, e2e_p50_ms, e2e_p99_ms, accept_length,
		accept_length_source, started_at, finished_at, error, dataset, input_tokens,
		ci_metric, ci_mean, ci_low, ci_high, ci_confidence, ci_batches, precision_target, precision_reached)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
		?, ?, ?, ?, ?, ?, ?, ?)`, args...)
	// The one unique index of runs besides the id is runs_by_cell: (point, attempt, concurrency,
	// repeat, cell), NULLs equal.
	if isUniqueViolation(err) {
		return ErrDuplicateRun
	}
	return err
}

func finishPoint(ctx context.Context, tx *sql.Tx, now, sweepID int64, pointID string, attempt int, f PointFinish) error {
	if err := finish(ctx, tx, now, sweepID, pointID, attempt, f); err != nil {
		return fmt.Errorf("finish point: %w", err)
	}
	return nil
}

// RunEvent is one recorded run as a live event stream sends it (RunsAfter).
//
// ID is the runs table's INTEGER PRIMARY KEY. SQLite has one writer at a time and gives a new row
// the largest id + 1 inside the recording transaction, and the store never deletes a run, so ids
// grow in recording order and a larger id never becomes visible before a smaller one: the largest
// id a poller has seen is a cursor that misses nothing. A run is one row for good: when its
// attempt is re-run its Status becomes superseded in place, without a new row (the point's
// "state" event, EventsAfter, says so).
type RunEvent struct {
	ID          int64
	SweepID     int64
	PointID     string
	Concurrency int
	Repeat      int // 1-based
	// Dataset and InputTokens are the run's cell, as in Run: "" and 0 for NULL.
	Dataset     string
	InputTokens int
	Status      RunStatus
	// OutputTokS is what the runs table holds, as in RunSummary: nil when the run measured nothing
	// (a failed run without figures). A failed run may hold its survivors' figure, which is no
	// measurement of the configuration: only ok runs are compared.
	OutputTokS *float64
	// At is the run's finished_at: a run is recorded as it ends (RecordRun takes the time of
	// recording when none is given), and the store keeps no other time of recording.
	At time.Time
}

// runsAfterSQL reads the runs by their primary key from an id on, each with its point by the
// points' primary key: the CROSS JOIN fixes that order, so it never scans (docs/schema.md).
const runsAfterSQL = `SELECT r.id, p.sweep_id, p.point_id, r.concurrency, r.repeat, r.status, r.output_tok_s, r.finished_at,
	r.dataset, r.input_tokens
	FROM runs r CROSS JOIN points p ON p.id = r.point_ref
	WHERE r.id > ? ORDER BY r.id LIMIT ?`

// lastIDsSQL: max over an INTEGER PRIMARY KEY is one seek to the end of the table's b-tree.
const lastIDsSQL = `SELECT coalesce((SELECT max(id) FROM runs), 0), coalesce((SELECT max(id) FROM events), 0)`

// RunsAfter reads the runs whose id is larger than afterID, of every sweep, in ascending id
// (recording) order, at most limit (at least 1) of them, on the read-only connection: what a live
// stream polls, with LastIDs for where to start. The cost is that of the rows returned.
func (db *DB) RunsAfter(ctx context.Context, afterID int64, limit int) ([]RunEvent, error) {
	if limit < 1 {
		return nil, fmt.Errorf("store: reading runs after %d: limit %d, want at least 1", afterID, limit)
	}
	var out []RunEvent
	err := db.scan(ctx, runsAfterSQL, []any{afterID, limit}, func(_ []string, v []driver.Value) error {
		out = append(out, RunEvent{ID: vInt64(v[0]), SweepID: vInt64(v[1]), PointID: vString(v[2]),
			Concurrency: int(vInt64(v[3])), Repeat: int(vInt64(v[4])), Status: RunStatus(vString(v[5])),
			OutputTokS: vFloat(v[6], new(float64)), At: vTime(v[7]), Dataset: vString(v[8]), InputTokens: int(vInt64(v[9]))})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: reading runs after %d: %w", afterID, err)
	}
	return out, nil
}

// LastIDs returns the largest run id and the largest event id (0 when there is none), for a live
// stream to start from what comes next. One query on the read-only connection, two seeks.
func (db *DB) LastIDs(ctx context.Context) (runID, eventID int64, err error) {
	err = db.scan(ctx, lastIDsSQL, nil, func(_ []string, v []driver.Value) error {
		runID, eventID = vInt64(v[0]), vInt64(v[1])
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("store: reading the last run and event ids: %w", err)
	}
	return runID, eventID, nil
}
