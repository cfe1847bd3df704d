-- +goose Up
-- The pace each remote host was last seen to accept (engine/hostlimit), so
-- that a restarted process resumes near it instead of from slow start.
-- Times are Unix milliseconds, as everywhere.
CREATE TABLE host_rates (
    host        TEXT    NOT NULL PRIMARY KEY,
    rate        REAL    NOT NULL CHECK (rate > 0),
    ceiling     REAL    NOT NULL DEFAULT 0 CHECK (ceiling >= 0),
    concurrency INTEGER NOT NULL CHECK (concurrency >= 0),
    updated_at  INTEGER NOT NULL
) WITHOUT ROWID;

-- +goose Down
DROP TABLE host_rates;
