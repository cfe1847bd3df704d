-- +goose Up
-- Files workers need after ingest (images, uploaded originals, thumbnails),
-- kept in the store so that every process sharing it can read them. A blob
-- is written as 1 MiB chunks under a fresh id and becomes visible (complete
-- = 1) in one transaction once every chunk is stored; replacing a key
-- removes the older blob in that same transaction.

CREATE TABLE blobs (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    key        TEXT    NOT NULL,
    job_id     INTEGER, -- the job it belongs to; deleted with it
    size       INTEGER NOT NULL DEFAULT 0,
    sha256     TEXT,
    media_type TEXT,
    complete   INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX blobs_key ON blobs (key) WHERE complete = 1;
CREATE INDEX blobs_job ON blobs (job_id) WHERE job_id IS NOT NULL;

CREATE TABLE blob_chunks (
    blob_id INTEGER NOT NULL,
    n       INTEGER NOT NULL,
    data    BLOB    NOT NULL,
    PRIMARY KEY (blob_id, n)
) WITHOUT ROWID;

-- +goose Down
DROP TABLE blob_chunks;
DROP INDEX blobs_job;
DROP INDEX blobs_key;
DROP TABLE blobs;
