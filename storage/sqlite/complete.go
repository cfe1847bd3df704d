package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// completeItemSQL applies one outcome under the lease guard (still
// PROCESSING, same worker, same stage and attempt). Moving on to another
// stage starts the attempt count again: each stage has its own budget.
const completeItemSQL = `UPDATE job_items SET status = ?, stage = ?,
		attempts = CASE WHEN stage = ? THEN attempts ELSE 0 END,
		result_json = COALESCE(?, result_json), last_error = ?, last_error_code = ?, run_at = ?, strategy = ?,
		locked_by = NULL, locked_at = NULL, lease_expires_at = NULL, updated_at = ?
	WHERE id = ? AND status = 1 /* PROCESSING */ AND locked_by = ? AND attempts = ? AND stage = ?`

// doneItemSQL is completeItemSQL for the common outcome, an item DONE at
// its stage without an error: fewer values to bind, on the hot path.
const doneItemSQL = `UPDATE job_items SET status = 2 /* DONE */, result_json = COALESCE(?, result_json),
		last_error = NULL, last_error_code = NULL, run_at = ?, strategy = ?,
		locked_by = NULL, locked_at = NULL, lease_expires_at = NULL, updated_at = ?
	WHERE id = ? AND status = 1 /* PROCESSING */ AND locked_by = ? AND attempts = ? AND stage = ?`

// handOffItemSQL applies an advancing outcome whose worker keeps the item
// (engine.Outcome.HandOff): under the same guard, the item moves to its
// next stage with that stage's first attempt begun and a new lease.
const handOffItemSQL = `UPDATE job_items SET stage = ?, attempts = 1, result_json = COALESCE(?, result_json),
		last_error = NULL, last_error_code = NULL, run_at = ?, strategy = ?, locked_at = ?, lease_expires_at = ?, updated_at = ?
	WHERE id = ? AND status = 1 /* PROCESSING */ AND locked_by = ? AND attempts = ? AND stage = ?`

// jobRunnableSQL tells whether a job still takes new attempts.
const jobRunnableSQL = `SELECT queue_state IN ('QUEUED', 'RUNNING') FROM jobs WHERE id = ?`

const attemptColumns = 12

const attemptsPerInsert = 50

