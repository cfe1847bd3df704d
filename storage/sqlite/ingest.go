package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/sluicehq/sluice/engine"
)

// rowsPerInsert is how many items one INSERT statement carries: per-statement
// overhead dominates single-row inserts (FACTS: 149k vs 292k rows/s).
const rowsPerInsert = 100

// A batch's constants (job, owner, pipeline, time) are written into the
// statement as literals, prepared once per batch; each row binds only its
// own values. Binding is a measurable share of a million-row ingest, and
// this driver binds numbered parameters more slowly than plain ones.
//
// Two row shapes: the full one binds seq, input, normalised input, status
// and error; the lean one, for the common row (PENDING, no error, its
// normalised form equal to its input), binds seq and input alone and writes
// the rest as literals. A chunk of rowsPerInsert rows uses the lean shape
// when all its rows fit it.
const fullRowArgs = 5

// itemInsertSQL returns an INSERT of n rows of one shape (lean or full)
// for one batch's constants.
func itemInsertSQL(n int, lean bool, jobID, userID int64, pipeline string, now int64) string {
	var b strings.Builder
	b.Grow(160 + n*64)
	b.WriteString(`INSERT INTO job_items (job_id, user_id, pipeline, run_at, updated_at, seq, input_json, normalized_json, status, last_error) VALUES `)
	values := "?,?,?,?,?"
	if lean {
		values = "?,?,NULL,0,NULL"
	}
	row := fmt.Sprintf("(%d,%d,%s,%d,%d,%s)", jobID, userID, quoteLiteral(pipeline), now, now, values)
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

// itemInserter writes one batch's items with multi-row INSERTs, preparing
// each full-size statement shape once per batch.
type itemInserter struct {
	ctx      context.Context
	tx       *sql.Tx
	jobID    int64
	userID   int64
	pipeline string
	now      int64
	lean     *sql.Stmt
	full     *sql.Stmt
	args     []any
	res      inserted
}

func (w *itemInserter) close() {
	if w.lean != nil {
		w.lean.Close()
	}
	if w.full != nil {
		w.full.Close()
	}
}

// exec runs one INSERT of rows rows of the given shape with w.args.
func (w *itemInserter) exec(rows int, lean bool) error {
	var stmt *sql.Stmt
	if rows == rowsPerInsert {
		p := &w.full
		if lean {
			p = &w.lean
		}
		if *p == nil {
			var err error
			if *p, err = w.tx.PrepareContext(w.ctx, itemInsertSQL(rowsPerInsert, lean, w.jobID, w.userID, w.pipeline, w.now)); err != nil {
				return fmt.Errorf("insert items of job %d: %w", w.jobID, err)
			}
		}
		stmt = *p
	}
	var r sql.Result
	var err error
	if stmt != nil {
		r, err = stmt.ExecContext(w.ctx, w.args...)
	} else {
		// The tail of the batch: one statement of its own size.
		r, err = w.tx.ExecContext(w.ctx, itemInsertSQL(rows, lean, w.jobID, w.userID, w.pipeline, w.now), w.args...)
	}
	if err != nil {
		return fmt.Errorf("insert items of job %d: %w", w.jobID, err)
	}
	// One writer: a statement's rowids are consecutive.
	last, err := r.LastInsertId()
	if err != nil {
		return err
	}
	if w.res.firstID == 0 {
		w.res.firstID = last - int64(rows) + 1
	}
	w.res.lastID = last
	w.args = w.args[:0]
	return nil
}

// checkItem checks a new item against what res has seen (seqs rise; status
// PENDING or SKIPPED) and counts it in res; it reports whether the item fits
// the lean row shape (PENDING, no error, normalised form equal to input).
func checkItem(it *engine.NewItem, res *inserted) (lean bool, err error) {
	st := it.Status
	if st == "" {
		st = engine.ItemPending
	}
	if it.Seq <= res.lastSeq {
		return false, engine.Errorf(engine.EINVALID, "new item seq %d: seqs must rise (last was %d)", it.Seq, res.lastSeq)
	}
	res.lastSeq = it.Seq
	switch st {
	case engine.ItemPending:
		res.pending++
	case engine.ItemSkipped:
		res.skipped++
	default:
		return false, engine.Errorf(engine.EINVALID, "new item %d: status %s (want PENDING or SKIPPED)", it.Seq, st)
	}
	return st == engine.ItemPending && it.LastError == "" && it.Input != nil && sameJSON(it.Input, it.Normalized), nil
}

// sameJSON reports whether the normalised row equals the input, so that it
// is stored once: readers take COALESCE(normalized, input).
func sameJSON(input, norm []byte) bool { return bytes.Equal(input, norm) }

// insertItems writes items with multi-row INSERTs. Seqs must rise (items
// are appended in input order; export relies on ids rising with seq).
func (s *Store) insertItems(ctx context.Context, tx *sql.Tx, jobID, userID int64, pipeline string, lastSeq int64, items []engine.NewItem, now int64) (inserted, error) {
	w := &itemInserter{ctx: ctx, tx: tx, jobID: jobID, userID: userID, pipeline: pipeline, now: now,
		args: make([]any, 0, rowsPerInsert*fullRowArgs), res: inserted{lastSeq: lastSeq}}
	defer w.close()
	for len(items) > 0 {
		chunk := items[:min(len(items), rowsPerInsert)]
		items = items[len(chunk):]
		lean := true
		for i := range chunk {
			ok, err := checkItem(&chunk[i], &w.res)
			if err != nil {
				return w.res, err
			}
			lean = lean && ok
		}
		for i := range chunk {
			it := &chunk[i]
			if lean {
				w.args = append(w.args, it.Seq, jsonText(it.Input))
				continue
			}
			w.args = fullRow(w.args, it)
		}
		if err := w.exec(len(chunk), lean); err != nil {
			return w.res, err
		}
	}
	return w.res, nil
}

// jsonText binds b as TEXT (NULL when nil) without copying it: the driver
// copies the bytes into SQLite during the call, and the caller does not
// change them meanwhile. This saves a copy of every row on the writer.
func jsonText(b []byte) any {
	if b == nil {
		return nil
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// itemRow checks a new item and counts it in res (checkItem), then appends
// its five values (fullRow).
func itemRow(args []any, it *engine.NewItem, res *inserted) ([]any, error) {
	if _, err := checkItem(it, res); err != nil {
		return args, err
	}
	return fullRow(args, it), nil
}

// fullRow appends an item's five values of the full row shape.
func fullRow(args []any, it *engine.NewItem) []any {
	st := it.Status
	if st == "" {
		st = engine.ItemPending
	}
	// A normalised row equal to its input (the headers were already
	// canonical) is stored once: readers take COALESCE(normalized, input).
	var norm any
	if it.Input == nil || !sameJSON(it.Input, it.Normalized) {
		norm = jsonText(it.Normalized)
	}
	return append(args, it.Seq, jsonText(it.Input), norm, statusCode(st), nullStr(it.LastError))
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
