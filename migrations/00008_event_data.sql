-- Events carry their structured fields (issue 25): a JSON object beside the human-readable detail,
-- so a reader (the report's "ran beside N others") never parses prose back. NULL for an event
-- without fields. The ran_beside events recorded before this version get their count from their
-- detail ("ran beside N other point(s): ..."), here, once.

-- +goose Up
ALTER TABLE events ADD COLUMN data TEXT CHECK (data IS NULL OR json_valid(data));

UPDATE events SET data = json_object('beside', CAST(substr(detail, 12) AS INTEGER))
    WHERE kind = 'ran_beside' AND detail LIKE 'ran beside %';
