package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/engine"
)

// itemColumns without the input columns; the listing and export hot paths
// never read input_json unless asked.
const itemColumns = `id, job_id, user_id, pipeline, seq, stage, result_json, status, attempts, run_at,
	last_error, last_error_code, locked_by, locked_at, lease_expires_at, strategy, updated_at`

func scanItem(sc scanner, withInput bool) (*engine.Item, error) {
	var it engine.Item
	var result, lastErr, lastCode, lockedBy, input, norm *string
	var lockedAt, lease *int64
	var runAt, updated int64
	var status string
	dest := []any{&it.ID, &it.JobID, &it.UserID, &it.Pipeline, &it.Seq, &it.Stage, &result, &status, &it.Attempts,
		&runAt, &lastErr, &lastCode, &lockedBy, &lockedAt, &lease, &it.Strategy, &updated}
	if withInput {
		dest = append(dest, &input, &norm)
	}
	if err := sc.Scan(dest...); err != nil {
		return nil, err
	}
	it.Status = engine.ItemStatus(status)
	if result != nil {
		it.Result = []byte(*result)
	}
	if input != nil {
		it.Input = []byte(*input)
	}
	if norm != nil {
		it.Normalized = []byte(*norm)
	}
	it.RunAt = fromMS(runAt)
	it.LastError, it.LastErrorCode, it.LockedBy = str(lastErr), str(lastCode), str(lockedBy)
	it.LockedAt = fromNullMS(lockedAt)
	it.LeaseExpiresAt = fromNullMS(lease)
	it.UpdatedAt = fromMS(updated)
	return &it, nil
}

func selectItems(withInput bool) string {
	if withInput {
		return "SELECT " + itemColumns + ", input_json, COALESCE(normalized_json, input_json) FROM job_items"
	}
	return "SELECT " + itemColumns + " FROM job_items"
}

