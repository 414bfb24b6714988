package store

import (
	"context"
	"database/sql"
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
}

// Run is one measured load level of a point's attempt.
type Run struct {
	SweepID     int64
	PointID     string
	Attempt     int // the point's current attempt, as ClaimPoint returned it
	Concurrency int
	Repeat      int // 1-based
	Status      RunStatus
	// Metrics is nil when the level produced no figures (its columns are NULL).
	Metrics    *Metrics
	StartedAt  time.Time
	FinishedAt time.Time
	Error      string // why the run failed
}

// RecordRun stores one run of a running point's current attempt. It fails
// with ErrDuplicateRun if that run is already recorded, and with
// ErrStaleAttempt or ErrTransition if the point no longer runs that attempt.
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
		return fmt.Errorf("store: %s for point %s of sweep %d (attempt %d, concurrency %d, repeat %d): %w",
			what, run.PointID, run.SweepID, run.Attempt, run.Concurrency, run.Repeat, err)
	}
	return nil
}

func recordRun(ctx context.Context, tx *sql.Tx, now int64, run Run) error {
	if run.Status != RunOK && run.Status != RunFailed {
		return fmt.Errorf("status must be ok or failed, not %q", run.Status)
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
	args = append(args, started, finished, run.Error)
	_, err = tx.ExecContext(ctx, `INSERT INTO runs (point_ref, attempt, concurrency, repeat, status, host,
		requests, completed, failed, duration_s, total_input_tokens, total_output_tokens,
		request_s, input_tok_s, output_tok_s,
		ttft_mean_ms, ttft_p50_ms, ttft_p99_ms, itl_mean_ms, itl_p50_ms, itl_p99_ms,
		tpot_mean_ms, tpot_p50_ms, tpot_p99_ms, e2e_mean_ms, e2e_p50_ms, e2e_p99_ms, accept_length,
		accept_length_source, started_at, finished_at, error)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...)
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
