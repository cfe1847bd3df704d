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
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1 /* PROCESSING */, 1, ?, ?, ?)`

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
	err := s.tx(ctx, func(tx *sql.Tx) error {
		id, err := s.insertJobRow(ctx, tx, &p.Job)
		if err != nil {
			return err
		}
		r, err := s.txExec(ctx, tx, enqueueClaimedItemSQL, id, p.Job.UserID, p.Job.Pipeline, now, now, ni.Seq,
			jsonText(ni.Input), norm, c.WorkerID, now, lease)
		if err != nil {
			return fmt.Errorf("insert item of job %d: %w", id, err)
		}
		if itemID, err = r.LastInsertId(); err != nil {
			return err
		}
		job, err = scanJob(s.txQueryRow(ctx, tx, enqueueClaimedJobSQL, itemID, ni.Seq, now, id))
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("enqueue job: %w", err)
	}
	return job, p.ClaimedItem(c, job.ID, itemID), nil
}
