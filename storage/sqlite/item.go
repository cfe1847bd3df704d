package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	dest := []any{&it.ID, &it.JobID, &it.UserID, &it.Pipeline, &it.Seq, &it.Stage, &result, statusCol{&it.Status}, &it.Attempts,
		&runAt, &lastErr, &lastCode, &lockedBy, &lockedAt, &lease, &it.Strategy, &updated}
	if withInput {
		dest = append(dest, &input, &norm)
	}
	if err := sc.Scan(dest...); err != nil {
		return nil, err
	}
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
	statuses := engine.DistinctStatuses(p.Statuses)
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
			args := []any{p.JobID, statusCode(st)}
			if p.UserID != 0 {
				q += " AND user_id = ?"
				args = append(args, p.UserID)
			}
			if p.Pipeline != "" {
				q += " AND pipeline = ?"
				args = append(args, p.Pipeline)
			}
			err = keyRange(q, args...)
		} else if st == engine.ItemProcessing {
			// Items in flight are not in the global index (migration
			// 00011): read them per job, from the few jobs that have any.
			var jobs []int64
			if jobs, err = inFlightJobs(ctx, tx, users); err == nil {
				for _, j := range jobs {
					q := selectItems(p.WithInput) + ` INDEXED BY job_items_job_status_updated WHERE job_id = ? AND status = 1 /* PROCESSING */`
					args := []any{j}
					if p.Pipeline != "" {
						q += " AND pipeline = ?"
						args = append(args, p.Pipeline)
					}
					if err = keyRange(q, args...); err != nil {
						break
					}
				}
			}
		} else {
			for _, u := range users {
				// The literal term lets SQLite use the partial index.
				q := selectItems(p.WithInput) + ` INDEXED BY job_items_status_user_updated WHERE status = ? AND status <> 1 /* PROCESSING */ AND user_id = ?`
				args := []any{statusCode(st), u}
				if p.Pipeline != "" {
					q += " AND pipeline = ?"
					args = append(args, p.Pipeline)
				}
				err = keyRange(q, args...)
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

// inFlightJobs lists the jobs of the users that have items in flight.
func inFlightJobs(ctx context.Context, tx *sql.Tx, users []int64) ([]int64, error) {
	owners, err := json.Marshal(users)
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, inFlightJobsSQL, string(owners))
	if err != nil {
		return nil, fmt.Errorf("jobs with items in flight: %w", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
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

// ScanItems streams a job's items in ListItems' order, (updated_at, id),
// from one read transaction: every status is its own range of the index
// job_items(job_id, status, updated_at, id), read in index order by its own
// statement, and the ranges are merged here as rows arrive, so nothing is
// sorted or buffered beyond one row per status.
//
// The snapshot is held until the scan ends: while it lasts, checkpoints can
// copy WAL frames only up to it and the WAL cannot start over, so a long
// export during heavy writing lets the WAL grow until it ends (it is then
// truncated as usual).
func (s *Store) ScanItems(ctx context.Context, p *engine.ScanItemsParams, fn func(*engine.Item) error) error {
	if p.GridOnly && p.WithInput {
		return engine.Errorf(engine.EINVALID, "scan items: GridOnly and WithInput exclude each other")
	}
	var err error
	if p.GridOnly {
		err = s.scanGrid(ctx, p, fn)
	} else {
		err = s.scanFull(ctx, p, fn)
	}
	var fnErr *callbackError
	if errors.As(err, &fnErr) {
		return fnErr.err
	}
	if err != nil && !engine.IsNotFound(err) {
		return fmt.Errorf("scan items of job %d: %w", p.JobID, err)
	}
	return err
}

// callbackError carries fn's error out of a scan unchanged.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// itemRange is the rows of one status of a scan, in (updated_at, id) order.
type itemRange interface {
	// next reads the range's next item: head, or nil at the end.
	next() error
	head() *engine.Item
	// updated is the stored updated_at of head.
	updated() int64
}

// merge calls fn for the heads of ranges in (updated_at, id) order until
// every range is exhausted. Each range has read its first row.
func merge(ranges []itemRange, fn func(*engine.Item) error) error {
	for {
		// At most six ranges: a linear search for the first head is
		// cheaper than a heap.
		var first itemRange
		for _, r := range ranges {
			if h := r.head(); h != nil && (first == nil || r.updated() < first.updated() ||
				r.updated() == first.updated() && h.ID < first.head().ID) {
				first = r
			}
		}
		if first == nil {
			return nil
		}
		if err := fn(first.head()); err != nil {
			return &callbackError{err}
		}
		if err := first.next(); err != nil {
			return err
		}
	}
}

// scanQuery reads one status's range of a job in (updated_at, id) order.
const scanQuery = ` INDEXED BY job_items_job_status_updated WHERE job_id = ? AND status = ? ORDER BY updated_at, id`

// scanFull is ScanItems for whole items, through database/sql.
func (s *Store) scanFull(ctx context.Context, p *engine.ScanItemsParams, fn func(*engine.Item) error) error {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// The first read fixes the snapshot every range below reads.
	var one int
	err = tx.QueryRowContext(ctx, `SELECT 1 FROM jobs WHERE id = ?`, p.JobID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("job", p.JobID)
	}
	if err != nil {
		return err
	}
	var ranges []itemRange
	for _, st := range engine.DistinctStatuses(p.Statuses) {
		rows, err := tx.QueryContext(ctx, selectItems(p.WithInput)+scanQuery, p.JobID, statusCode(st))
		if err != nil {
			return err
		}
		defer rows.Close()
		r := &sqlRange{rows: rows, withInput: p.WithInput}
		if err := r.next(); err != nil {
			return err
		}
		ranges = append(ranges, r)
	}
	return merge(ranges, fn)
}

// sqlRange is an itemRange of whole items.
type sqlRange struct {
	rows      *sql.Rows
	withInput bool
	it        *engine.Item
	at        int64
}

func (r *sqlRange) head() *engine.Item { return r.it }
func (r *sqlRange) updated() int64     { return r.at }

func (r *sqlRange) next() error {
	r.it = nil
	if !r.rows.Next() {
		return r.rows.Err()
	}
	it, err := scanItem(r.rows, r.withInput)
	if err != nil {
		return err
	}
	r.it, r.at = it, ms(it.UpdatedAt)
	return nil
}

// gridColumns are the grid's fields; the result comes as a BLOB, which the
// driver hands over as the []byte Item.Result keeps. A scan of several
// ranges also reads id and updated_at, to merge them (gridMergeColumns); a
// scan of one range reads neither: it is in the order of the index already,
// and each value a row hands over costs about 5% of the scan.
const (
	gridColumns      = `SELECT seq, attempts, last_error, CAST(result_json AS BLOB)`
	gridMergeColumns = gridColumns + `, id, updated_at`
)

// scanGrid is ScanItems for the grid's fields only: the export's path
// through a million rows. It talks to the driver's connection directly
// (database/sql's Conn.Raw), which saves database/sql's conversion of every
// value of every row, about a fifth of the scan's time.
func (s *Store) scanGrid(ctx context.Context, p *engine.ScanItemsParams, fn func(*engine.Item) error) error {
	return s.rawReadTx(ctx, func(q driver.QueryerContext) error { return scanGridTx(ctx, q, p, fn) })
}

// rawReadTx runs fn in a read transaction on a pooled connection's driver
// connection (database/sql's Conn.Raw), for scans of many rows.
func (s *Store) rawReadTx(ctx context.Context, fn func(q driver.QueryerContext) error) error {
	conn, err := s.r.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		begin, ok1 := dc.(driver.ConnBeginTx)
		query, ok2 := dc.(driver.QueryerContext)
		if !ok1 || !ok2 {
			return errors.New("the sqlite driver cannot begin transactions or run queries with a context")
		}
		tx, err := begin.BeginTx(ctx, driver.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		err = fn(query)
		if rerr := tx.Rollback(); rerr != nil {
			// A connection left inside a transaction must not go back to
			// the pool.
			return errors.Join(err, rerr, driver.ErrBadConn)
		}
		return err
	})
}

// rawJobExists is ErrNotFound for a missing job; as a transaction's first
// read, it fixes the snapshot every later read of it sees.
func rawJobExists(ctx context.Context, q driver.QueryerContext, id int64) error {
	rows, err := q.QueryContext(ctx, `SELECT 1 FROM jobs WHERE id = ?`, []driver.NamedValue{{Ordinal: 1, Value: id}})
	if err != nil {
		return err
	}
	err = rows.Next(make([]driver.Value, 1))
	rows.Close()
	if err == io.EOF {
		return notFound("job", id)
	}
	return err
}

// scanGridTx runs scanGrid's queries inside its read transaction.
func scanGridTx(ctx context.Context, q driver.QueryerContext, p *engine.ScanItemsParams, fn func(*engine.Item) error) error {
	if err := rawJobExists(ctx, q, p.JobID); err != nil {
		return err
	}
	// Which statuses have items (one index probe each)?
	var statuses []engine.ItemStatus
	for _, st := range engine.DistinctStatuses(p.Statuses) {
		args := []driver.NamedValue{{Ordinal: 1, Value: p.JobID}, {Ordinal: 2, Value: statusCode(st)}}
		rows, err := q.QueryContext(ctx, `SELECT 1 FROM job_items INDEXED BY job_items_job_status_updated
			WHERE job_id = ? AND status = ? LIMIT 1`, args)
		if err != nil {
			return err
		}
		err = rows.Next(make([]driver.Value, 1))
		rows.Close()
		if err == nil {
			statuses = append(statuses, st)
		} else if err != io.EOF {
			return err
		}
	}
	merging := len(statuses) > 1
	query := gridColumns + " FROM job_items" + scanQuery
	if merging {
		query = gridMergeColumns + " FROM job_items" + scanQuery
	}
	var ranges []itemRange
	for _, st := range statuses {
		rows, err := q.QueryContext(ctx, query, []driver.NamedValue{
			{Ordinal: 1, Value: p.JobID}, {Ordinal: 2, Value: statusCode(st)}})
		if err != nil {
			return err
		}
		defer rows.Close()
		r := &gridRange{rows: rows, jobID: p.JobID, status: st, vals: make([]driver.Value, len(rows.Columns()))}
		if err := r.next(); err != nil {
			return err
		}
		ranges = append(ranges, r)
	}
	return merge(ranges, fn)
}

// gridRange is an itemRange of the grid's fields, read from driver rows.
type gridRange struct {
	rows   driver.Rows
	jobID  int64
	status engine.ItemStatus
	vals   []driver.Value
	it     *engine.Item
	at     int64
	// slab holds items not yet handed out, allocated a batch at a time.
	slab []engine.Item
}

func (r *gridRange) head() *engine.Item { return r.it }
func (r *gridRange) updated() int64     { return r.at }

func (r *gridRange) next() error {
	r.it = nil
	if err := r.rows.Next(r.vals); err != nil {
		if err == io.EOF {
			return nil
		}
		return err
	}
	if len(r.slab) == 0 {
		r.slab = make([]engine.Item, 128)
	}
	it := &r.slab[0]
	r.slab = r.slab[1:]
	it.JobID, it.Status = r.jobID, r.status
	var ok [6]bool
	it.Seq, ok[0] = r.vals[0].(int64)
	attempts, ok1 := r.vals[1].(int64)
	it.Attempts, ok[1] = int(attempts), ok1
	switch v := r.vals[2].(type) {
	case nil:
		ok[2] = true
	case string:
		it.LastError, ok[2] = v, true
	}
	switch v := r.vals[3].(type) {
	case nil:
		ok[3] = true
	case []byte:
		it.Result, ok[3] = v, true
	}
	ok[4], ok[5] = true, true
	if len(r.vals) > 4 {
		// Only read when several ranges are merged.
		it.ID, ok[4] = r.vals[4].(int64)
		r.at, ok[5] = r.vals[5].(int64)
		it.UpdatedAt = fromMS(r.at)
	}
	for i, good := range ok {
		if !good {
			return fmt.Errorf("column %d of item seq %v: unexpected %T", i, r.vals[0], r.vals[i])
		}
	}
	r.it = it
	return nil
}

// ReprocessItems puts terminal items back to PENDING.
func (s *Store) ReprocessItems(ctx context.Context, p *engine.ReprocessParams) (int64, error) {
	statuses := p.TargetStatuses()
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
			q := `UPDATE job_items SET status = 0 /* PENDING */, run_at = ?, updated_at = ?, stage = 0, strategy = 0,
					result_json = NULL, locked_by = NULL, locked_at = NULL, lease_expires_at = NULL,
					attempts = CASE WHEN ? THEN 0 ELSE attempts END
				WHERE job_id = ? AND status = ?`
			args := []any{now, now, reset, p.JobID, statusCode(st)}
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
		if _, err := s.applyDeltas(ctx, tx, map[int64]*jobDelta{p.JobID: d}, now); err != nil {
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
