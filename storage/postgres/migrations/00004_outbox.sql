-- +goose Up
-- The event outbox, as SQLite's migration 7: events raised by any process
-- on this database, kept until the scheduler leader has fired their
-- triggers. Appends NOTIFY the leader.
CREATE TABLE event_outbox (
    id         BIGSERIAL PRIMARY KEY,
    name       TEXT   NOT NULL,
    subject    TEXT   NOT NULL DEFAULT '',
    data       TEXT   NOT NULL DEFAULT '{}', -- the event's context as JSON
    origin     TEXT   NOT NULL DEFAULT '',   -- worker id of the raising process
    at         BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    done_at    BIGINT
);
CREATE INDEX event_outbox_pending ON event_outbox (id) WHERE done_at IS NULL;
CREATE INDEX event_outbox_done ON event_outbox (done_at) WHERE done_at IS NOT NULL;

-- +goose Down
DROP TABLE event_outbox;
