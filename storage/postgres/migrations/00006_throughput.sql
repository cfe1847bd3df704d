-- +goose Up
-- Fewer writes per processed item (docs/BENCHMARKS.md, PostgreSQL). Every
-- claim and every completion writes a new version of the item row and an
-- entry in each of its indexes (the status changes, so no update is HOT),
-- and every completion inserts an attempt row with an entry in each of
-- its indexes; on a busy queue the server spends its time there.

-- Room on each page for the next versions of its rows: an update then
-- stays on the page (no second lock record, no table extension while other
-- writers wait for it). It applies to pages written from now on.
ALTER TABLE job_items SET (fillfactor = 50);

-- One index of the items in flight instead of two: the reaper reads it by
-- lease end, reclaiming a dead worker's leases filters its (few) entries
-- by worker.
DROP INDEX job_items_lease;
DROP INDEX job_items_locked_by;
CREATE INDEX job_items_inflight ON job_items (lease_expires_at, locked_by) WHERE status = 'PROCESSING';

-- Items in flight are few and have their index above: the listing of one
-- user's items by status across jobs finds them there, so a claim does not
-- add an entry to this index too.
DROP INDEX job_items_status_user_updated;
CREATE INDEX job_items_status_user_updated ON job_items (status, user_id, updated_at, id) WHERE status <> 'PROCESSING';

-- Attempts are read per item in id order and deleted with their job's
-- items: one index, the primary key, serves both.
ALTER TABLE item_attempts DROP CONSTRAINT item_attempts_pkey;
DROP INDEX item_attempts_item;
DROP INDEX item_attempts_job;
ALTER TABLE item_attempts ADD PRIMARY KEY (item_id, id);

-- +goose Down
ALTER TABLE item_attempts DROP CONSTRAINT item_attempts_pkey;
ALTER TABLE item_attempts ADD PRIMARY KEY (id);
CREATE INDEX item_attempts_item ON item_attempts (item_id, id);
CREATE INDEX item_attempts_job ON item_attempts (job_id);
DROP INDEX job_items_status_user_updated;
CREATE INDEX job_items_status_user_updated ON job_items (status, user_id, updated_at, id);
DROP INDEX job_items_inflight;
CREATE INDEX job_items_lease ON job_items (lease_expires_at) WHERE status = 'PROCESSING';
CREATE INDEX job_items_locked_by ON job_items (locked_by) WHERE status = 'PROCESSING';
ALTER TABLE job_items RESET (fillfactor);
