-- A sweep fired by a cron schedule points to the schedule's template sweep (state 'scheduled'), so
-- the daemon can tell whether the previous instance of a schedule still runs.

-- +goose Up
ALTER TABLE sweeps ADD COLUMN schedule_id INTEGER REFERENCES sweeps (id) ON DELETE SET NULL;
CREATE INDEX sweeps_by_schedule ON sweeps (schedule_id, id);
