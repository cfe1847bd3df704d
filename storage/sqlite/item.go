package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/engine"
)

// itemColumns without the input columns; the listing and export hot paths
// never read input_json unless asked.
const itemColumns = `id, job_id, user_id, pipeline, seq, stage, result_json, status, attempts, run_at,
	last_error, last_error_code, locked_by, locked_at, lease_expires_at, strategy, updated_at`

func scanItem(sc scanner, withInput bool) (*engine.Item, error) {
	var it engine.Item
	var result, lastErr, lastCode, lockedBy, input, norm sql.NullString
	var lockedAt, lease sql.NullInt64
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
	if result.Valid {
		it.Result = []byte(result.String)
	}
	if input.Valid {
		it.Input = []byte(input.String)
	}
	if norm.Valid {
		it.Normalized = []byte(norm.String)
	}
	it.RunAt = fromMS(runAt)
	it.LastError, it.LastErrorCode, it.LockedBy = lastErr.String, lastCode.String, lockedBy.String
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
	it, err := scanItem(s.r.QueryRowContext(ctx, selectItems(true)+" WHERE id = ?", id), true)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("item", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get item %d: %w", id, err)
	}
	return it, nil
}

// ListItems returns one keyset page in (updated_at, id) order. Each status
// (and, across jobs, each owner) is read by its own index range in index
// order and the ranges are merged here, so no query ever sorts.
func (s *Store) ListItems(ctx context.Context, p *engine.ListItemsParams) (*engine.ItemPage, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	statuses := p.Statuses
	if len(statuses) == 0 {
		statuses = engine.ItemStatuses
	}
	var users []int64
	if p.JobID == 0 {
		if p.UserID != 0 {
			users = []int64{p.UserID}
		} else {
			rows, err := s.r.QueryContext(ctx, `SELECT id FROM users ORDER BY id`)
			if err != nil {
				return nil, fmt.Errorf("list items: %w", err)
			}
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return nil, err
				}
				users = append(users, id)
			}
			rows.Close()
		}
	}
	var afterT, afterID int64
	if p.After != nil {
		afterT, afterID = ms(p.After.UpdatedAt), p.After.ID
	}
	// One read transaction: every range sees the same snapshot.
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("list items: %w", err)
	}
	defer tx.Rollback()
	var ranges [][]*engine.Item
	query := func(list []*engine.Item, q string, args ...any) ([]*engine.Item, error) {
		st, err := s.reads.get(ctx, q)
		if err != nil {
			return nil, err
		}
		rows, err := tx.StmtContext(ctx, st).QueryContext(ctx, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			it, err := scanItem(rows, p.WithInput)
			if err != nil {
				return nil, err
			}
			list = append(list, it)
		}
		return list, rows.Err()
	}
	// keyRange reads one index range (base: the SELECT with its equality
	// constraints) after the cursor, in (updated_at, id) order. SQLite seeks
	// a row value (updated_at, id) > (?, ?) on updated_at alone and then
	// filters: with thousands of rows sharing one updated_at (an ingest
	// batch) a page in the middle of them scanned them all. Two seeks, the
	// rest of the cursor's updated_at by id, then the later ones, are exact.
	keyRange := func(base string, args ...any) error {
		var list []*engine.Item
		var err error
		if p.After == nil {
			list, err = query(nil, base+" ORDER BY updated_at, id LIMIT ?", append(args, limit+1)...)
		} else {
			list, err = query(nil, base+" AND updated_at = ? AND id > ? ORDER BY id LIMIT ?",
				append(slices.Clone(args), afterT, afterID, limit+1)...)
			if err == nil && len(list) < limit+1 {
				list, err = query(list, base+" AND updated_at > ? ORDER BY updated_at, id LIMIT ?",
					append(args, afterT, limit+1-len(list))...)
			}
		}
		ranges = append(ranges, list)
		return err
	}
	for _, st := range statuses {
		var err error
		if p.JobID != 0 {
			q := selectItems(p.WithInput) + ` INDEXED BY job_items_job_status_updated WHERE job_id = ? AND status = ?`
			args := []any{p.JobID, string(st)}
			if p.UserID != 0 {
				q += " AND user_id = ?"
				args = append(args, p.UserID)
			}
			err = keyRange(q, args...)
		} else {
			for _, u := range users {
				err = keyRange(selectItems(p.WithInput)+` INDEXED BY job_items_status_user_updated WHERE status = ? AND user_id = ?`,
					string(st), u)
				if err != nil {
					break
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("list items: %w", err)
		}
	}
	merged := mergeByKey(ranges, limit+1)
	page := &engine.ItemPage{Items: merged}
	if len(merged) > limit {
		page.Items = merged[:limit]
		last := page.Items[limit-1]
		page.Next = &engine.Cursor{UpdatedAt: last.UpdatedAt, ID: last.ID}
	}
	return page, nil
}

// mergeByKey merges lists sorted by (UpdatedAt, ID) and keeps the first n.
func mergeByKey(lists [][]*engine.Item, n int) []*engine.Item {
	out := make([]*engine.Item, 0, n)
	idx := make([]int, len(lists))
	for len(out) < n {
		best := -1
		for i, l := range lists {
			if idx[i] >= len(l) {
				continue
			}
			if best < 0 || less(l[idx[i]], lists[best][idx[best]]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		out = append(out, lists[best][idx[best]])
		idx[best]++
	}
	return out
}

func less(a, b *engine.Item) bool {
	if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
		return c < 0
	}
	return a.ID < b.ID
}

// scanChunk is how many rows one export query reads; short queries keep
// read snapshots short, so checkpoints are never held back for long.
const scanChunk = 2000

// ScanItems streams a job's items in seq order. Items are appended in seq
// order, so their ids rise with seq: the scan walks the job's rowid range
// (jobs.first_item_id..last_item_id), skipping rows of other jobs that were
// ingested at the same time, with no index of its own.
func (s *Store) ScanItems(ctx context.Context, p *engine.ScanItemsParams, fn func(*engine.Item) error) error {
	var first, last sql.NullInt64
	err := s.r.QueryRowContext(ctx, `SELECT first_item_id, last_item_id FROM jobs WHERE id = ?`, p.JobID).Scan(&first, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("job", p.JobID)
	}
	if err != nil {
		return fmt.Errorf("scan items of job %d: %w", p.JobID, err)
	}
	if !first.Valid {
		return nil
	}
	q := selectItems(p.WithInput) + ` NOT INDEXED WHERE id > ? AND id <= ? AND job_id = ?`
	var filter []any
	if len(p.Statuses) > 0 {
		q += " AND status IN (" + placeholders(len(p.Statuses)) + ")"
		for _, st := range p.Statuses {
			filter = append(filter, string(st))
		}
	}
	q += " ORDER BY id LIMIT ?"
	after := first.Int64 - 1
	for {
		args := append(append([]any{after, last.Int64, p.JobID}, filter...), scanChunk)
		rows, err := s.r.QueryContext(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("scan items of job %d: %w", p.JobID, err)
		}
		n := 0
		for rows.Next() {
			it, err := scanItem(rows, p.WithInput)
			if err != nil {
				rows.Close()
				return err
			}
			n++
			after = it.ID
			if err := fn(it); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("scan items of job %d: %w", p.JobID, err)
		}
		if n < scanChunk {
			return nil
		}
	}
}

// ReprocessItems puts terminal items back to PENDING.
func (s *Store) ReprocessItems(ctx context.Context, p *engine.ReprocessParams) (int64, error) {
	statuses := p.Statuses
	if len(statuses) == 0 {
		if len(p.ItemIDs) > 0 {
			statuses = []engine.ItemStatus{engine.ItemDone, engine.ItemError, engine.ItemNotFound, engine.ItemSkipped}
		} else {
			statuses = []engine.ItemStatus{engine.ItemError, engine.ItemNotFound}
		}
	}
	now := ms(p.Now)
	var total int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		total = 0
		var state string
		err := tx.QueryRowContext(ctx, `SELECT queue_state FROM jobs WHERE id = ?`, p.JobID).Scan(&state)
		if errors.Is(err, sql.ErrNoRows) {
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
		reset := 0
		if p.ResetAttempts {
			reset = 1
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
			args := []any{now, now, reset, p.JobID, string(st)}
			var n int64
			if len(p.ItemIDs) > 0 {
				for start := 0; start < len(p.ItemIDs); start += 500 {
					chunk := p.ItemIDs[start:min(start+500, len(p.ItemIDs))]
					a := append([]any{}, args...)
					for _, id := range chunk {
						a = append(a, id)
					}
					r, err := tx.ExecContext(ctx, q+" AND id IN ("+placeholders(len(chunk))+")", a...)
					if err != nil {
						return err
					}
					c, _ := r.RowsAffected()
					n += c
				}
			} else {
				r, err := tx.ExecContext(ctx, q, args...)
				if err != nil {
					return err
				}
				n, _ = r.RowsAffected()
			}
			d.counts.Add(st, -n)
			d.counts.Pending += n
			total += n
		}
		if total == 0 {
			return nil
		}
		if _, err := applyDeltas(ctx, tx, map[int64]*jobDelta{p.JobID: d}, now); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE jobs SET queue_state = CASE WHEN queue_state IN ('DONE', 'FAILED', 'CANCELED')
				THEN 'QUEUED' ELSE queue_state END, finished_at = NULL, last_error = NULL, updated_at = ? WHERE id = ?`, now, p.JobID)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reprocess job %d: %w", p.JobID, err)
	}
	return total, nil
}

// ListAttempts returns an item's attempts, oldest first.
func (s *Store) ListAttempts(ctx context.Context, itemID int64) ([]*engine.Attempt, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT item_id, job_id, attempt_no, stage, worker, started_at, finished_at, outcome,
			error_class, error, duration_us, detail FROM item_attempts WHERE item_id = ? ORDER BY id`, itemID)
	if err != nil {
		return nil, fmt.Errorf("list attempts of item %d: %w", itemID, err)
	}
	defer rows.Close()
	var out []*engine.Attempt
	for rows.Next() {
		var a engine.Attempt
		var worker, class, msg, detail sql.NullString
		var started, finished, us int64
		var outcome string
		if err := rows.Scan(&a.ItemID, &a.JobID, &a.AttemptNo, &a.Stage, &worker, &started, &finished, &outcome,
			&class, &msg, &us, &detail); err != nil {
			return nil, err
		}
		a.WorkerID, a.ErrorClass, a.Error = worker.String, engine.ErrorClass(class.String), msg.String
		a.StartedAt, a.FinishedAt = fromMS(started), fromMS(finished)
		a.Outcome = engine.ItemStatus(outcome)
		a.Duration = durationUS(us)
		if detail.Valid {
			a.Detail = []byte(detail.String)
		}
		out = append(out, &a)
	}
	return out, rows.Err()
}
