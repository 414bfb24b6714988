-- Which source gave each run's accept length (docs/schema.md), and the speculative parameters the
-- server reports it runs with, beside the requested ones (SGLang may force or choose them).

-- +goose Up
ALTER TABLE runs ADD COLUMN accept_length_source TEXT NOT NULL DEFAULT '';
ALTER TABLE points ADD COLUMN effective_num_steps INTEGER;
ALTER TABLE points ADD COLUMN effective_topk INTEGER;
ALTER TABLE points ADD COLUMN effective_num_draft_tokens INTEGER;

DROP VIEW run_summary;
DROP VIEW run_detail;
DROP VIEW point_summary;

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
    r.accept_length_source AS accept_length_source
-- CROSS JOIN fixes the join order (sweeps, then points, then runs by the
-- runs_by_level index) so queries stay fast without ANALYZE statistics,
-- which a read-only connection cannot gather.
FROM sweeps s
CROSS JOIN points p ON p.sweep_id = s.id
CROSS JOIN runs r ON r.point_ref = p.id
-- The baseline run for speedup: the ok run at the same concurrency and
-- repeat of the sweep's first baseline point (in plan order) at the same tp.
-- At most one matches: a point's ok runs all belong to its current attempt.
LEFT JOIN runs b ON b.point_ref = (
        SELECT bp.id FROM points bp
        WHERE bp.sweep_id = p.sweep_id AND bp.tp = p.tp AND bp.baseline = 1
        ORDER BY bp.plan_order LIMIT 1)
    AND b.concurrency = r.concurrency
    AND b.repeat = r.repeat
    AND b.status = 'ok';

-- Public contract (ARCHITECTURE.md): one row per measured run.
CREATE VIEW run_summary AS
SELECT sweep, sweep_id, point_id, host, method, num_steps, topk, num_draft_tokens, tp,
       concurrency, repeat, status, requests, completed, failed, output_tok_s, request_s,
       ttft_p50_ms, ttft_p99_ms, itl_p50_ms, itl_p99_ms, tpot_p50_ms, e2e_p50_ms,
       accept_length, speedup, started_at, finished_at, accept_length_source
FROM run_detail;

-- Public contract: one row per point, in plan order.
CREATE VIEW point_summary AS
SELECT
    s.name             AS sweep,
    s.id               AS sweep_id,
    p.point_id         AS point_id,
    p.host             AS host,
    p.method           AS method,
    p.num_steps        AS num_steps,
    p.topk             AS topk,
    p.num_draft_tokens AS num_draft_tokens,
    p.tp               AS tp,
    p.state            AS state,
    p.attempts         AS attempts,
    p.failure_class    AS failure_class,
    p.failure_detail   AS failure_detail,
    p.load_s           AS load_s,
    p.exec_start       AS exec_start,
    p.effective_args   AS effective_args,
    p.provenance       AS provenance,
    p.started_at       AS started_at,
    p.finished_at      AS finished_at,
    p.effective_num_steps        AS effective_num_steps,
    p.effective_topk             AS effective_topk,
    p.effective_num_draft_tokens AS effective_num_draft_tokens
FROM points p
JOIN sweeps s ON s.id = p.sweep_id
ORDER BY p.sweep_id, p.plan_order;

