-- A search (spec `search:`) decides which of a sweep's planned points run: such a point is stored
-- `searched`, starts `waiting` (not decided yet) and the search moves it to `pending` (released) or
-- `pruned` (final: it need not run), with a human `reason`.
--
-- SQLite cannot alter a CHECK constraint, so the points table is rebuilt (the 12 steps of
-- https://www.sqlite.org/lang_altertable.html#otheralter): foreign keys off, outside any
-- transaction (SQLite ignores the pragma inside one), then one explicit transaction that creates
-- new_points, copies every row with its id (runs.point_ref and events.point_ref reference it),
-- drops the old table (no cascade with foreign keys off), renames the new one, recreates the
-- indexes and the views that read points, and checks the foreign keys before committing.

-- +goose NO TRANSACTION
-- +goose Up
PRAGMA foreign_keys = OFF;

BEGIN IMMEDIATE;

-- Refuse to run over an already migrated database: two processes that open an old file at once
-- both start this migration, and the one that waited for the lock must fail (and see version 5)
-- rather than rebuild again. (A rebuild that committed but whose version row was never written,
-- as after a crash between the two, is simply done again: nothing has used the new columns yet.)
CREATE TEMP TABLE migration_00005_guard (already_applied INTEGER CHECK (already_applied = 0));
INSERT INTO migration_00005_guard
    SELECT count(*) FROM goose_db_version WHERE version_id = 5 AND is_applied;
DROP TABLE migration_00005_guard;

DROP VIEW run_summary;
DROP VIEW run_detail;
DROP VIEW point_summary;
DROP VIEW event_log;

-- One server configuration of a sweep's plan. point_id is the plan's stable id.
CREATE TABLE new_points (
    id               INTEGER PRIMARY KEY,
    sweep_id         INTEGER NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
    point_id         TEXT    NOT NULL CHECK (point_id <> ''),
    plan_order       INTEGER NOT NULL,
    method           TEXT    NOT NULL,
    baseline         INTEGER NOT NULL CHECK (baseline IN (0, 1)),
    num_steps        INTEGER,
    topk             INTEGER,
    num_draft_tokens INTEGER,
    tp               INTEGER NOT NULL CHECK (tp >= 1),
    argv             TEXT    NOT NULL CHECK (json_valid(argv)),           -- JSON array of strings
    env              TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(env)), -- JSON object
    planned_runs     INTEGER NOT NULL DEFAULT 0 CHECK (planned_runs >= 0),
    state            TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN
                         ('waiting', 'pending', 'running', 'done', 'failed', 'cancelled', 'pruned')),
    attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    host             TEXT,                                    -- host of the latest attempt
    failure_class    TEXT,
    failure_detail   TEXT,
    effective_args   TEXT CHECK (effective_args IS NULL OR json_valid(effective_args)),
    provenance       TEXT CHECK (provenance IS NULL OR json_valid(provenance)),
    exec_start       TEXT,
    load_s           REAL,
    created_at       INTEGER NOT NULL,
    started_at       INTEGER,                                 -- of the latest attempt
    finished_at      INTEGER,                                 -- of the latest attempt
    effective_num_steps        INTEGER,
    effective_topk             INTEGER,
    effective_num_draft_tokens INTEGER,
    reason           TEXT,                                    -- the search's, NULL when it gave none
    searched         INTEGER NOT NULL DEFAULT 0 CHECK (searched IN (0, 1)), -- a search decides its running
    UNIQUE (sweep_id, point_id),
    UNIQUE (sweep_id, plan_order),
    FOREIGN KEY (sweep_id, host) REFERENCES hosts (sweep_id, name),
    CHECK (baseline = 0 OR (num_steps IS NULL AND topk IS NULL AND num_draft_tokens IS NULL)),
    CHECK (state <> 'running' OR host IS NOT NULL),
    CHECK (searched = 1 OR state NOT IN ('waiting', 'pruned'))
);

INSERT INTO new_points (id, sweep_id, point_id, plan_order, method, baseline, num_steps, topk,
        num_draft_tokens, tp, argv, env, planned_runs, state, attempts, host, failure_class,
        failure_detail, effective_args, provenance, exec_start, load_s, created_at, started_at,
        finished_at, effective_num_steps, effective_topk, effective_num_draft_tokens)
    SELECT id, sweep_id, point_id, plan_order, method, baseline, num_steps, topk,
        num_draft_tokens, tp, argv, env, planned_runs, state, attempts, host, failure_class,
        failure_detail, effective_args, provenance, exec_start, load_s, created_at, started_at,
        finished_at, effective_num_steps, effective_topk, effective_num_draft_tokens
    FROM points;

DROP TABLE points;
ALTER TABLE new_points RENAME TO points;

CREATE INDEX points_by_state ON points (sweep_id, state, plan_order);
CREATE INDEX points_baseline ON points (sweep_id, tp, plan_order) WHERE baseline = 1;

-- As in 00003_accept_source_effective.sql.
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

-- Public contract (ARCHITECTURE.md): one row per measured run. As in 00003.
CREATE VIEW run_summary AS
SELECT sweep, sweep_id, point_id, host, method, num_steps, topk, num_draft_tokens, tp,
       concurrency, repeat, status, requests, completed, failed, output_tok_s, request_s,
       ttft_p50_ms, ttft_p99_ms, itl_p50_ms, itl_p99_ms, tpot_p50_ms, e2e_p50_ms,
       accept_length, speedup, started_at, finished_at, accept_length_source
FROM run_detail;

-- Public contract: one row per point, in plan order. As in 00004, and the search's reason.
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
    p.reason                     AS reason
FROM points p
JOIN sweeps s ON s.id = p.sweep_id
ORDER BY p.sweep_id, p.plan_order;

-- Public contract: what happened, in order. As in 00001.
CREATE VIEW event_log AS
SELECT
    s.name     AS sweep,
    e.sweep_id AS sweep_id,
    p.point_id AS point_id,
    e.host     AS host,
    e.at       AS at,
    e.kind     AS kind,
    e.detail   AS detail
FROM events e
LEFT JOIN sweeps s ON s.id = e.sweep_id
LEFT JOIN points p ON p.id = e.point_ref
ORDER BY e.at, e.id;

-- Nothing may point at a missing row (a lost point would leave runs and events dangling): the
-- CHECK fails the migration, and the transaction is rolled back, on any violation.
CREATE TEMP TABLE migration_00005_fk (violations INTEGER CHECK (violations = 0));
INSERT INTO migration_00005_fk SELECT count(*) FROM pragma_foreign_key_check;
DROP TABLE migration_00005_fk;

COMMIT;

PRAGMA foreign_keys = ON;
