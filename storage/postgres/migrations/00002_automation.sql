-- +goose Up
-- Seed 003 on PostgreSQL, as SQLite's migration 5: command definitions,
-- event and schedule triggers, the scheduler's lease, worker heartbeats,
-- and the dedupe keys of unfinished jobs. Times are BIGINT milliseconds.

CREATE TABLE job_definitions (
    key        TEXT    NOT NULL PRIMARY KEY,
    version    INTEGER NOT NULL,
    spec       TEXT    NOT NULL, -- the definition as JSON
    is_active  BOOLEAN NOT NULL DEFAULT TRUE,
    created_at BIGINT  NOT NULL,
    updated_at BIGINT  NOT NULL
);

CREATE TABLE job_triggers (
    name             TEXT    NOT NULL PRIMARY KEY,
    kind             TEXT    NOT NULL CHECK (kind IN ('event', 'schedule')),
    event_name       TEXT,
    cron_expr        TEXT,
    timezone         TEXT,
    definition_key   TEXT,
    pipeline         TEXT,
    payload_template TEXT    NOT NULL DEFAULT '{}',
    priority         INTEGER NOT NULL DEFAULT 0,
    dedupe_window_ms BIGINT  NOT NULL DEFAULT 0 CHECK (dedupe_window_ms >= 0),
    missed           TEXT    NOT NULL DEFAULT 'skip' CHECK (missed IN ('skip', 'once')),
    enabled          BOOLEAN NOT NULL DEFAULT TRUE,
    next_fire_at     BIGINT,
    last_fire_at     BIGINT,
    last_job_id      BIGINT,
    last_result      TEXT,
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL,
    CHECK ((kind = 'event' AND event_name IS NOT NULL AND cron_expr IS NULL)
        OR (kind = 'schedule' AND cron_expr IS NOT NULL AND timezone IS NOT NULL AND event_name IS NULL)),
    CHECK ((definition_key IS NULL) <> (pipeline IS NULL))
);
CREATE INDEX job_triggers_event ON job_triggers (event_name) WHERE kind = 'event';

-- Named leases with an expiry (the scheduler's). Not an advisory lock:
-- the contract's lease runs out at a time the caller gives, whether or
-- not its holder's connection lives (see automation.go).
CREATE TABLE leader_leases (
    name       TEXT   NOT NULL PRIMARY KEY,
    holder     TEXT   NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE TABLE job_workers (
    worker_id  TEXT    NOT NULL PRIMARY KEY, -- host:pid:boot
    hostname   TEXT    NOT NULL,
    pid        INTEGER NOT NULL,
    version    TEXT    NOT NULL DEFAULT '',
    started_at BIGINT  NOT NULL,
    last_seen  BIGINT  NOT NULL,
    running    INTEGER NOT NULL DEFAULT 0,
    scheduler  BOOLEAN NOT NULL DEFAULT FALSE
);

-- Seed 003's dedupe: no two unfinished jobs hold one key. Inserts name
-- this index in ON CONFLICT, so a concurrent duplicate is refused without
-- aborting the caller's transaction.
CREATE UNIQUE INDEX jobs_active_dedupe ON jobs (dedupe_key)
    WHERE dedupe_key IS NOT NULL AND queue_state IN ('INGESTING', 'QUEUED', 'RUNNING', 'PAUSED');
-- The dedupe window looks up the newest job of a key.
CREATE INDEX jobs_dedupe_created ON jobs (dedupe_key, created_at) WHERE dedupe_key IS NOT NULL;
-- Reclaiming a dead worker's leases finds its items.
CREATE INDEX job_items_locked_by ON job_items (locked_by) WHERE status = 'PROCESSING';

-- +goose Down
DROP INDEX job_items_locked_by;
DROP INDEX jobs_dedupe_created;
DROP INDEX jobs_active_dedupe;
DROP TABLE job_workers;
DROP TABLE leader_leases;
DROP TABLE job_triggers;
DROP TABLE job_definitions;
