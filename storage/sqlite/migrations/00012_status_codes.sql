-- +goose Up
-- Item statuses as small integer codes instead of their names (see
-- storage/sqlite/status.go for the codes, which are fixed from here on):
-- the status leads both keyset indexes, and every claim and completion
-- rewrites an item's entries there. SQLite cannot change a column's type
-- in place, so the table is rebuilt with the same columns and rows, its
-- AUTOINCREMENT high-water mark carried over (ids are never reused), and
-- its indexes made again, their WHERE clauses spelled with the codes.
-- On a store of a million items this took 10 s here, once.
CREATE TABLE job_items_new (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id           INTEGER NOT NULL,
    user_id          INTEGER NOT NULL,
    pipeline         TEXT    NOT NULL,
    seq              INTEGER NOT NULL,
    stage            INTEGER NOT NULL DEFAULT 0,
    input_json       TEXT,
    normalized_json  TEXT,
    result_json      TEXT,
    -- 0 PENDING, 1 PROCESSING, 2 DONE, 3 ERROR, 4 NOT_FOUND, 5 SKIPPED
    status           INTEGER NOT NULL CHECK (status BETWEEN 0 AND 5),
    attempts         INTEGER NOT NULL DEFAULT 0,
    run_at           INTEGER NOT NULL,
    last_error       TEXT,
    last_error_code  TEXT,
    locked_by        TEXT,
    locked_at        INTEGER,
    lease_expires_at INTEGER,
    strategy         INTEGER NOT NULL DEFAULT 0,
    updated_at       INTEGER NOT NULL
);
INSERT INTO job_items_new (id, job_id, user_id, pipeline, seq, stage, input_json, normalized_json, result_json,
        status, attempts, run_at, last_error, last_error_code, locked_by, locked_at, lease_expires_at, strategy, updated_at)
    SELECT id, job_id, user_id, pipeline, seq, stage, input_json, normalized_json, result_json,
        CASE status WHEN 'PENDING' THEN 0 WHEN 'PROCESSING' THEN 1 WHEN 'DONE' THEN 2
            WHEN 'ERROR' THEN 3 WHEN 'NOT_FOUND' THEN 4 WHEN 'SKIPPED' THEN 5 END,
        attempts, run_at, last_error, last_error_code, locked_by, locked_at, lease_expires_at, strategy, updated_at
    FROM job_items ORDER BY id;
-- The old table's high-water mark, also when its last items were deleted.
DELETE FROM sqlite_sequence WHERE name = 'job_items_new';
INSERT INTO sqlite_sequence (name, seq) SELECT 'job_items_new', seq FROM sqlite_sequence WHERE name = 'job_items';
DROP TABLE job_items;
ALTER TABLE job_items_new RENAME TO job_items;
CREATE INDEX job_items_job_status_updated ON job_items (job_id, status, updated_at, id);
CREATE INDEX job_items_status_user_updated ON job_items (status, user_id, updated_at, id)
    WHERE status <> 1 /* PROCESSING */;
CREATE INDEX job_items_later_stages ON job_items (job_id, stage, updated_at, id)
    WHERE status = 0 /* PENDING */ AND stage > 0;

-- +goose Down
CREATE TABLE job_items_old (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id           INTEGER NOT NULL,
    user_id          INTEGER NOT NULL,
    pipeline         TEXT    NOT NULL,
    seq              INTEGER NOT NULL,
    stage            INTEGER NOT NULL DEFAULT 0,
    input_json       TEXT,
    normalized_json  TEXT,
    result_json      TEXT,
    status           TEXT    NOT NULL CHECK (status IN
                         ('PENDING', 'PROCESSING', 'DONE', 'ERROR', 'NOT_FOUND', 'SKIPPED')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    run_at           INTEGER NOT NULL,
    last_error       TEXT,
    last_error_code  TEXT,
    locked_by        TEXT,
    locked_at        INTEGER,
    lease_expires_at INTEGER,
    strategy         INTEGER NOT NULL DEFAULT 0,
    updated_at       INTEGER NOT NULL
);
INSERT INTO job_items_old (id, job_id, user_id, pipeline, seq, stage, input_json, normalized_json, result_json,
        status, attempts, run_at, last_error, last_error_code, locked_by, locked_at, lease_expires_at, strategy, updated_at)
    SELECT id, job_id, user_id, pipeline, seq, stage, input_json, normalized_json, result_json,
        CASE status WHEN 0 THEN 'PENDING' WHEN 1 THEN 'PROCESSING' WHEN 2 THEN 'DONE'
            WHEN 3 THEN 'ERROR' WHEN 4 THEN 'NOT_FOUND' WHEN 5 THEN 'SKIPPED' END,
        attempts, run_at, last_error, last_error_code, locked_by, locked_at, lease_expires_at, strategy, updated_at
    FROM job_items ORDER BY id;
DELETE FROM sqlite_sequence WHERE name = 'job_items_old';
INSERT INTO sqlite_sequence (name, seq) SELECT 'job_items_old', seq FROM sqlite_sequence WHERE name = 'job_items';
DROP TABLE job_items;
ALTER TABLE job_items_old RENAME TO job_items;
CREATE INDEX job_items_job_status_updated ON job_items (job_id, status, updated_at, id);
CREATE INDEX job_items_status_user_updated ON job_items (status, user_id, updated_at, id)
    WHERE status <> 'PROCESSING';
CREATE INDEX job_items_later_stages ON job_items (job_id, stage, updated_at, id)
    WHERE status = 'PENDING' AND stage > 0;
