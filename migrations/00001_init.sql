-- Initial schema of the specsweep store.
-- Timestamps are INTEGER unix milliseconds (UTC) everywhere; NULL means "not yet".
-- JSON is stored as TEXT and checked with json_valid.

-- +goose Up

-- One sweep: a spec submitted once. A cron schedule fires new sweeps of the same name.
CREATE TABLE sweeps (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL CHECK (name <> ''),
    spec_hash   TEXT    NOT NULL,
    spec_text   TEXT    NOT NULL,
    state       TEXT    NOT NULL CHECK (state IN
                    ('scheduled', 'queued', 'running', 'interrupted', 'done', 'failed', 'cancelled')),
    schedule    TEXT    NOT NULL DEFAULT '',   -- cron expression, '' when none
    not_before  INTEGER,                       -- do not start before (submit --at)
    created_at  INTEGER NOT NULL,
    started_at  INTEGER,
    finished_at INTEGER
);
CREATE INDEX sweeps_by_name ON sweeps (name, id);
CREATE INDEX sweeps_by_state ON sweeps (state, not_before, id);

-- The hosts of a sweep, as its spec named them.
CREATE TABLE hosts (
    id       INTEGER PRIMARY KEY,
    sweep_id INTEGER NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
    name     TEXT    NOT NULL CHECK (name <> ''),
    address  TEXT    NOT NULL DEFAULT '',
    driver   TEXT    NOT NULL DEFAULT 'ssh',
    unit     TEXT    NOT NULL DEFAULT '',
    gpus     INTEGER NOT NULL CHECK (gpus >= 1),
    UNIQUE (sweep_id, name)
);

-- One server configuration of a sweep's plan. point_id is the plan's stable id.
CREATE TABLE points (
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
                         ('pending', 'running', 'done', 'failed', 'cancelled')),
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
    UNIQUE (sweep_id, point_id),
    UNIQUE (sweep_id, plan_order),
    FOREIGN KEY (sweep_id, host) REFERENCES hosts (sweep_id, name),
    CHECK (baseline = 0 OR (num_steps IS NULL AND topk IS NULL AND num_draft_tokens IS NULL)),
    CHECK (state <> 'running' OR host IS NOT NULL)
);
CREATE INDEX points_by_state ON points (sweep_id, state, plan_order);
CREATE INDEX points_baseline ON points (sweep_id, tp, plan_order) WHERE baseline = 1;

-- One measured load level: a point at one concurrency and repeat, in one attempt.
CREATE TABLE runs (
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
    UNIQUE (point_ref, attempt, concurrency, repeat)
);
-- Serves the baseline lookup of run_summary.speedup (covering).
CREATE INDEX runs_by_level ON runs (point_ref, concurrency, repeat, status, output_tok_s);

-- What happened, to a sweep, a point or a host.
CREATE TABLE events (
    id        INTEGER PRIMARY KEY,
    sweep_id  INTEGER REFERENCES sweeps (id) ON DELETE CASCADE,
    point_ref INTEGER REFERENCES points (id) ON DELETE CASCADE,
    host      TEXT,
    at        INTEGER NOT NULL,
    kind      TEXT    NOT NULL CHECK (kind <> ''),
    detail    TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX events_by_sweep ON events (sweep_id, at, id);
CREATE INDEX events_by_point ON events (point_ref, at, id);

-- run_detail: run_summary plus the columns that are not part of the public
-- contract (plan order, attempt, means, tokens, error). run_summary is a
-- projection of it, so both always agree.
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
    r.error             AS error
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
       accept_length, speedup, started_at, finished_at
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
    p.finished_at      AS finished_at
FROM points p
JOIN sweeps s ON s.id = p.sweep_id
ORDER BY p.sweep_id, p.plan_order;

-- Public contract: what happened, in order.
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
