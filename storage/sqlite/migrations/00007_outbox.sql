-- +goose Up
-- The event outbox: events raised in any process that opens this
-- database, kept until the scheduler leader has fired their triggers.
CREATE TABLE event_outbox (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT    NOT NULL,
    subject    TEXT    NOT NULL DEFAULT '',
    data       TEXT    NOT NULL DEFAULT '{}', -- the event's context as JSON
    origin     TEXT    NOT NULL DEFAULT '',   -- worker id of the raising process
    at         INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    done_at    INTEGER
);
CREATE INDEX event_outbox_pending ON event_outbox (id) WHERE done_at IS NULL;
CREATE INDEX event_outbox_done ON event_outbox (done_at) WHERE done_at IS NOT NULL;

-- +goose Down
DROP INDEX event_outbox_done;
DROP INDEX event_outbox_pending;
DROP TABLE event_outbox;
