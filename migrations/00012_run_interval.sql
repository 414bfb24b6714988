-- A level's confidence interval (issue 31): each run may carry the interval of one figure, batch means
-- over its steady-state window (docs/bench.md, "Precision-targeted levels"), and, when the spec's
-- workload.precision ended the level, the target it had and whether it was reached. The columns are
-- NULL for runs without an interval (older rows, too few batches, failed runs).
--   ci_metric          the figure: output_tok_s, ttft_ms (mean TTFT) or tpot_ms (mean TPOT)
--   ci_mean            the figure over the window (the interval's centre)
--   ci_low, ci_high    the interval's bounds
--   ci_confidence      its confidence, e.g. 0.95
--   ci_batches         the batches it was computed from
--   precision_target   the relative half-width workload.precision asked for (NULL: a fixed count)
--   precision_reached  1 when the interval was within the target when the level ended, 0 when the
--                      level ran to its cap first (NULL: a fixed count)
-- run_detail and run_summary gain them at their end, so queries written against the older columns
-- keep their meaning.

-- +goose Up
ALTER TABLE runs ADD COLUMN ci_metric TEXT CHECK (ci_metric IN ('output_tok_s', 'ttft_ms', 'tpot_ms'));
ALTER TABLE runs ADD COLUMN ci_mean REAL;
ALTER TABLE runs ADD COLUMN ci_low REAL;
ALTER TABLE runs ADD COLUMN ci_high REAL;
ALTER TABLE runs ADD COLUMN ci_confidence REAL CHECK (ci_confidence > 0 AND ci_confidence < 1);
ALTER TABLE runs ADD COLUMN ci_batches INTEGER CHECK (ci_batches >= 2);
ALTER TABLE runs ADD COLUMN precision_target REAL CHECK (precision_target > 0);
ALTER TABLE runs ADD COLUMN precision_reached INTEGER CHECK (precision_reached IN (0, 1));

DROP VIEW run_summary;
DROP VIEW run_detail;

CREATE VIEW run_detail AS
SELECT
    s.name              AS sweep,
    s.id                AS sweep_id,
    p.point_id          AS point_id,
    r.host              AS host,
    p.method            AS method,
    p.num_steps         AS num_steps,
    p.topk              AS topk,
    p.num_draft_tokens  AS num_draft_tokens,
    p.tp                AS tp,
    r.concurrency       AS concurrency,
    r.repeat            AS repeat,
    r.status            AS status,
    r.requests          AS requests,
    r.completed         AS completed,
    r.failed            AS failed,
    r.output_tok_s      AS output_tok_s,
    r.request_s         AS request_s,
    r.ttft_p50_ms       AS ttft_p50_ms,
    r.ttft_p99_ms       AS ttft_p99_ms,
    r.itl_p50_ms        AS itl_p50_ms,
    r.itl_p99_ms        AS itl_p99_ms,
    r.tpot_p50_ms       AS tpot_p50_ms,
    r.e2e_p50_ms        AS e2e_p50_ms,
    r.accept_length     AS accept_length,
    r.output_tok_s / b.output_tok_s AS speedup,
    r.started_at        AS started_at,
    r.finished_at       AS finished_at,
    r.id                AS run_id,
    p.plan_order        AS plan_order,
    p.baseline          AS baseline,
    r.attempt           AS attempt,
    r.duration_s        AS duration_s,
    r.total_input_tokens  AS total_input_tokens,
    r.total_output_tokens AS total_output_tokens,
    r.input_tok_s       AS input_tok_s,
    r.ttft_mean_ms      AS ttft_mean_ms,
    r.itl_mean_ms       AS itl_mean_ms,
    r.tpot_mean_ms      AS tpot_mean_ms,
    r.tpot_p99_ms       AS tpot_p99_ms,
    r.e2e_mean_ms       AS e2e_mean_ms,
    r.e2e_p99_ms        AS e2e_p99_ms,
    r.error             AS error,
    r.accept_length_source AS accept_length_source,
    r.dataset           AS dataset,
    r.input_tokens      AS input_tokens,
    r.ci_metric         AS ci_metric,
    r.ci_low            AS ci_low,
    r.ci_high           AS ci_high,
    r.ci_confidence     AS ci_confidence,
    r.precision_reached AS precision_reached,
    r.ci_mean           AS ci_mean,
    r.ci_batches        AS ci_batches,
    r.precision_target  AS precision_target
-- CROSS JOIN fixes the join order (sweeps, then points, then runs by the
-- runs_by_level index) so queries stay fast without ANALYZE statistics,
-- which a read-only connection cannot gather.
FROM sweeps s
CROSS JOIN points p ON p.sweep_id = s.id
CROSS JOIN runs r ON r.point_ref = p.id
-- The baseline run for speedup: the ok run at the same concurrency, repeat
-- and cell (IS: NULL matches NULL) of the sweep's first baseline point (in
-- plan order) at the same tp. At most one matches: a point's ok runs all
-- belong to its current attempt, one per cell of a level.
LEFT JOIN runs b ON b.point_ref = (
        SELECT bp.id FROM points bp
        WHERE bp.sweep_id = p.sweep_id AND bp.tp = p.tp AND bp.baseline = 1
        ORDER BY bp.plan_order LIMIT 1)
    AND b.concurrency = r.concurrency
    AND b.repeat = r.repeat
    AND b.dataset IS r.dataset
    AND b.input_tokens IS r.input_tokens
    AND b.status = 'ok';

-- Public contract (docs/schema.md): one row per measured run. As in 00010, and the interval appended.
CREATE VIEW run_summary AS
SELECT sweep, sweep_id, point_id, host, method, num_steps, topk, num_draft_tokens, tp,
       concurrency, repeat, status, requests, completed, failed, output_tok_s, request_s,
       ttft_p50_ms, ttft_p99_ms, itl_p50_ms, itl_p99_ms, tpot_p50_ms, e2e_p50_ms,
       accept_length, speedup, started_at, finished_at, accept_length_source, dataset, input_tokens,
       ci_metric, ci_low, ci_high, ci_confidence, precision_reached
FROM run_detail;