// GetItem returns one item with everything it holds.
func (s *Store) GetItem(ctx context.Context, id int64) (*engine.Item, error) {
	it, err := scanItem(queryRow(ctx, s.pool, selectItems(true)+" WHERE id = ?", id), true)
	if noRows(err) {
		return nil, notFound("item", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get item %d: %w", id, err)
	}
	return it, nil
}

// ListItems returns one keyset page in (updated_at, id) order. Each status
// (and, across jobs, each owner) is one range of an index read in index
// order up to the page size; the ranges are merged here, so no query sorts
// more than a page.
func (s *Store) ListItems(ctx context.Context, p *engine.ListItemsParams) (*engine.ItemPage, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	statuses := engine.DistinctStatuses(p.Statuses)
	var after []any
	cursor := ""
	if p.After != nil {
		cursor = " AND (updated_at, id) > (?, ?)"
		after = []any{ms(p.After.UpdatedAt), p.After.ID}
	}
	var ranges [][]*engine.Item
	// One read-only repeatable-read transaction: every range sees the same
	// snapshot.
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var users []int64
		if p.JobID == 0 {
			if p.UserID != 0 {
				users = []int64{p.UserID}
			} else {
				rows, err := tx.Query(ctx, `SELECT id FROM users ORDER BY id`)
				if err != nil {
					return err
				}
				if users, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
					return err
				}
			}
		}
		keyRange := func(base string, args ...any) error {
			args = append(append(args, after...), limit+1)
			rows, err := query(ctx, tx, base+cursor+" ORDER BY updated_at, id LIMIT ?", args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			var list []*engine.Item
			for rows.Next() {
				it, err := scanItem(rows, p.WithInput)
				if err != nil {
					return err
				}
				list = append(list, it)
			}
			ranges = append(ranges, list)
			return rows.Err()
		}
		for _, st := range statuses {
			if p.JobID != 0 {
				q := selectItems(p.WithInput) + ` WHERE job_id = ? AND status = ?`
				args := []any{p.JobID, string(st)}
				if p.UserID != 0 {
					q += " AND user_id = ?"
					args = append(args, p.UserID)
				}
				if p.Pipeline != "" {
					q += " AND pipeline = ?"
					args = append(args, p.Pipeline)
				}
				if err := keyRange(q, args...); err != nil {
					return err
				}
				continue
			}
			for _, u := range users {
				q := selectItems(p.WithInput) + ` WHERE status = ? AND user_id = ?`
				args := []any{string(st), u}
				if p.Pipeline != "" {
					q += " AND pipeline = ?"
					args = append(args, p.Pipeline)
				}
				if err := keyRange(q, args...); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list items: %w", err)
	}
	var merged []*engine.Item
	for _, r := range ranges {
		merged = append(merged, r...)
	}
	slices.SortFunc(merged, func(a, b *engine.Item) int {
		if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	page := &engine.ItemPage{Items: merged}
	if len(merged) > limit {
		page.Items = merged[:limit]
		last := page.Items[limit-1]
		page.Next = &engine.Cursor{UpdatedAt: last.UpdatedAt, ID: last.ID}
	}
	return page, nil
}

// ScanItems streams a job's items in ListItems' order, (updated_at, id),
// from one repeatable-read snapshot. PostgreSQL sorts the chosen statuses'
// rows (one index range each) into that order; rows stream as they come.
func (s *Store) ScanItems(ctx context.Context, p *engine.ScanItemsParams, fn func(*engine.Item) error) error {
	if p.GridOnly && p.WithInput {
		return engine.Errorf(engine.EINVALID, "scan items: GridOnly and WithInput exclude each other")
	}
	statuses := engine.DistinctStatuses(p.Statuses)
	names := make([]string, len(statuses))
	for i, st := range statuses {
		names[i] = string(st)
	}
	var fnErr error
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := jobExists(ctx, tx, p.JobID); err != nil {
			return err
		}
		q := selectItems(p.WithInput)
		if p.GridOnly {
			q = `SELECT id, seq, attempts, last_error, result_json, status FROM job_items`
		}
		rows, err := tx.Query(ctx, q+` WHERE job_id = $1 AND status = ANY($2) ORDER BY updated_at, id`, p.JobID, names)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var it *engine.Item
			if p.GridOnly {
				it = &engine.Item{JobID: p.JobID}
				var lastErr, result *string
				var status string
				if err := rows.Scan(&it.ID, &it.Seq, &it.Attempts, &lastErr, &result, &status); err != nil {
					return err
				}
				it.LastError, it.Status = str(lastErr), engine.ItemStatus(status)
				if result != nil {
					it.Result = []byte(*result)
				}
			} else if it, err = scanItem(rows, p.WithInput); err != nil {
				return err
			}
			if err := fn(it); err != nil {
				fnErr = err
				return err
			}
		}
		return rows.Err()
	})
	if fnErr != nil && errors.Is(err, fnErr) {
		return fnErr
	}
	if err != nil && !engine.IsNotFound(err) {
		return fmt.Errorf("scan items of job %d: %w", p.JobID, err)
	}
	return err
}

// ReprocessItems puts terminal items back to PENDING.
func (s *Store) ReprocessItems(ctx context.Context, p *engine.ReprocessParams) (int64, error) {
	statuses := p.TargetStatuses()
	now := ms(p.Now)
	var total int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		total = 0
		var state string
		err := tx.QueryRow(ctx, `SELECT queue_state FROM jobs WHERE id = $1 FOR UPDATE`, p.JobID).Scan(&state)
		if noRows(err) {
			return notFound("job", p.JobID)
		}
		if err != nil {
			return err
		}
		switch state {
		case string(engine.JobIngesting):
			return engine.Errorf(engine.ECONFLICT, "cannot reprocess job %d: it is still INGESTING", p.JobID)
		case string(engine.JobFailed):
			return engine.Errorf(engine.ECONFLICT, "cannot reprocess job %d: its input was never fully read (FAILED); ingest the file again", p.JobID)
		}
		d := &jobDelta{}
		for _, st := range statuses {
			if !st.Terminal() {
				continue // PENDING and PROCESSING items are never touched
			}
			q := `UPDATE job_items SET status = 'PENDING', run_at = ?, updated_at = ?, stage = 0, strategy = 0,
					result_json = NULL, locked_by = NULL, locked_at = NULL, lease_expires_at = NULL,
					attempts = CASE WHEN ? THEN 0 ELSE attempts END
				WHERE job_id = ? AND status = ?`
			args := []any{now, now, p.ResetAttempts, p.JobID, string(st)}
			if len(p.ItemIDs) > 0 {
				q += " AND id = ANY(?)"
				args = append(args, p.ItemIDs)
			}
			n, err := exec(ctx, tx, q, args...)
			if err != nil {
				return err
			}
			d.counts.Add(st, -n)
			d.counts.Pending += n
			total += n
		}
		if total == 0 {
			return nil
		}
		if _, err := applyDeltas(ctx, tx, deltas{p.JobID: d}, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE jobs SET queue_state = CASE WHEN queue_state IN ('DONE', 'FAILED', 'CANCELED')
				THEN 'QUEUED' ELSE queue_state END, finished_at = NULL, last_error = NULL, updated_at = $1 WHERE id = $2`, now, p.JobID); err != nil {
			return err
		}
		return s.notify(ctx, tx, wakeWork)
	})
	if err != nil {
		return 0, fmt.Errorf("reprocess job %d: %w", p.JobID, err)
	}
	return total, nil
}

// ListAttempts returns an item's attempts, oldest first.
func (s *Store) ListAttempts(ctx context.Context, itemID int64) ([]*engine.Attempt, error) {
	rows, err := s.pool.Query(ctx, `SELECT item_id, job_id, attempt_no, stage, worker, started_at, finished_at, outcome,
			error_class, error, duration_us, detail FROM item_attempts WHERE item_id = $1 ORDER BY id`, itemID)
	if err != nil {
		return nil, fmt.Errorf("list attempts of item %d: %w", itemID, err)
	}
	defer rows.Close()
	var out []*engine.Attempt
	for rows.Next() {
		var a engine.Attempt
		var worker, class, msg, detail *string
		var started, finished, us int64
		var outcome string
		if err := rows.Scan(&a.ItemID, &a.JobID, &a.AttemptNo, &a.Stage, &worker, &started, &finished, &outcome,
			&class, &msg, &us, &detail); err != nil {
			return nil, err
		}
		a.WorkerID, a.ErrorClass, a.Error = str(worker), engine.ErrorClass(str(class)), str(msg)
		a.StartedAt, a.FinishedAt = fromMS(started), fromMS(finished)
		a.Outcome = engine.ItemStatus(outcome)
		a.Duration = durationUS(us)
		if detail != nil {
			a.Detail = []byte(*detail)
		}
		out = append(out, &a)
	}
	return out, rows.Err()
}

func durationUS(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// jobExists is ErrNotFound for a missing job; as a transaction's first
// read, it fixes the snapshot of a repeatable-read transaction.
func jobExists(ctx context.Context, tx pgx.Tx, id int64) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM jobs WHERE id = $1`, id).Scan(&one)
	if noRows(err) {
		return notFound("job", id)
	}
	return err
}
