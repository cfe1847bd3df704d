package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

const jobColumns = `id, user_id, pipeline, name, source, source_ref, file_id, queue_state, priority,
	total_items, pending_items, processing_items, done_items, error_items, not_found_items, skipped_items,
	max_attempts, last_error, created_at, updated_at, started_at, finished_at, last_heartbeat,
	attempts, request_limit, request_cap`

type scanner interface{ Scan(dest ...any) error }

func scanJob(sc scanner) (*engine.Job, error) {
	var j engine.Job
	var srcRef, lastErr sql.NullString
	var fileID, started, finished, hb sql.NullInt64
	var created, updated int64
	var state string
	err := sc.Scan(&j.ID, &j.UserID, &j.Pipeline, &j.Name, &j.Source, &srcRef, &fileID, &state, &j.Priority,
		&j.TotalItems, &j.Counts.Pending, &j.Counts.Processing, &j.Counts.Done, &j.Counts.Error,
		&j.Counts.NotFound, &j.Counts.Skipped, &j.MaxAttempts, &lastErr, &created, &updated,
		&started, &finished, &hb, &j.Requests, &j.RequestLimit, &j.RequestCap)
	if err != nil {
		return nil, err
	}
	j.State = engine.JobState(state)
	j.SourceRef = srcRef.String
	j.FileID = fileID.Int64
	j.LastError = lastErr.String
	j.CreatedAt = fromMS(created)
	j.UpdatedAt = fromMS(updated)
	j.StartedAt = fromNullMS(started)
	j.FinishedAt = fromNullMS(finished)
	j.LastHeartbeat = fromNullMS(hb)
	return &j, nil
}

func getJob(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id int64) (*engine.Job, error) {
	j, err := scanJob(q.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("job", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return j, nil
}

// GetJob returns a job.
func (s *Store) GetJob(ctx context.Context, id int64) (*engine.Job, error) {
	return getJob(ctx, cachedReader{s}, id)
}

// CreateJob creates a job in state INGESTING.
func (s *Store) CreateJob(ctx context.Context, p *engine.CreateJobParams) (*engine.Job, error) {
	var id int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		id, err = s.insertJobRow(ctx, tx, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create job: %w", err)
	}
	return s.writerJob(ctx, id)
}

var jobByIDSQL = `SELECT ` + jobColumns + ` FROM jobs WHERE id = ?`

// writerJob reads a job through the write connection, so that it sees the
// transaction just committed even if a reader's snapshot is older.
func (s *Store) writerJob(ctx context.Context, id int64) (*engine.Job, error) {
	j, err := scanJob(s.jobByID.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("job", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return j, nil
}

// FinishIngest moves an INGESTING job to QUEUED (or DONE when nothing is
// left to process) with its final total.
func (s *Store) FinishIngest(ctx context.Context, p *engine.FinishIngestParams) (*engine.Job, error) {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET
				total_items = pending_items + processing_items + done_items + error_items + not_found_items + skipped_items,
				queue_state = CASE WHEN pending_items = 0 THEN 'DONE' ELSE 'QUEUED' END,
				finished_at = CASE WHEN pending_items = 0 THEN ? ELSE NULL END,
				updated_at = ?, last_heartbeat = ?
			WHERE id = ? AND queue_state = 'INGESTING'`, ms(p.Now), ms(p.Now), ms(p.Now), p.JobID)
		if err != nil {
			return err
		}
		return expectOne(ctx, tx, res, p.JobID, "finish ingest of")
	})
	if err != nil {
		return nil, err
	}
	return s.writerJob(ctx, p.JobID)
}

// expectOne turns "no row updated" into not-found or a conflict.
func expectOne(ctx context.Context, tx *sql.Tx, res sql.Result, jobID int64, what string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 1 {
		return nil
	}
	var state string
	err = tx.QueryRowContext(ctx, `SELECT queue_state FROM jobs WHERE id = ?`, jobID).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("job", jobID)
	}
	if err != nil {
		return err
	}
	return engine.Errorf(engine.ECONFLICT, "cannot %s job %d: it is %s", what, jobID, state)
}

// FailJob moves a job to FAILED with a reason and removes its rows.
func (s *Store) FailJob(ctx context.Context, p *engine.FailJobParams) (*engine.Job, error) {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET queue_state = 'FAILED', last_error = ?, finished_at = ?, updated_at = ?
			WHERE id = ? AND queue_state NOT IN ('DONE', 'CANCELED', 'FAILED')`, p.Reason, ms(p.Now), ms(p.Now), p.JobID)
		if err != nil {
			return err
		}
		if err := expectOne(ctx, tx, res, p.JobID, "fail"); err != nil {
			return err
		}
		return dropRows(ctx, tx, p.JobID)
	})
	if err != nil {
		return nil, err
	}
	return s.writerJob(ctx, p.JobID)
}

// dropRows removes a failed job's items, attempts and blobs and zeroes its
// counters, in the caller's transaction.
func dropRows(ctx context.Context, tx *sql.Tx, jobID int64) error {
	if err := deleteBlobRows(ctx, tx, `job_id = ?`, jobID); err != nil {
		return err
	}
	var first, last sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT first_item_id, last_item_id FROM jobs WHERE id = ?`, jobID).Scan(&first, &last); err != nil {
		return err
	}
	if first.Valid {
		if _, err := tx.ExecContext(ctx, `DELETE FROM item_attempts WHERE item_id BETWEEN ? AND ? AND job_id = ?`,
			first.Int64, last.Int64, jobID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM job_items WHERE id BETWEEN ? AND ? AND job_id = ?`,
			first.Int64, last.Int64, jobID); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, `UPDATE jobs SET pending_items = 0, processing_items = 0, done_items = 0, error_items = 0,
			not_found_items = 0, skipped_items = 0, total_items = 0, first_item_id = NULL, last_item_id = NULL
		WHERE id = ?`, jobID)
	return err
}

