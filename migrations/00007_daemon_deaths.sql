-- A sweep that was running when its daemon died (issue 23): the daemon's next start requeues it, so a
-- spec that kills the daemon (out of memory) would kill it at every start, forever under systemd's
-- Restart=. The store counts the deaths each sweep saw; at the limit the daemon holds the sweep
-- (interrupted) instead of requeueing it, and a resume releases it and starts the count afresh.

-- +goose Up
ALTER TABLE sweeps ADD COLUMN daemon_deaths INTEGER NOT NULL DEFAULT 0
    CHECK (daemon_deaths >= 0);
