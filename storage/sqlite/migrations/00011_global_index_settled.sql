-- +goose Up
-- Every claim moved an item's entry in this index from PENDING to
-- PROCESSING and every completion moved it again: four B-tree writes per
-- item on the hot path. Items in flight are few (the workers' claims) and
-- their jobs are known (jobs.processing_items > 0), so the listings of
-- PROCESSING items across jobs read them through the per-job index of
-- those jobs instead, and this index keeps only the other statuses: a
-- claim removes one entry and a completion adds one. PostgreSQL does the
-- same (its migration 00006).
DROP INDEX job_items_status_user_updated;
CREATE INDEX job_items_status_user_updated ON job_items (status, user_id, updated_at, id)
    WHERE status <> 'PROCESSING';

-- +goose Down
DROP INDEX job_items_status_user_updated;
CREATE INDEX job_items_status_user_updated ON job_items (status, user_id, updated_at, id);
