package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/engine"
)

// ReapExpiredLeases gives back items whose worker stopped renewing their
// lease: to PENDING, or to ERROR (poison) once the job's attempts are spent.
// Any number of processes may reap at once: each locks the expired items it
// takes (skipping those another holds), and the job counters move last.
func (s *Store) ReapExpiredLeases(ctx context.Context, p *engine.ReapParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 10000
	}
	now := ms(p.Now)
	var moved int
	err := s.tx(ctx, func(tx pgx.Tx) error {
		moved = 0
		// SKIP LOCKED: an item whose worker is completing it right now is
		// not lost; the completion decides it.
		rows, err := tx.Query(ctx, `SELECT i.id, i.job_id, i.attempts, i.stage, COALESCE(i.locked_by, ''), i.locked_at, j.max_attempts
			FROM job_items i JOIN jobs j ON j.id = i.job_id
			WHERE i.status = 'PROCESSING' AND i.lease_expires_at < $1
			ORDER BY i.id LIMIT $2 FOR UPDATE OF i SKIP LOCKED`, now, limit)
		if err != nil {
			return err
		}
		type expired struct {
			id, job         int64
			attempts, stage int
			lockedBy        string
			lockedAt        *int64
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
		d := deltas{}
		wake := false
		for _, e := range list {
			status := engine.ItemPending
			msg := fmt.Sprintf("lease expired on attempt %d (worker %s lost)", e.attempts, e.lockedBy)
			if e.attempts >= e.maxAttempts {
				status = engine.ItemError
				msg = fmt.Sprintf("lease expired %d times: worker lost each time (poison item)", e.attempts)
			} else {
				wake = true
			}
			n, err := exec(ctx, tx, `UPDATE job_items SET status = ?, run_at = ?, last_error = ?, last_error_code = ?,
					locked_by = NULL, locked_at = NULL, lease_expires_at = NULL, updated_at = ?
				WHERE id = ? AND status = 'PROCESSING' AND lease_expires_at < ?`,
				string(status), now, msg, string(engine.ClassPoison), now, e.id, now)
			if err != nil {
				return err
			}
			if n == 0 {
				continue
			}
			started := now
			if e.lockedAt != nil {
				started = *e.lockedAt
			}
			if _, err := exec(ctx, tx, `INSERT INTO item_attempts (item_id, job_id, attempt_no, stage, worker, started_at,
					finished_at, outcome, error_class, error, duration_us) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
				e.id, e.job, e.attempts, e.stage, nullStr(e.lockedBy), started, now, string(status), string(engine.ClassPoison), msg,
				(now-started)*1000); err != nil {
				return err
			}
			jd := d.of(e.job)
			jd.counts.Processing--
			jd.counts.Add(status, 1)
			jd.requests++ // the lost attempt may well have made its request
			moved++
		}
		if _, err := applyDeltas(ctx, tx, d, now); err != nil {
			return err
		}
		if moved == 0 {
			return nil
		}
		kind := wakeChange
		if wake {
			kind = wakeWork
		}
		return s.notify(ctx, tx, kind)
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		released = 0
		d := deltas{}
		for _, it := range p.Items {
			n, err := exec(ctx, tx, `UPDATE job_items SET status = 'PENDING', attempts = attempts - 1, run_at = ?,
					locked_by = NULL, locked_at = NULL, lease_expires_at = NULL, updated_at = ?
				WHERE id = ? AND status = 'PROCESSING' AND locked_by = ? AND attempts = ? AND stage = ?`,
				now, now, it.ID, p.WorkerID, it.Attempts, it.Stage)
			if err != nil {
				return err
			}
			if n == 0 {
				continue
			}
			jd := d.of(it.JobID)
			jd.counts.Processing--
			jd.counts.Pending++
			released++
		}
		if _, err := applyDeltas(ctx, tx, d, now); err != nil {
			return err
		}
		if released > 0 {
			return s.notify(ctx, tx, wakeWork)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("release items: %w", err)
	}
	return released, nil
}