func attemptInsertSQL(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO item_attempts (item_id, job_id, attempt_no, stage, worker, started_at, finished_at,
		outcome, error_class, error, duration_us, detail) VALUES `)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?)")
	}
	return b.String()
}

// A batch's attempts go in statements of attemptsPerInsert rows, its tail
// in statements of ten and of one row (rawWrites prepares each on its first
// use in a transaction): a statement of the tail's own size would be a
// different statement for almost every commit.

// jobDelta accumulates counter changes of one job within a transaction.
type jobDelta struct {
	counts engine.ItemCounts
	// requests is how many attempts ran (the spending cap counts them).
	requests int64
}

// CompleteItems applies many outcomes in one transaction.
//
// The per-item statements run on the driver's connection directly
// (rawWrites), not through database/sql: at tens of thousands of outcomes
// a second on the one write connection, database/sql's per-call work
// (argument conversion, locking, result wrapping) was a measurable share
// of the queue's bottleneck (docs/BENCHMARKS.md). The job counters that
// close the transaction go through database/sql as before.
func (s *Store) CompleteItems(ctx context.Context, p *engine.CompleteItemsParams) (*engine.CompleteItemsResult, error) {
	res := &engine.CompleteItemsResult{}
	if len(p.Outcomes) == 0 {
		return res, nil
	}
	now := ms(p.Now)
	c, err := s.w.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("complete items: begin: %w", err)
	}
	defer c.Close()
	err = runTx(ctx, c, &s.fullBusy, func(tx *sql.Tx) error {
		*res = engine.CompleteItemsResult{}
		deltas := map[int64]*jobDelta{}
		// The transaction holds the connection; Raw borrows it between
		// two of the transaction's own calls.
		err := c.Raw(func(dc any) error {
			rw, err := newRawWrites(ctx, dc)
			if err != nil {
				return err
			}
			err = applyOutcomes(rw, p, now, res, deltas)
			return errors.Join(err, rw.close())
		})
		if err != nil {
			return err
		}
		finished, err := s.applyDeltas(ctx, tx, deltas, now)
		res.Finished = finished
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("complete items: %w", err)
	}
	return res, nil
}

// applyOutcomes writes each outcome under its lease guard and records its
// attempt, with the driver statements rw, and sums the counter changes in
// deltas.
func applyOutcomes(rw *rawWrites, p *engine.CompleteItemsParams, now int64,
	res *engine.CompleteItemsResult, deltas map[int64]*jobDelta) error {
	// runnable caches whether a job takes hand-offs (its state cannot
	// change under this write transaction).
	runnable := map[int64]bool{}
	worker := strOrNil(p.WorkerID)
	args := make([]driver.NamedValue, 13)
	attempts := make([]driver.NamedValue, 0, attemptsPerInsert*attemptColumns)
	for i := range p.Outcomes {
		o := &p.Outcomes[i]
		nextStage, at, err := o.Next(p.Now)
		if err != nil {
			return err
		}
		runAt := ms(at)
		handOff := o.WantsHandOff(p.Now)
		if handOff {
			ok, seen := runnable[o.JobID]
			if !seen {
				if ok, err = rw.jobRunnable(o.JobID); err != nil {
					return fmt.Errorf("complete item %d: %w", o.ItemID, err)
				}
				runnable[o.JobID] = ok
			}
			handOff = ok
		}
		var r driver.Result
		if handOff {
			r, err = rw.exec(rawHandOff, values(args[:11], int64(nextStage), jsonText(o.Result), now, int64(o.Strategy), now,
				ms(o.LeaseUntil), now, o.ItemID, p.WorkerID, int64(o.Attempt), int64(o.Stage)))
		} else if o.Status == engine.ItemDone && nextStage == o.Stage && o.Error == "" && o.ErrorClass == "" {
			r, err = rw.exec(rawDone, values(args[:8], jsonText(o.Result), runAt, int64(o.Strategy), runAt,
				o.ItemID, p.WorkerID, int64(o.Attempt), int64(o.Stage)))
		} else {
			// A PENDING item's updated_at is its due time (see the schema).
			r, err = rw.exec(rawComplete, values(args, statusCode(o.Status), int64(nextStage), int64(nextStage),
				jsonText(o.Result), strOrNil(o.Error), strOrNil(string(o.ErrorClass)), runAt, int64(o.Strategy), runAt,
				o.ItemID, p.WorkerID, int64(o.Attempt), int64(o.Stage)))
		}
		if err != nil {
			return fmt.Errorf("complete item %d: %w", o.ItemID, err)
		}
		if n, _ := r.RowsAffected(); n == 0 {
			res.Stale = append(res.Stale, o.ItemID)
			continue
		}
		res.Applied++
		d := deltas[o.JobID]
		if d == nil {
			d = &jobDelta{}
			deltas[o.JobID] = d
		}
		if handOff {
			// Still PROCESSING, one more attempt begun.
			res.HandedOff = append(res.HandedOff, o.ItemID)
		} else {
			d.counts.Processing--
			d.counts.Add(o.Status, 1)
		}
		d.requests++
		started := o.StartedAt
		if started.IsZero() {
			started = p.Now
		}
		attempts = appendValues(attempts, o.ItemID, o.JobID, int64(o.Attempt), int64(o.Stage), worker, ms(started), now,
			string(o.Status), strOrNil(string(o.ErrorClass)), strOrNil(o.Error), o.Duration.Microseconds(), jsonText(o.Detail))
		if len(attempts) == attemptsPerInsert*attemptColumns {
			if _, err := rw.exec(rawAttemptsMany, attempts); err != nil {
				return fmt.Errorf("record attempts: %w", err)
			}
			attempts = attempts[:0]
		}
	}
	for len(attempts) > 0 {
		n, which := 1, rawAttempts1
		if len(attempts) >= 10*attemptColumns {
			n, which = 10, rawAttempts10
		}
		chunk := attempts[:n*attemptColumns]
		for i := range chunk {
			chunk[i].Ordinal = i + 1
		}
		if _, err := rw.exec(which, chunk); err != nil {
			return fmt.Errorf("record attempts: %w", err)
		}
		attempts = attempts[n*attemptColumns:]
	}
	return nil
}

// values fills args (its length: the statement's parameter count) with
// vals as positional driver values.
func values(args []driver.NamedValue, vals ...driver.Value) []driver.NamedValue {
	for i, v := range vals {
		args[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return args
}

// appendValues appends vals to args as the next positional values.
func appendValues(args []driver.NamedValue, vals ...any) []driver.NamedValue {
	for _, v := range vals {
		args = append(args, driver.NamedValue{Ordinal: len(args) + 1, Value: v})
	}
	return args
}

// strOrNil is NULL for "" (nullStr for driver values).
func strOrNil(s string) driver.Value {
	if s == "" {
		return nil
	}
	return s
}

// jobCountersSQL bumps a job's counters and reads what decides whether it
// is finished; prepared at open (writeCachedSQL), as it runs in every commit.
const jobCountersSQL = `UPDATE jobs SET pending_items = pending_items + ?, processing_items = processing_items + ?,
		done_items = done_items + ?, error_items = error_items + ?, not_found_items = not_found_items + ?,
		skipped_items = skipped_items + ?, attempts = attempts + ?, updated_at = ?
	WHERE id = ? RETURNING pending_items, processing_items, queue_state, attempts, request_limit`

// applyDeltas bumps job counters and finishes jobs that have nothing left.
func (s *Store) applyDeltas(ctx context.Context, tx *sql.Tx, deltas map[int64]*jobDelta, now int64) ([]int64, error) {
	ids := make([]int64, 0, len(deltas))
	for id := range deltas {
		ids = append(ids, id)
	}
	slices.Sort(ids) // deterministic order
	var finished []int64
	for _, id := range ids {
		c := deltas[id].counts
		var pending, processing, requests, limit int64
		var state string
		err := s.txQueryRow(ctx, tx, jobCountersSQL,
			c.Pending, c.Processing, c.Done, c.Error, c.NotFound, c.Skipped, deltas[id].requests, now, id).
			Scan(&pending, &processing, &state, &requests, &limit)
		if errors.Is(err, sql.ErrNoRows) {
			continue // the job was deleted meanwhile; its rows went with it
		}
		if err != nil {
			return nil, fmt.Errorf("update counters of job %d: %w", id, err)
		}
		runnable := state == string(engine.JobQueued) || state == string(engine.JobRunning)
		switch {
		case runnable && pending == 0 && processing == 0:
			if _, err := tx.ExecContext(ctx, `UPDATE jobs SET queue_state = 'DONE', finished_at = ? WHERE id = ?`, now, id); err != nil {
				return nil, fmt.Errorf("finish job %d: %w", id, err)
			}
			finished = append(finished, id)
		case runnable && limit > 0 && requests >= limit && pending > 0:
			reason := fmt.Sprintf("spending cap reached: %d requests (the pipeline's maxRequestsPerJob); resume to allow more", requests)
			if _, err := tx.ExecContext(ctx, `UPDATE jobs SET queue_state = 'PAUSED', last_error = ? WHERE id = ?`, reason, id); err != nil {
				return nil, fmt.Errorf("pause job %d: %w", id, err)
			}
		}
	}
	return finished, nil
}
