package postgres

import (
	"bytes"
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/engine"
)

// insertItemsSQL appends one batch: the rows travel as five arrays (one
// statement, one round trip, whatever the batch size), the batch's
// constants as plain parameters. It returns the id range and counts.
const insertItemsSQL = `WITH ins AS (
		INSERT INTO job_items (job_id, user_id, pipeline, run_at, updated_at, seq, input_json, normalized_json, status, last_error)
		SELECT $1, $2, $3, $4, $4, r.seq, r.input, r.norm, r.status, r.err
		FROM unnest($5::bigint[], $6::text[], $7::text[], $8::text[], $9::text[]) WITH ORDINALITY AS r(seq, input, norm, status, err, n)
		ORDER BY r.n
		RETURNING id, status)
	SELECT COALESCE(min(id), 0), COALESCE(max(id), 0),
		count(*) FILTER (WHERE status = 'PENDING'), count(*) FILTER (WHERE status = 'SKIPPED') FROM ins`

// InsertItems appends a batch of items to an INGESTING job in one
// transaction, with the job's counters and heartbeat.
func (s *Store) InsertItems(ctx context.Context, p *engine.InsertItemsParams) error {
	if len(p.Items) == 0 {
		return nil
	}
	now := ms(p.Now)
	return s.tx(ctx, func(tx pgx.Tx) error {
		var userID, lastSeq int64
		var pipeline, state string
		err := queryRow(ctx, tx, `SELECT user_id, pipeline, queue_state, last_seq FROM jobs WHERE id = ? FOR UPDATE`, p.JobID).
			Scan(&userID, &pipeline, &state, &lastSeq)
		if noRows(err) {
			return notFound("job", p.JobID)
		}
		if err != nil {
			return fmt.Errorf("insert items: %w", err)
		}
		if state != string(engine.JobIngesting) {
			return engine.Errorf(engine.ECONFLICT, "cannot add items to job %d: it is %s", p.JobID, state)
		}
		r, err := insertItems(ctx, tx, p.JobID, userID, pipeline, lastSeq, p.Items, now)
		if err != nil {
			return err
		}
		_, err = exec(ctx, tx, `UPDATE jobs SET pending_items = pending_items + ?, skipped_items = skipped_items + ?,
				first_item_id = COALESCE(first_item_id, ?), last_item_id = ?, last_seq = ?,
				last_heartbeat = ?, updated_at = ? WHERE id = ?`,
			r.pending, r.skipped, r.firstID, r.lastID, r.lastSeq, now, now, p.JobID)
		return err
	})
}

// inserted reports a batch written by insertItems.
type inserted struct {
	pending, skipped int64
	firstID, lastID  int64
	lastSeq          int64
}

// insertItems writes items in one statement. Seqs must rise (items are
// appended in input order).
func insertItems(ctx context.Context, tx pgx.Tx, jobID, userID int64, pipeline string, lastSeq int64, items []engine.NewItem, now int64) (inserted, error) {
	res := inserted{lastSeq: lastSeq}
	seqs := make([]int64, len(items))
	inputs := make([]*string, len(items))
	norms := make([]*string, len(items))
	statuses := make([]string, len(items))
	errs := make([]*string, len(items))
	for i := range items {
		it := &items[i]
		st := it.Status
		if st == "" {
			st = engine.ItemPending
		}
		if it.Seq <= res.lastSeq {
			return res, engine.Errorf(engine.EINVALID, "new item seq %d: seqs must rise (last was %d)", it.Seq, res.lastSeq)
		}
		res.lastSeq = it.Seq
		if st != engine.ItemPending && st != engine.ItemSkipped {
			return res, engine.Errorf(engine.EINVALID, "new item %d: status %s (want PENDING or SKIPPED)", it.Seq, st)
		}
		// A normalised row equal to its input is stored once: readers take
		// COALESCE(normalized, input).
		norm := nullJSON(it.Normalized)
		if it.Input != nil && bytes.Equal(it.Input, it.Normalized) {
			norm = nil
		}
		seqs[i], inputs[i], norms[i], statuses[i], errs[i] = it.Seq, nullJSON(it.Input), norm, string(st), nullStr(it.LastError)
	}
	err := tx.QueryRow(ctx, insertItemsSQL, jobID, userID, pipeline, now, seqs, inputs, norms, statuses, errs).
		Scan(&res.firstID, &res.lastID, &res.pending, &res.skipped)
	if err != nil {
		return res, fmt.Errorf("insert items of job %d: %w", jobID, err)
	}
	return res, nil
}

// EnqueueJob creates a QUEUED job with its items in one transaction and
// wakes the workers when it commits.
func (s *Store) EnqueueJob(ctx context.Context, p *engine.EnqueueJobParams) (*engine.Job, error) {
	var id int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		if id, err = enqueueJob(ctx, tx, p); err != nil {
			return err
		}
		return s.notify(ctx, tx, wakeWork)
	})
	if err != nil {
		return nil, fmt.Errorf("enqueue job: %w", err)
	}
	return s.GetJob(ctx, id)
}

// enqueueJob is EnqueueJob in the caller's transaction, without the
// wake-up. A held dedupe key returns ErrDuplicate and leaves tx usable.
func enqueueJob(ctx context.Context, tx pgx.Tx, p *engine.EnqueueJobParams) (int64, error) {
	id, err := insertJobRow(ctx, tx, &p.Job)
	if err != nil {
		return 0, err
	}
	now := ms(p.Job.Now)
	r := inserted{}
	if len(p.Items) > 0 {
		if r, err = insertItems(ctx, tx, id, p.Job.UserID, p.Job.Pipeline, 0, p.Items, now); err != nil {
			return 0, err
		}
	}
	_, err = exec(ctx, tx, `UPDATE jobs SET pending_items = ?, skipped_items = ?, total_items = ?,
			first_item_id = ?, last_item_id = ?, last_seq = ?,
			queue_state = CASE WHEN ?::bigint = 0 THEN 'DONE' ELSE 'QUEUED' END,
			finished_at = CASE WHEN ?::bigint = 0 THEN ?::bigint ELSE NULL END
		WHERE id = ?`, r.pending, r.skipped, r.pending+r.skipped, nullID(r.firstID), nullID(r.lastID), r.lastSeq,
		r.pending, r.pending, now, id)
	return id, err
}
