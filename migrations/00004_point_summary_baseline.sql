-- point_summary says which points are baselines: a speculative point may leave num_steps to the
-- server (NGRAM, DFLASH auto), so "num_steps IS NULL" no longer tells.

-- +goose Up
DROP VIEW point_summary;

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
    p.effective_num_draft_tokens AS effective_num_draft_tokens,
    p.baseline                   AS baseline
FROM points p
JOIN sweeps s ON s.id = p.sweep_id
ORDER BY p.sweep_id, p.plan_order;
