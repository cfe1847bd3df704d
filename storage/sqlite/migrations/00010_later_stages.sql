-- +goose Up
-- Strict stage order in claims (seed 001's priority order): a job's due
-- items of an earlier stage are claimed before any of a later one. Items
-- at stage 0 are found by job_items_job_status_updated as before; this
-- index holds only PENDING items past stage 0, so ingest (which writes
-- stage 0) never touches it, and a claim finds a job's later stages and
-- their due items in stage, due-time order.
CREATE INDEX job_items_later_stages ON job_items (job_id, stage, updated_at, id)
    WHERE status = 'PENDING' AND stage > 0;

-- +goose Down
DROP INDEX job_items_later_stages;
