package postgres

import (
	"bytes"
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/engine"
)

var _ engine.EnqueueClaimer = (*Store)(nil)

// enqueueClaimedItemSQL inserts a one-item job's item as a claim leaves it
// (claimUpdateSQL): PROCESSING, locked by the worker, leased, attempt 1.
const enqueueClaimedItemSQL = `INSERT INTO job_items (job_id, user_id, pipeline, run_at, updated_at, seq, input_json, normalized_json,
		status, attempts, locked_by, locked_at, lease_expires_at)
	VALUES ($1, $2, $3, $4, $4, $5, $6, $7, 'PROCESSING', 1, $8, $4, $9) RETURNING id`

// enqueueClaimedJobSQL finishes the job as an enqueue and a claim
// (claimJobSQL) together would: one item, in flight, the job RUNNING and
// at the back of the claim line.
const enqueueClaimedJobSQL = `UPDATE jobs SET total_items = 1, processing_items = 1,
		first_item_id = $1, last_item_id = $1, last_seq = $2,
		queue_state = 'RUNNING', started_at = $3, updated_at = $3,
		claim_ticket = nextval('claim_tickets')
	WHERE id = $4 RETURNING ` + jobColumns

// EnqueueJobClaimed is EnqueueJob with the item of a one-item job written
// as claimed by c.WorkerID (engine.EnqueueClaimer), in one transaction.
// Nothing is left PENDING, so no other worker is woken.
func (s *Store) EnqueueJobClaimed(ctx context.Context, p *engine.EnqueueJobParams, c *engine.EnqueueClaim) (*engine.Job, *engine.Item, error) {
	if !p.OneClaimable() {
		j, err := s.EnqueueJob(ctx, p)
		return j, nil, err
	}
	ni := &p.Items[0]
	now, lease := ms(p.Job.Now), ms(p.Job.Now.Add(c.LeaseFor))
	norm := nullJSON(ni.Normalized)
	if ni.Input != nil && bytes.Equal(ni.Input, ni.Normalized) {
		norm = nil
	}
	var job *engine.Job
	var itemID int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		id, err := insertJobRow(ctx, tx, &p.Job)
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, enqueueClaimedItemSQL, id, p.Job.UserID, p.Job.Pipeline, now, ni.Seq, nullJSON(ni.Input), norm,
			c.WorkerID, lease).Scan(&itemID)
		if err != nil {
			return fmt.Errorf("insert item of job %d: %w", id, err)
		}
		job, err = scanJob(tx.QueryRow(ctx, enqueueClaimedJobSQL, itemID, ni.Seq, now, id))
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("enqueue job: %w", err)
	}
	return job, p.ClaimedItem(c, job.ID, itemID), nil
}
