-- A load level measured on several cells (issue 27): a sweep may send each level (a point at a
-- concurrency and repeat) to each named prompt set of workload.datasets and/or each prompt length
-- of workload.input_tokens, so a run is one (point, attempt, concurrency, repeat, cell). A run's cell
-- is its dataset (NULL: specsweep's random prompts; else the set's name) and input_tokens (the
-- cell's target prompt length: the random prompts' length, or the length a set was padded to; NULL:
-- a set sent at its own lengths). The uniqueness becomes one run per cell, NULLs equal (an index on
-- ifnull(dataset, ''), ifnull(input_tokens, 0): the CHECKs keep '' and 0 out of the columns), and a
-- speedup compares a run with the baseline's run of the same cell.
--
-- The runs recorded before this version get the cell their sweep's spec gave every run: a spec
-- with workload.dataset "sharegpt:PATH" sent ShareGPT's prompts at their own lengths (dataset
-- 'sharegpt', input_tokens NULL); one with dataset random (or none, the default) sent random
-- prompts of workload.input_tokens tokens (dataset NULL, input_tokens that length). The spec is
-- stored as the user wrote it (YAML, or JSON), which SQL cannot read, so the store's migration
-- connection provides specsweep_spec_workload(spec_text, key), the scalar at workload.KEY or NULL
-- (store/migrate.go): this file runs only through specsweep, not through the goose command. A
-- stored text that is no readable spec leaves both NULL (random prompts of a length not recorded).
--
-- SQLite cannot drop a table's UNIQUE constraint, so the runs table is rebuilt as 00005 rebuilt
-- points (https://www.sqlite.org/lang_altertable.html#otheralter): foreign keys off, outside any
-- transaction, then one explicit transaction that creates new_runs, copies every row with its id
-- (the live streams' cursor), drops the old table, renames the new one, recreates its indexes and
-- the views that read runs, and checks the foreign keys before committing.

-- +goose NO TRANSACTION
-- +goose Up
PRAGMA foreign_keys = OFF;

BEGIN IMMEDIATE;

-- Refuse to run over an already migrated database: of two processes that open an old file at once,
-- the one that waited for the lock must fail (and see version 10) rather than rebuild again. As in
-- 00005.
CREATE TEMP TABLE migration_00010_guard (already_applied INTEGER CHECK (already_applied = 0));
INSERT INTO migration_00010_guard
    SELECT count(*) FROM goose_db_version WHERE version_id = 10 AND is_applied;
DROP TABLE migration_00010_guard;

DROP VIEW run_summary;
DROP VIEW run_detail;

-- One measured load level on one cell: a point at one concurrency and repeat, in one attempt. The
-- columns of 00001 and 00003 in their order, then the cell.
CREATE TABLE new_runs (
    id                  INTEGER PRIMARY KEY,
    point_ref           INTEGER NOT NULL REFERENCES points (id) ON DELETE CASCADE,
    attempt             INTEGER NOT NULL CHECK (attempt >= 1),
    concurrency         INTEGER NOT NULL CHECK (concurrency >= 1),
    repeat              INTEGER NOT NULL CHECK (repeat >= 1),
    status              TEXT    NOT NULL CHECK (status IN ('ok', 'failed', 'superseded')),
    host                TEXT,
    requests            INTEGER,
    completed           INTEGER,
    failed              INTEGER,
    duration_s          REAL,
    total_input_tokens  INTEGER,
    total_output_tokens INTEGER,
    request_s           REAL,
    input_tok_s         REAL,
    output_tok_s        REAL,
    ttft_mean_ms        REAL,
    ttft_p50_ms         REAL,
    ttft_p99_ms         REAL,
    itl_mean_ms         REAL,
    itl_p50_ms          REAL,
    itl_p99_ms          REAL,
    tpot_mean_ms        REAL,
    tpot_p50_ms         REAL,
    tpot_p99_ms         REAL,
    e2e_mean_ms         REAL,
    e2e_p50_ms          REAL,
    e2e_p99_ms          REAL,
    accept_length       REAL,
    started_at          INTEGER NOT NULL,
    finished_at         INTEGER NOT NULL,
    error               TEXT    NOT NULL DEFAULT '',
    accept_length_source TEXT   NOT NULL DEFAULT '',
    dataset             TEXT    CHECK (dataset <> ''),          -- NULL: random prompts
    input_tokens        INTEGER CHECK (input_tokens >= 1)       -- NULL: a set at its own lengths
);

-- The cell of each sweep's runs so far, from its spec (above).
CREATE TEMP TABLE migration_00010_cells AS
    SELECT id AS sweep_id,
           specsweep_spec_workload(spec_text, 'dataset') AS dataset,
           specsweep_spec_workload(spec_text, 'input_tokens') AS input_tokens
    FROM sweeps;

-- LEFT JOINs: a row whose point or sweep were missing would still be copied (the foreign key check
-- below fails the migration on it).
INSERT INTO new_runs (id, point_ref, attempt, concurrency, repeat, status, host, requests, completed,
        failed, duration_s, total_input_tokens, total_output_tokens, request_s, input_tok_s,
        output_tok_s, ttft_mean_ms, ttft_p50_ms, ttft_p99_ms, itl_mean_ms, itl_p50_ms, itl_p99_ms,
        tpot_mean_ms, tpot_p50_ms, tpot_p99_ms, e2e_mean_ms, e2e_p50_ms, e2e_p99_ms, accept_length,
        started_at, finished_at, error, accept_length_source, dataset, input_tokens)
    SELECT r.id, r.point_ref, r.attempt, r.concurrency, r.repeat, r.status, r.host, r.requests,
        r.completed, r.failed, r.duration_s, r.total_input_tokens, r.total_output_tokens, r.request_s,
        r.input_tok_s, r.output_tok_s, r.ttft_mean_ms, r.ttft_p50_ms, r.ttft_p99_ms, r.itl_mean_ms,
        r.itl_p50_ms, r.itl_p99_ms, r.tpot_mean_ms, r.tpot_p50_ms, r.tpot_p99_ms, r.e2e_mean_ms,
        r.e2e_p50_ms, r.e2e_p99_ms, r.accept_length, r.started_at, r.finished_at, r.error,
        r.accept_length_source,
        CASE WHEN typeof(c.dataset) = 'text' AND substr(c.dataset, 1, 9) = 'sharegpt:' THEN 'sharegpt' END,
        CASE WHEN (c.dataset IS NULL OR c.dataset = 'random')
                  AND typeof(c.input_tokens) = 'integer' AND c.input_tokens >= 1
             THEN c.input_tokens END
    FROM runs r
    LEFT JOIN points p ON p.id = r.point_ref
    LEFT JOIN migration_00010_cells c ON c.sweep_id = p.sweep_id;

DROP TABLE migration_00010_cells;
DROP TABLE runs;
ALTER TABLE new_runs RENAME TO runs;

-- One run per cell of a level and attempt, NULLs equal (a UNIQUE constraint holds NULLs distinct).
CREATE UNIQUE INDEX runs_by_cell ON runs (point_ref, attempt, concurrency, repeat,
    ifnull(dataset, ''), ifnull(input_tokens, 0));
-- Serves the baseline lookup of run_detail.speedup (covering; IS uses an index as = does).
CREATE INDEX runs_by_level ON runs (point_ref, concurrency, repeat, dataset, input_tokens, status,
    output_tok_s);

-- As in 00005, and the run's cell: the baseline run of a speedup is the one of the same cell.
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
    r.input_tokens      AS input_tokens
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

-- Public contract (docs/schema.md): one row per measured run. As in 00005, and the cell appended,
-- so the queries written against the older columns keep their meaning.
CREATE VIEW run_summary AS
SELECT sweep, sweep_id, point_id, host, method, num_steps, topk, num_draft_tokens, tp,
       concurrency, repeat, status, requests, completed, failed, output_tok_s, request_s,
       ttft_p50_ms, ttft_p99_ms, itl_p50_ms, itl_p99_ms, tpot_p50_ms, e2e_p50_ms,
       accept_length, speedup, started_at, finished_at, accept_length_source, dataset, input_tokens
FROM run_detail;

-- Nothing may point at a missing row: the CHECK fails the migration, and the transaction is rolled
-- back, on any violation. As in 00005.
CREATE TEMP TABLE migration_00010_fk (violations INTEGER CHECK (violations = 0));
INSERT INTO migration_00010_fk SELECT count(*) FROM pragma_foreign_key_check;
DROP TABLE migration_00010_fk;

COMMIT;

PRAGMA foreign_keys = ON;