// FailStaleIngests fails INGESTING jobs whose ingest stopped sending
// heartbeats, removing their partial rows.
func (s *Store) FailStaleIngests(ctx context.Context, p *engine.FailStaleIngestsParams) ([]*engine.Job, error) {
	var ids []int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		ids = ids[:0]
		rows, err := tx.QueryContext(ctx, `UPDATE jobs SET queue_state = 'FAILED', last_error = ?, finished_at = ?, updated_at = ?
			WHERE queue_state = 'INGESTING' AND COALESCE(last_heartbeat, created_at) < ? RETURNING id`,
			p.Reason, ms(p.Now), ms(p.Now), ms(p.Before))
		if err != nil {
			return err
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range ids {
			if err := dropRows(ctx, tx, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fail stale ingests: %w", err)
	}
	out := make([]*engine.Job, 0, len(ids))
	for _, id := range ids {
		j, err := s.writerJob(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// ListJobs lists jobs newest first.
func (s *Store) ListJobs(ctx context.Context, p *engine.ListJobsParams) ([]*engine.Job, error) {
	var where []string
	var args []any
	if p.UserID != 0 {
		where = append(where, "user_id = ?")
		args = append(args, p.UserID)
	}
	if len(p.States) > 0 {
		where = append(where, "queue_state IN ("+placeholders(len(p.States))+")")
		for _, st := range p.States {
			args = append(args, string(st))
		}
	}
	if p.BeforeID > 0 {
		where = append(where, "id < ?")
		args = append(args, p.BeforeID)
	}
	q := `SELECT ` + jobColumns + ` FROM jobs`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, limit)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var out []*engine.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// SetJobState performs a guarded state change.
func (s *Store) SetJobState(ctx context.Context, p *engine.SetJobStateParams) (*engine.Job, error) {
	state := "?"
	args := []any{string(p.To), ms(p.Now)}
	finished := "finished_at"
	switch {
	case p.To.Terminal():
		finished = "?"
		args = append(args, ms(p.Now))
	case p.To == engine.JobQueued:
		// Resuming a job whose last items finished while it was paused:
		// nothing would ever finish it, so it is DONE now. A job paused at
		// its spending cap gets another cap's worth of requests.
		state = `CASE WHEN pending_items = 0 AND processing_items = 0 THEN 'DONE' ELSE ? END,
			request_limit = CASE WHEN request_limit > 0 AND attempts >= request_limit THEN attempts + request_cap ELSE request_limit END,
			last_error = NULL`
		finished = "CASE WHEN pending_items = 0 AND processing_items = 0 THEN ? ELSE finished_at END"
		args = append(args, ms(p.Now))
	}
	args = append(args, p.JobID)
	for _, st := range p.From {
		args = append(args, string(st))
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET queue_state = `+state+`, updated_at = ?, finished_at = `+finished+`
			WHERE id = ? AND queue_state IN (`+placeholders(len(p.From))+`)`, args...)
		if err != nil {
			return err
		}
		if err := expectOne(ctx, tx, res, p.JobID, strings.ToLower("set "+string(p.To)+" on")); err != nil {
			return err
		}
		if p.To == engine.JobCanceled {
			return skipPending(ctx, tx, p.JobID, "canceled", ms(p.Now))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.writerJob(ctx, p.JobID)
}

// DeleteJob removes a job, its items, attempts and blobs, and its file record.
func (s *Store) DeleteJob(ctx context.Context, id int64) (*engine.File, error) {
	var file *engine.File
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var fileID, first, last sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT file_id, first_item_id, last_item_id FROM jobs WHERE id = ?`, id).
			Scan(&fileID, &first, &last)
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("job", id)
		}
		if err != nil {
			return err
		}
		if first.Valid {
			// The job's items occupy the id range first..last (items are
			// appended in seq order, and other jobs' rows interleaved by
			// concurrent ingests are filtered out by job_id); both deletes
			// walk that range of an index instead of the whole attempts
			// table.
			if _, err := tx.ExecContext(ctx, `DELETE FROM item_attempts WHERE item_id BETWEEN ? AND ? AND job_id = ?`,
				first.Int64, last.Int64, id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM job_items WHERE id BETWEEN ? AND ? AND job_id = ?`,
				first.Int64, last.Int64, id); err != nil {
				return err
			}
		}
		if err := deleteBlobRows(ctx, tx, `job_id = ?`, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM jobs WHERE id = ?`, id); err != nil {
			return err
		}
		if !fileID.Valid {
			return nil
		}
		var f engine.File
		var sha, mt, ref, stored sql.NullString
		var created int64
		err = tx.QueryRowContext(ctx, `SELECT id, user_id, name, size, sha256, media_type, source, source_ref, stored_path, created_at
			FROM files WHERE id = ?`, fileID.Int64).Scan(&f.ID, &f.UserID, &f.Name, &f.Size, &sha, &mt, &f.Source, &ref, &stored, &created)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		f.SHA256, f.MediaType, f.SourceRef, f.StoredPath, f.CreatedAt = sha.String, mt.String, ref.String, stored.String, fromMS(created)
		var others int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM jobs WHERE file_id = ?`, f.ID).Scan(&others); err != nil {
			return err
		}
		if others == 0 {
			if _, err := tx.ExecContext(ctx, `DELETE FROM files WHERE id = ?`, f.ID); err != nil {
				return err
			}
			file = &f
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delete job %d: %w", id, err)
	}
	return file, nil
}

func placeholders(n int) string {
	if n <= 0 {
		return "NULL"
	}
	return strings.Repeat("?,", n-1) + "?"
}

const insertJobSQL = `INSERT INTO jobs (user_id, pipeline, name, source, source_ref, file_id, queue_state,
		priority, max_attempts, request_cap, request_limit, last_heartbeat, created_at, updated_at, dedupe_key)
	VALUES (?, ?, ?, ?, ?, ?, 'INGESTING', ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`

// insertJobRow inserts a job row in state INGESTING and returns its id.
func (s *Store) insertJobRow(ctx context.Context, tx *sql.Tx, p *engine.CreateJobParams) (int64, error) {
	if err := checkDedupe(p, s.txProbe(ctx, tx)); err != nil {
		return 0, err
	}
	var id int64
	err := tx.StmtContext(ctx, s.insertJob).QueryRowContext(ctx, jobRow(p)...).Scan(&id)
	return id, insertJobErr(p, err)
}

// jobRow is the values of insertJobSQL's fourteen parameters for p, as
// database/sql and the driver both take them.
func jobRow(p *engine.CreateJobParams) []any {
	source, maxAttempts := jobDefaults(p)
	var fileID any
	if p.FileID != 0 {
		fileID = p.FileID
	}
	return []any{p.UserID, p.Pipeline, p.Name, source, strOrNil(p.SourceRef), fileID, int64(p.Priority), int64(maxAttempts),
		max(p.RequestCap, 0), max(p.RequestCap, 0), ms(p.Now), ms(p.Now), ms(p.Now), strOrNil(p.DedupeKey)}
}

// jobDefaults are the source and max attempts a job of p is stored with.
func jobDefaults(p *engine.CreateJobParams) (source string, maxAttempts int) {
	source, maxAttempts = p.Source, p.MaxAttempts
	if source == "" {
		source = "manual"
	}
	if maxAttempts <= 0 {
		maxAttempts = 5
	}
	return source, maxAttempts
}

// insertJobErr is the error of a job's insert: ErrDuplicate when the
// unique index of unfinished jobs' dedupe keys refused it.
func insertJobErr(p *engine.CreateJobParams, err error) error {
	if err != nil && p.DedupeKey != "" && strings.Contains(err.Error(), "UNIQUE constraint failed") {
		return engine.ErrDuplicate
	}
	return err
}

// The dedupe probes: an unfinished job with the key (the partial unique
// index), a job with the key created after a time (jobs_dedupe_created).
const (
	dedupeActiveSQL = `SELECT 1 FROM jobs WHERE dedupe_key = ?
		AND queue_state IN ('INGESTING', 'QUEUED', 'RUNNING', 'PAUSED') LIMIT 1`
	dedupeWindowSQL = `SELECT 1 FROM jobs WHERE dedupe_key = ? AND created_at > ? LIMIT 1`
)

// txProbe runs one-row queries in tx for checkDedupe.
func (s *Store) txProbe(ctx context.Context, tx *sql.Tx) func(query string, args ...any) error {
	return func(query string, args ...any) error {
		var one int
		return s.txQueryRow(ctx, tx, query, args...).Scan(&one)
	}
}

// checkDedupe returns ErrDuplicate when another job holds p.DedupeKey: it is
// unfinished, or was created within p.DedupeWindow before p.Now. probe runs
// a one-row query in the caller's transaction: nil when it found a row,
// sql.ErrNoRows when not.
func checkDedupe(p *engine.CreateJobParams, probe func(query string, args ...any) error) error {
	if p.DedupeKey == "" {
		return nil
	}
	err := probe(dedupeActiveSQL, p.DedupeKey)
	if err == nil {
		return engine.ErrDuplicate
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if p.DedupeWindow <= 0 {
		return nil
	}
	err = probe(dedupeWindowSQL, p.DedupeKey, ms(p.Now.Add(-p.DedupeWindow)))
	if err == nil {
		return engine.ErrDuplicate
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	return err
}

// skipPending turns a job's PENDING items into SKIPPED with a reason, with
// the counters, in the caller's transaction (a canceled job's items that
// never ran). Items running now finish and keep their outcome.
func skipPending(ctx context.Context, tx *sql.Tx, jobID int64, reason string, now int64) error {
	r, err := tx.ExecContext(ctx, `UPDATE job_items SET status = 5 /* SKIPPED */, last_error = ?, last_error_code = NULL, updated_at = ?
		WHERE job_id = ? AND status = 0 /* PENDING */`, reason, now, jobID)
	if err != nil {
		return err
	}
	n, _ := r.RowsAffected()
	if n == 0 {
		return nil
	}
	_, err = tx.ExecContext(ctx, `UPDATE jobs SET pending_items = pending_items - ?, skipped_items = skipped_items + ? WHERE id = ?`,
		n, n, jobID)
	return err
}
