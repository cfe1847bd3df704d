package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sluicehq/sluice/engine"
)

var _ engine.EnqueueClaimer = (*Store)(nil)

// enqueueClaimedItemSQL inserts a one-item job's item as a claim leaves it
// (claimItemsSQL): PROCESSING, locked by the worker, leased, attempt 1.
const enqueueClaimedItemSQL = `INSERT INTO job_items (job_id, user_id, pipeline, run_at, updated_at, seq, input_json, normalized_json,
		status, attempts, locked_by, locked_at, lease_expires_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'PROCESSING', 1, ?, ?, ?)`

// enqueueClaimedJobSQL finishes the job of a claimed one-item enqueue as
// enqueueDoneSQL and a claim (claimJobSQL) together would: one item, in
// flight, the job RUNNING and at the back of the claim line.
const enqueueClaimedJobSQL = `UPDATE jobs SET total_items = 1, processing_items = 1,
		first_item_id = ?1, last_item_id = ?1, last_seq = ?2,
		queue_state = 'RUNNING', started_at = ?3, updated_at = ?3,
		claim_ticket = (SELECT COALESCE(MAX(claim_ticket), 0) + 1 FROM jobs)
	WHERE id = ?4 RETURNING ` + jobColumns

// EnqueueJobClaimed is EnqueueJob with the item of a one-item job written
// as claimed by c.WorkerID (engine.EnqueueClaimer), in the same
// transaction and its one commit.
func (s *Store) EnqueueJobClaimed(ctx context.Context, p *engine.EnqueueJobParams, c *engine.EnqueueClaim) (*engine.Job, *engine.Item, error) {
	if len(p.Items) != 1 || (p.Items[0].Status != "" && p.Items[0].Status != engine.ItemPending) || p.Items[0].LastError != "" {
		j, err := s.EnqueueJob(ctx, p)
		return j, nil, err
	}
	var job *engine.Job
	var it *engine.Item
	err := s.tx(ctx, func(tx *sql.Tx) error {
		id, err := s.insertJobRow(ctx, tx, &p.Job)
		if err != nil {
			return err
		}
		if it, err = s.insertClaimedItem(ctx, tx, id, p, c); err != nil {
			return err
		}
		job, err = scanJob(s.txQueryRow(ctx, tx, enqueueClaimedJobSQL, it.ID, it.Seq, ms(p.Job.Now), id))
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("enqueue job: %w", err)
	}
	return job, it, nil
}

// insertClaimedItem writes the one item of p as claimed and returns it as
// ClaimItems would.
func (s *Store) insertClaimedItem(ctx context.Context, tx *sql.Tx, jobID int64, p *engine.EnqueueJobParams, c *engine.EnqueueClaim) (*engine.Item, error) {
	ni := &p.Items[0]
	if ni.Seq <= 0 {
		return nil, engine.Errorf(engine.EINVALID, "new item seq %d: seqs must rise (last was 0)", ni.Seq)
	}
	now := ms(p.Job.Now)
	lease := ms(p.Job.Now.Add(c.LeaseFor))
	var norm any
	if ni.Input == nil || !sameJSON(ni.Input, ni.Normalized) {
		norm = jsonText(ni.Normalized)
	}
	r, err := s.txExec(ctx, tx, enqueueClaimedItemSQL, jobID, p.Job.UserID, p.Job.Pipeline, now, now, ni.Seq,
		jsonText(ni.Input), norm, c.WorkerID, now, lease)
	if err != nil {
		return nil, fmt.Errorf("insert item of job %d: %w", jobID, err)
	}
	id, err := r.LastInsertId()
	if err != nil {
		return nil, err
	}
	at, until := fromMS(now), fromMS(lease)
	it := &engine.Item{ID: id, JobID: jobID, UserID: p.Job.UserID, Pipeline: p.Job.Pipeline, Seq: ni.Seq,
		Status: engine.ItemProcessing, Attempts: 1, LockedBy: c.WorkerID, LockedAt: &at, LeaseExpiresAt: &until,
		UpdatedAt: at, RunAt: at}
	// As the claim reads it: COALESCE(normalized_json, input_json).
	it.Normalized = append([]byte(nil), ni.Normalized...)
	if norm == nil {
		it.Normalized = append([]byte(nil), ni.Input...)
	}
	return it, nil
}
