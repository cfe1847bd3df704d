package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// rowsPerInsert is how many items one INSERT statement carries: per-statement
// overhead dominates single-row inserts (FACTS: 149k vs 292k rows/s).
const rowsPerInsert = 100

// A batch's constants (job, owner, pipeline, time) are written into the
// statement as literals, prepared once per batch; each row binds only its
// own five values. Binding is a measurable share of a million-row ingest,
// and this driver binds numbered parameters more slowly than plain ones.
const itemInsertColumns = 5

// itemInsertSQL returns an INSERT of n rows for one batch's constants.
func itemInsertSQL(n int, jobID, userID int64, pipeline string, now int64) string {
	var b strings.Builder
	b.Grow(160 + n*60)
	b.WriteString(`INSERT INTO job_items (job_id, user_id, pipeline, run_at, updated_at, seq, input_json, normalized_json, status, last_error) VALUES `)
	row := fmt.Sprintf("(%d,%d,%s,%d,%d,?,?,?,?,?)", jobID, userID, quoteLiteral(pipeline), now, now)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	return b.String()
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// InsertItems appends a batch of items to an INGESTING job in one
// transaction, with the job's counters and heartbeat.
func (s *Store) InsertItems(ctx context.Context, p *engine.InsertItemsParams) error {
	if len(p.Items) == 0 {
		return nil
	}
	now := ms(p.Now)
	// The batch need not be durable on its own: its job stays INGESTING,
	// invisible to workers, until FinishIngest, whose FULL commit syncs the
	// WAL with every batch before it. A batch lost to power failure leaves
	// an INGESTING job that is failed as interrupted, as if killed.
	return s.lightTx(ctx, func(tx *sql.Tx) error {
		var userID, lastSeq int64
		var pipeline, state string
		err := tx.QueryRowContext(ctx, `SELECT user_id, pipeline, queue_state, last_seq FROM jobs WHERE id = ?`, p.JobID).
			Scan(&userID, &pipeline, &state, &lastSeq)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("job", p.JobID)
		}
		if err != nil {
			return fmt.Errorf("insert items: %w", err)
		}
		if state != string(engine.JobIngesting) {
			return engine.Errorf(engine.ECONFLICT, "cannot add items to job %d: it is %s", p.JobID, state)
		}
		r, err := s.insertItems(ctx, tx, p.JobID, userID, pipeline, lastSeq, p.Items, now)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE jobs SET pending_items = pending_items + ?, skipped_items = skipped_items + ?,
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

// insertItems writes items with multi-row INSERTs. Seqs must rise (items
// are appended in input order; export relies on ids rising with seq).
func (s *Store) insertItems(ctx context.Context, tx *sql.Tx, jobID, userID int64, pipeline string, lastSeq int64, items []engine.NewItem, now int64) (inserted, error) {
	res := inserted{lastSeq: lastSeq}
	args := make([]any, 0, rowsPerInsert*itemInsertColumns)
	var many *sql.Stmt
	if len(items) >= rowsPerInsert {
		var err error
		many, err = tx.PrepareContext(ctx, itemInsertSQL(rowsPerInsert, jobID, userID, pipeline, now))
		if err != nil {
			return res, fmt.Errorf("insert items of job %d: %w", jobID, err)
		}
		defer many.Close()
	}
	flush := func(rows int) error {
		var r sql.Result
		var err error
		if rows == rowsPerInsert {
			r, err = many.ExecContext(ctx, args...)
		} else {
			r, err = tx.ExecContext(ctx, itemInsertSQL(rows, jobID, userID, pipeline, now), args...)
		}
		if err != nil {
			return fmt.Errorf("insert items of job %d: %w", jobID, err)
		}
		// One writer: a statement's rowids are consecutive.
		last, err := r.LastInsertId()
		if err != nil {
			return err
		}
		if res.firstID == 0 {
			res.firstID = last - int64(rows) + 1
		}
		res.lastID = last
		args = args[:0]
		return nil
	}
	for i := range items {
		var err error
		if args, err = itemRow(args, &items[i], &res); err != nil {
			return res, err
		}
		if len(args) == rowsPerInsert*itemInsertColumns {
			if err := flush(rowsPerInsert); err != nil {
				return res, err
			}
		}
	}
	if len(args) > 0 {
		// The tail of the batch: one statement of its own size.
		if err := flush(len(args) / itemInsertColumns); err != nil {
			return res, err
		}
	}
	return res, nil
}

// itemRow checks a new item against what res has seen (seqs rise; status
// PENDING or SKIPPED), counts it in res and appends its own five values.
func itemRow(args []any, it *engine.NewItem, res *inserted) ([]any, error) {
	st := it.Status
	if st == "" {
		st = engine.ItemPending
	}
	if it.Seq <= res.lastSeq {
		return args, engine.Errorf(engine.EINVALID, "new item seq %d: seqs must rise (last was %d)", it.Seq, res.lastSeq)
	}
	res.lastSeq = it.Seq
	switch st {
	case engine.ItemPending:
		res.pending++
	case engine.ItemSkipped:
		res.skipped++
	default:
		return args, engine.Errorf(engine.EINVALID, "new item %d: status %s (want PENDING or SKIPPED)", it.Seq, st)
	}
	// A normalised row equal to its input (the headers were already
	// canonical) is stored once: readers take COALESCE(normalized, input).
	norm := nullJSON(it.Normalized)
	if it.Input != nil && bytes.Equal(it.Input, it.Normalized) {
		norm = nil
	}
	return append(args, it.Seq, nullJSON(it.Input), norm, string(st), nullStr(it.LastError)), nil
}

// insertOneItemSQL inserts the item of a one-item job (API calls, triggers,
// the latency benchmark) with a statement prepared at open: the multi-row
// form, with its constants as literals, would be parsed for each job.
const insertOneItemSQL = `INSERT INTO job_items (job_id, user_id, pipeline, run_at, updated_at, seq, input_json, normalized_json, status, last_error)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// insertOneItem is insertItems for a single item.
func (s *Store) insertOneItem(ctx context.Context, tx *sql.Tx, jobID int64, job *engine.CreateJobParams, it *engine.NewItem, now int64) (inserted, error) {
	var res inserted
	args, err := itemRow([]any{jobID, job.UserID, job.Pipeline, now, now}, it, &res)
	if err != nil {
		return res, err
	}
	r, err := tx.StmtContext(ctx, s.insertItem).ExecContext(ctx, args...)
	if err != nil {
		return res, fmt.Errorf("insert item of job %d: %w", jobID, err)
	}
	if res.firstID, err = r.LastInsertId(); err != nil {
		return res, err
	}
	res.lastID = res.firstID
	return res, nil
}

// EnqueueJob creates a QUEUED job with its items in one transaction. The
// job is read back by the transaction's last statement, so that nothing is
// left to do on the write connection once the commit is durable: an idle
// worker's claim can take it at once.
func (s *Store) EnqueueJob(ctx context.Context, p *engine.EnqueueJobParams) (*engine.Job, error) {
	var job *engine.Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		job, err = s.enqueueJob(ctx, tx, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("enqueue job: %w", err)
	}
	return job, nil
}

// enqueueJob is EnqueueJob in the caller's transaction.
func (s *Store) enqueueJob(ctx context.Context, tx *sql.Tx, p *engine.EnqueueJobParams) (*engine.Job, error) {
	id, err := s.insertJobRow(ctx, tx, &p.Job)
	if err != nil {
		return nil, err
	}
	now := ms(p.Job.Now)
	var r inserted
	if len(p.Items) == 1 {
		r, err = s.insertOneItem(ctx, tx, id, &p.Job, &p.Items[0], now)
	} else {
		r, err = s.insertItems(ctx, tx, id, p.Job.UserID, p.Job.Pipeline, 0, p.Items, now)
	}
	if err != nil {
		return nil, err
	}
	first := sql.NullInt64{Int64: r.firstID, Valid: r.firstID != 0}
	return scanJob(tx.StmtContext(ctx, s.enqueueDone).QueryRowContext(ctx,
		r.pending, r.skipped, r.pending+r.skipped, first, r.lastID, r.lastSeq, r.pending, r.pending, now, id))
}

const enqueueDoneSQL = `UPDATE jobs SET pending_items = ?, skipped_items = ?, total_items = ?,
		first_item_id = ?, last_item_id = ?, last_seq = ?,
		queue_state = CASE WHEN ? = 0 THEN 'DONE' ELSE 'QUEUED' END,
		finished_at = CASE WHEN ? = 0 THEN ? ELSE NULL END
	WHERE id = ? RETURNING ` + jobColumns
