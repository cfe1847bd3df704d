-- +goose Up
-- Times are INTEGER milliseconds since the Unix epoch (UTC).

CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    name          TEXT    NOT NULL UNIQUE,
    role          TEXT    NOT NULL CHECK (role IN ('admin', 'user')),
    password_hash TEXT,
    created_at    INTEGER NOT NULL
);
-- The local user owns what the CLI and the desktop window submit.
INSERT INTO users (id, name, role, created_at)
VALUES (1, 'local', 'admin', CAST(unixepoch('subsec') * 1000 AS INTEGER));

CREATE TABLE api_tokens (
    id           INTEGER PRIMARY KEY,
    user_id      INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name         TEXT    NOT NULL,
    token_hash   TEXT    NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER
);

CREATE TABLE files (
    id          INTEGER PRIMARY KEY,
    user_id     INTEGER NOT NULL REFERENCES users (id),
    name        TEXT    NOT NULL,
    size        INTEGER NOT NULL,
    sha256      TEXT,
    media_type  TEXT,
    source      TEXT    NOT NULL,
    source_ref  TEXT,
    stored_path TEXT,
    created_at  INTEGER NOT NULL
);

CREATE TABLE pipelines (
    name       TEXT PRIMARY KEY,
    version    INTEGER NOT NULL,
    spec       TEXT    NOT NULL, -- the pipeline as JSON
    updated_at INTEGER NOT NULL
);
INSERT INTO pipelines (name, version, spec, updated_at)
VALUES ('noop', 1,
        '{"name":"noop","version":1,"description":"built-in: result = the normalised input","stages":[{"processor":"noop"}]}',
        CAST(unixepoch('subsec') * 1000 AS INTEGER));

-- AUTOINCREMENT on jobs and job_items: an id is never used twice, so an
-- outcome computed for a deleted item can never land on a new one, and
-- "job N" always means the same job.
CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id          INTEGER NOT NULL REFERENCES users (id),
    pipeline         TEXT    NOT NULL,
    name             TEXT    NOT NULL DEFAULT '',
    source           TEXT    NOT NULL DEFAULT 'manual',
    source_ref       TEXT,
    file_id          INTEGER REFERENCES files (id) ON DELETE SET NULL,
    queue_state      TEXT    NOT NULL CHECK (queue_state IN
                         ('INGESTING', 'QUEUED', 'RUNNING', 'PAUSED', 'DONE', 'FAILED', 'CANCELED')),
    priority         INTEGER NOT NULL DEFAULT 0,
    dedupe_key       TEXT,
    total_items      INTEGER NOT NULL DEFAULT 0,
    -- Exact counters by item status, changed in the same transaction as
    -- the items they count.
    pending_items    INTEGER NOT NULL DEFAULT 0,
    processing_items INTEGER NOT NULL DEFAULT 0,
    done_items       INTEGER NOT NULL DEFAULT 0,
    error_items      INTEGER NOT NULL DEFAULT 0,
    not_found_items  INTEGER NOT NULL DEFAULT 0,
    skipped_items    INTEGER NOT NULL DEFAULT 0,
    attempts         INTEGER NOT NULL DEFAULT 0, -- attempts that ran (requests)
    max_attempts     INTEGER NOT NULL DEFAULT 5,
    -- Spending cap: PAUSED when attempts reach request_limit (0 = none);
    -- resuming raises the limit by request_cap.
    request_cap      INTEGER NOT NULL DEFAULT 0,
    request_limit    INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT,
    claim_ticket     INTEGER NOT NULL DEFAULT 0, -- round-robin fairness: larger = claimed more recently
    -- A job's items are appended in seq order by one writer, so their ids
    -- rise with seq: export walks the rowid range instead of a seq index.
    first_item_id    INTEGER,
    last_item_id     INTEGER,
    last_seq         INTEGER NOT NULL DEFAULT 0,
    last_heartbeat   INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    started_at       INTEGER,
    finished_at      INTEGER
);
CREATE INDEX jobs_user_created ON jobs (user_id, created_at);
CREATE INDEX jobs_runnable ON jobs (queue_state, priority, claim_ticket);
-- Each claim takes MAX(claim_ticket): an index keeps that a lookup however
-- many finished jobs the table holds.
CREATE INDEX jobs_claim_ticket ON jobs (claim_ticket);

CREATE TABLE job_items (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    -- No REFERENCES on the two item tables: a foreign-key probe per row is
    -- measurable at a million rows, and the store itself guarantees the
    -- parent (items are inserted in the transaction that checks the job;
    -- DeleteJob removes children explicitly).
    job_id           INTEGER NOT NULL,
    user_id          INTEGER NOT NULL, -- denormalised from jobs for the global Pending view
    pipeline         TEXT    NOT NULL, -- denormalised (the job type)
    seq              INTEGER NOT NULL,
    stage            INTEGER NOT NULL DEFAULT 0,
    input_json       TEXT,
    normalized_json  TEXT, -- NULL when equal to input_json (read COALESCE(normalized_json, input_json))
    result_json      TEXT,
    status           TEXT    NOT NULL CHECK (status IN
                         ('PENDING', 'PROCESSING', 'DONE', 'ERROR', 'NOT_FOUND', 'SKIPPED')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    run_at           INTEGER NOT NULL, -- when a PENDING item is due

    last_error       TEXT,
    last_error_code  TEXT,
    locked_by        TEXT,
    locked_at        INTEGER,
    lease_expires_at INTEGER,
    strategy         INTEGER NOT NULL DEFAULT 0,
    -- Last change; for a PENDING item the moment it is due (= run_at), so
    -- that one index serves both the keyset pages and the claims.
    updated_at       INTEGER NOT NULL
);
-- Keyset pages per job and across jobs (seed 000, Pending screens). The
-- per-job one also serves claims: PENDING items of a job in due order.
CREATE INDEX job_items_job_status_updated ON job_items (job_id, status, updated_at, id);
CREATE INDEX job_items_status_user_updated ON job_items (status, user_id, updated_at, id);

CREATE TABLE item_attempts (
    id          INTEGER PRIMARY KEY,
    item_id     INTEGER NOT NULL,
    job_id      INTEGER NOT NULL,
    attempt_no  INTEGER NOT NULL,
    stage       INTEGER NOT NULL DEFAULT 0,
    worker      TEXT,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL,
    outcome     TEXT    NOT NULL,
    error_class TEXT,
    error       TEXT,
    duration_us INTEGER NOT NULL DEFAULT 0,
    detail      TEXT
);
CREATE INDEX item_attempts_item ON item_attempts (item_id, id);

-- +goose Down
DROP TABLE item_attempts;
DROP TABLE job_items;
DROP TABLE jobs;
DROP TABLE pipelines;
DROP TABLE files;
DROP TABLE api_tokens;
DROP TABLE users;
