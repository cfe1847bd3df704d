package sqlite

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/engine"
)

var _ engine.EnqueueClaimer = (*Store)(nil)

// enqueueClaimedItemSQL inserts a one-item job's item as a claim leaves it
// (claimItemsSQL): PROCESSING, locked by the worker, leased, attempt 1.
const enqueueClaimedItemSQL = `INSERT INTO job_items (job_id, user_id, pipeline, run_at, updated_at, seq, input_json, normalized_json,
		status, attempts, locked_by, locked_at, lease_expires_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1 /* PROCESSING */, 1, ?, ?, ?)`

// insertClaimedJobSQL inserts the job of a claimed one-item enqueue as
// enqueueDoneSQL and a claim (claimJobSQL) together would leave it: one
// item, in flight (its seq ?15, started at ?16), the job RUNNING and at
// the back of the claim line (ticket ?17). Written once in its final
// state, the row puts one entry in each of the jobs' indexes: an insert as
// INGESTING and an update would move its jobs_runnable entry, often to
// another page, and each page changed is one more page for the commit to
// write and sync.
const insertClaimedJobSQL = `INSERT INTO jobs (user_id, pipeline, name, source, source_ref, file_id, queue_state,
		priority, max_attempts, request_cap, request_limit, last_heartbeat, created_at, updated_at, dedupe_key,
		total_items, processing_items, last_seq, started_at, claim_ticket)
	VALUES (?, ?, ?, ?, ?, ?, 'RUNNING', ?, ?, ?, ?, ?, ?, ?, ?, 1, 1, ?, ?, ?)`

// claimedJobItemSQL records the item of a claimed one-item job (columns
// no index holds, so only the job's own page changes).
const claimedJobItemSQL = `UPDATE jobs SET first_item_id = ?1, last_item_id = ?1 WHERE id = ?2`

// claimedJob is the job that insertClaimedJobSQL and claimedJobItemSQL
// leave, as scanJob reads it: the transaction wrote every column of it, so
// it is not read back (the conformance suite compares it with the stored
// job).
func claimedJob(p *engine.CreateJobParams, id int64) *engine.Job {
	source, maxAttempts := jobDefaults(p)
	at := fromMS(ms(p.Now))
	started, heartbeat := at, at
	return &engine.Job{ID: id, UserID: p.UserID, Pipeline: p.Pipeline, Name: p.Name, Source: source,
		SourceRef: p.SourceRef, FileID: p.FileID, State: engine.JobRunning, Priority: p.Priority,
		TotalItems: 1, Counts: engine.ItemCounts{Processing: 1}, MaxAttempts: maxAttempts,
		RequestLimit: max(p.RequestCap, 0), RequestCap: max(p.RequestCap, 0),
		CreatedAt: at, UpdatedAt: at, StartedAt: &started, LastHeartbeat: &heartbeat}
}

// EnqueueJobClaimed is EnqueueJob with the item of a one-item job written
// as claimed by c.WorkerID (engine.EnqueueClaimer), in the same
// transaction and its one commit.
//
// It is the path of an idle worker's pickup, so it runs on the write
// connection's driver connection (rawTx) with statements prepared once on
// it, not through database/sql: that saves about a quarter of its CPU
// (docs/BENCHMARKS.md).
func (s *Store) EnqueueJobClaimed(ctx context.Context, p *engine.EnqueueJobParams, c *engine.EnqueueClaim) (*engine.Job, *engine.Item, error) {
	if !p.OneClaimable() {
		j, err := s.EnqueueJob(ctx, p)
		return j, nil, err
	}
	ni := &p.Items[0]
	now, lease := ms(p.Job.Now), ms(p.Job.Now.Add(c.LeaseFor))
	var norm any
	if ni.Input == nil || !sameJSON(ni.Input, ni.Normalized) {
		norm = jsonText(ni.Normalized)
	}
	var job *engine.Job
	var itemID int64
	err := s.rawTx(ctx, func(wc *stmtConn) error {
		if err := checkDedupe(&p.Job, wc.probe(ctx)); err != nil {
			return err
		}
		r, err := wc.exec(ctx, insertClaimedJobSQL, append(jobRow(&p.Job), ni.Seq, now, s.tickets.next())...)
		if err = insertJobErr(&p.Job, err); err != nil {
			return err
		}
		id, err := r.LastInsertId()
		if err != nil {
			return err
		}
		r, err = wc.exec(ctx, enqueueClaimedItemSQL, id, p.Job.UserID, p.Job.Pipeline, now, now, ni.Seq,
			jsonText(ni.Input), norm, c.WorkerID, now, lease)
		if err != nil {
			return fmt.Errorf("insert item of job %d: %w", id, err)
		}
		if itemID, err = r.LastInsertId(); err != nil {
			return err
		}
		if _, err := wc.exec(ctx, claimedJobItemSQL, itemID, id); err != nil {
			return err
		}
		job = claimedJob(&p.Job, id)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("enqueue job: %w", err)
	}
	return job, p.ClaimedItem(c, job.ID, itemID), nil
}
