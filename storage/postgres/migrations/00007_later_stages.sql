-- +goose Up
-- Strict stage order in claims: see the SQLite migration of the same name.
-- Only PENDING items past stage 0 are in it, so ingest never writes it.
CREATE INDEX job_items_later_stages ON job_items (job_id, stage, updated_at, id)
    WHERE status = 'PENDING' AND stage > 0;

-- +goose Down
DROP INDEX job_items_later_stages;
