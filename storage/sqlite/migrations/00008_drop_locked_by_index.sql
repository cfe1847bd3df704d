-- +goose Up
-- Every claim added an entry to job_items_locked_by and every completion
-- removed it: two B-tree writes per item on the hot path, for a lookup
-- (a dead worker's items) that the status index already bounds to the
-- items in flight (job_items_status_user_updated, status = 'PROCESSING').
DROP INDEX job_items_locked_by;

-- +goose Down
CREATE INDEX job_items_locked_by ON job_items (locked_by) WHERE status = 'PROCESSING';
