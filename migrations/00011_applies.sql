-- The apply history (issue 29): each `specsweep apply` (a configuration of a sweep made a host's server
-- durably, with its smoke check and, on failure, the rollback) and each `restore --applied` is a row:
-- who, when, what, from which sweep, how it ended and the evidence. The host keeps what is applied now
-- (/var/lib/specsweep/applied-UNIT.json, docs/hostctl.md); this is the record of how it got there.

-- +goose Up
CREATE TABLE applies (
    id             INTEGER PRIMARY KEY,
    action         TEXT NOT NULL CHECK (action IN ('apply', 'unapply')),
    host           TEXT NOT NULL,            -- the spec's host name
    unit           TEXT NOT NULL DEFAULT '',
    sweep_id       INTEGER REFERENCES sweeps(id) ON DELETE SET NULL,
    point_id       TEXT NOT NULL DEFAULT '', -- '' for an unapply
    choice         TEXT NOT NULL DEFAULT '' CHECK (choice IN ('', 'recommended', 'adaptive', 'point')),
    label          TEXT NOT NULL DEFAULT '',
    by             TEXT NOT NULL DEFAULT '', -- user@hostname of the specsweep that applied it
    started_at     INTEGER NOT NULL,         -- unix ms
    finished_at    INTEGER,
    -- running: not ended (a specsweep killed during an apply leaves it so); applied: the checks passed;
    -- rolled_back: a check failed and what ran before runs again; rollback_failed: the rollback itself
    -- failed (the evidence says how); unapplied: the operator's unit is back; dry_run: nothing changed.
    result         TEXT NOT NULL DEFAULT 'running'
        CHECK (result IN ('running', 'applied', 'rolled_back', 'rollback_failed', 'unapplied', 'dry_run', 'failed')),
    -- which check failed: start (the server did not come up), output (the output check), speed (the
    -- load level below the sweep's figure), host (the host refused or was unreachable).
    failure        TEXT NOT NULL DEFAULT '' CHECK (failure IN ('', 'start', 'output', 'speed', 'host')),
    detail         TEXT NOT NULL DEFAULT '',
    evidence       TEXT,                     -- JSON: log lines, the figures compared
    engine_version TEXT NOT NULL DEFAULT ''
);
CREATE INDEX applies_host ON applies (host, started_at);
