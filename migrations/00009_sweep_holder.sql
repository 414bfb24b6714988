-- Which process holds a running sweep (issue 26): a `specsweep run` killed with -9, or a daemon that
-- died, left the sweep "running" forever in status and on the dashboard. The holder (how it runs the
-- sweep, its pid and host name) is written when a process takes the sweep, its heartbeat every few
-- seconds while it runs it; a running sweep whose heartbeat stopped (or whose holder's pid is gone on
-- this host) is shown as interrupted, with when its holder last held it and how to resume it. The
-- columns keep the last holder after it lets go, so a stopped sweep still tells how it was run.

-- +goose Up
ALTER TABLE sweeps ADD COLUMN holder_kind TEXT NOT NULL DEFAULT ''
    CHECK (holder_kind IN ('', 'run', 'daemon'));
ALTER TABLE sweeps ADD COLUMN holder_pid INTEGER CHECK (holder_pid IS NULL OR holder_pid > 0);
ALTER TABLE sweeps ADD COLUMN holder_host TEXT NOT NULL DEFAULT '';
ALTER TABLE sweeps ADD COLUMN heartbeat_at INTEGER;
