-- The lossless output check (issue 15): before its load ladder every point answers a few fixed
-- prompts greedily (temperature 0); the outputs are compared with those of the reference, the
-- baseline point of the same tp, which answers them twice so its own run-to-run agreement is known.
-- The comparison may come later than the point's run (the reference runs on another host, or after
-- a resume), so the outputs of the point's current attempt are stored, beside the check's verdict.
--
-- Each new column's CHECK reads only that column, as ALTER TABLE ADD COLUMN allows (SQLite tests
-- the added constraint against the existing rows, which are all NULL here). The failure class
-- output_mismatch needs no change: points.failure_class has no CHECK (the store validates it).

-- +goose Up
ALTER TABLE points ADD COLUMN outputs TEXT                   -- JSON, opaque to the store
    CHECK (outputs IS NULL OR json_valid(outputs));
ALTER TABLE points ADD COLUMN output_check TEXT              -- NULL: not checked
    CHECK (output_check IS NULL OR output_check IN ('reference', 'ok', 'mismatch'));
ALTER TABLE points ADD COLUMN output_agreement REAL          -- 0..1
    CHECK (output_agreement IS NULL OR (output_agreement >= 0 AND output_agreement <= 1));
ALTER TABLE points ADD COLUMN output_evidence TEXT           -- JSON: the first divergence
    CHECK (output_evidence IS NULL OR json_valid(output_evidence));

DROP VIEW point_summary;

-- Public contract: one row per point, in plan order. As in 00005, and the output check.
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
    p.baseline                   AS baseline,
    p.reason                     AS reason,
    p.output_check               AS output_check,
    p.output_agreement           AS output_agreement
FROM points p
JOIN sweeps s ON s.id = p.sweep_id
ORDER BY p.sweep_id, p.plan_order;
