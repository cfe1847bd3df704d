package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sluicehq/sluice/engine"
)

// expiredLeasesSQL finds items whose lease ended, through the jobs that
// have items in flight and their per-job index (the global index leaves
// items in flight out).
const expiredLeasesSQL = `SELECT i.id, i.job_id, i.attempts, i.stage, i.locked_by, i.locked_at, j.max_attempts
	FROM jobs j INDEXED BY jobs_runnable
	JOIN job_items i INDEXED BY job_items_job_status_updated ON i.job_id = j.id AND i.status = 1 /* PROCESSING */
	WHERE ` + jobsInFlight + `
	AND i.lease_expires_at < ? LIMIT ?`

// ReapExpiredLeases gives back items whose worker stopped renewing their
// lease: to PENDING, or to ERROR (poison) once the job's attempts are spent.
func (s *Store) ReapExpiredLeases(ctx context.Context, p *engine.ReapParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 10000
	}
	now := ms(p.Now)
	var moved int
	err := s.tx(ctx, func(tx *sql.Tx) error {
		moved = 0
		rows, err := tx.QueryContext(ctx, expiredLeasesSQL, now, limit)
		if err != nil {
			return err
		}
		type expired struct {
			id, job         int64
			attempts, stage int
			lockedBy        sql.NullString
			lockedAt        sql.NullInt64
			maxAttempts     int
		}
		var list []expired
		for rows.Next() {
			var e expired
			if err := rows.Scan(&e.id, &e.job, &e.attempts, &e.stage, &e.lockedBy, &e.lockedAt, &e.maxAttempts); err != nil {
				rows.Close()
				return err
			}
			list = append(list, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		deltas := map[int64]*jobDelta{}
		for _, e := range list {
			status := engine.ItemPending
			msg := fmt.Sprintf("lease expired on attempt %d (worker %s lost)", e.attempts, e.lockedBy.String)
			if e.attempts >= e.maxAttempts {
				status = engine.ItemError
				msg = fmt.Sprintf("lease expired %d times: worker lost each time (poison item)", e.attempts)
			}
			_, err := tx.ExecContext(ctx, `UPDATE job_items SET status = ?, run_at = ?, last_error = ?, last_error_code = ?,
					locked_by = NULL, locked_at = NULL, lease_expires_at = NULL, updated_at = ?
				WHERE id = ? AND status = 1 /* PROCESSING */`,
				statusCode(status), now, msg, string(engine.ClassPoison), now, e.id)
			if err != nil {
				return err
			}
			started := now
			if e.lockedAt.Valid {
				started = e.lockedAt.Int64
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO item_attempts (item_id, job_id, attempt_no, stage, worker, started_at,
					finished_at, outcome, error_class, error, duration_us) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
				e.id, e.job, e.attempts, e.stage, e.lockedBy, started, now, string(status), string(engine.ClassPoison), msg,
				(now-started)*1000); err != nil {
				return err
			}
			d := deltas[e.job]
			if d == nil {
				d = &jobDelta{}
				deltas[e.job] = d
			}
			d.counts.Processing--
			d.counts.Add(status, 1)
			d.requests++ // the lost attempt may well have made its request
			moved++
		}
		_, err = s.applyDeltas(ctx, tx, deltas, now)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reap expired leases: %w", err)
	}
	return moved, nil
}

// ReleaseItems gives back claimed items that never started.
func (s *Store) ReleaseItems(ctx context.Context, p *engine.ReleaseItemsParams) (int, error) {
	if len(p.Items) == 0 {
		return 0, nil
	}
	now := ms(p.Now)
	var released int
	err := s.tx(ctx, func(tx *sql.Tx) error {
		released = 0
		deltas := map[int64]*jobDelta{}
		for _, it := range p.Items {
			r, err := tx.ExecContext(ctx, `UPDATE job_items SET status = 0 /* PENDING */, attempts = attempts - 1, run_at = ?,
					locked_by = NULL, locked_at = NULL, lease_expires_at = NULL, updated_at = ?
				WHERE id = ? AND status = 1 /* PROCESSING */ AND locked_by = ? AND attempts = ? AND stage = ?`,
				now, now, it.ID, p.WorkerID, it.Attempts, it.Stage)
			if err != nil {
				return err
			}
			if n, _ := r.RowsAffected(); n == 0 {
				continue
			}
			d := deltas[it.JobID]
			if d == nil {
				d = &jobDelta{}
				deltas[it.JobID] = d
			}
			d.counts.Processing--
			d.counts.Pending++
			released++
		}
		_, err := s.applyDeltas(ctx, tx, deltas, now)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("release items: %w", err)
	}
	return released, nil
}
