-- +goose Up
-- Ingest sources (watched folders, later FTP and S3) and the ledger of the
-- objects they found, which makes every object version ingested exactly
-- once across restarts, crashes and repeated events. Times are Unix
-- milliseconds, as everywhere; poll_ms is a duration in milliseconds.
CREATE TABLE sources (
    name         TEXT    NOT NULL PRIMARY KEY,
    kind         TEXT    NOT NULL,
    config_json  TEXT    NOT NULL DEFAULT '{}',
    pipeline     TEXT    NOT NULL,
    after_action TEXT    NOT NULL DEFAULT 'move' CHECK (after_action IN ('move', 'delete', 'leave')),
    poll_ms      INTEGER NOT NULL DEFAULT 10000 CHECK (poll_ms >= 0),
    enabled      INTEGER NOT NULL DEFAULT 1,
    last_poll_at INTEGER,
    last_error   TEXT,
    ingested     INTEGER NOT NULL DEFAULT 0,
    failed       INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
) WITHOUT ROWID;

-- One row per object version (key, size, mtime, etag). AUTOINCREMENT: ids
-- are never reused, because a job names its object by id (source_ref
-- 'source-object:ID').
CREATE TABLE source_objects (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    source     TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    size       INTEGER NOT NULL,
    mtime      INTEGER NOT NULL,
    etag       TEXT    NOT NULL DEFAULT '',
    sha256     TEXT,
    job_id     INTEGER,
    state      TEXT    NOT NULL CHECK (state IN ('SEEN', 'INGESTING', 'DONE', 'FAILED')),
    error      TEXT,
    attempts   INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (source, key, size, mtime, etag)
);
CREATE INDEX source_objects_key ON source_objects (source, key, id);
CREATE INDEX source_objects_state ON source_objects (source, state);
-- Recovery finds a job by its source_ref.
CREATE INDEX jobs_source_ref ON jobs (source_ref) WHERE source_ref IS NOT NULL;

-- +goose Down
DROP INDEX jobs_source_ref;
DROP TABLE source_objects;
DROP TABLE sources;
