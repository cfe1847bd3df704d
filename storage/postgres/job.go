package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/engine"
)

const jobColumns = `id, user_id, pipeline, name, source, source_ref, file_id, queue_state, priority,
	total_items, pending_items, processing_items, done_items, error_items, not_found_items, skipped_items,
	max_attempts, last_error, created_at, updated_at, started_at, finished_at, last_heartbeat,
	attempts, request_limit, request_cap`

func scanJob(sc scanner) (*engine.Job, error) {
	var j engine.Job
	var srcRef, lastErr *string
	var fileID, started, finished, hb *int64
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
	j.SourceRef = str(srcRef)
	if fileID != nil {
		j.FileID = *fileID
	}
	j.LastError = str(lastErr)
	j.CreatedAt = fromMS(created)
	j.UpdatedAt = fromMS(updated)
	j.StartedAt = fromNullMS(started)
	j.FinishedAt = fromNullMS(finished)
	j.LastHeartbeat = fromNullMS(hb)
	return &j, nil
}

// GetJob returns a job.
func (s *Store) GetJob(ctx context.Context, id int64) (*engine.Job, error) {
	j, err := scanJob(queryRow(ctx, s.pool, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
	if noRows(err) {
		return nil, notFound("job", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return j, nil
}

// CreateJob creates a job in state INGESTING.
func (s *Store) CreateJob(ctx context.Context, p *engine.CreateJobParams) (*engine.Job, error) {
	var id int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		id, err = insertJobRow(ctx, tx, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create job: %w", err)
	}
	return s.GetJob(ctx, id)
}

// FinishIngest moves an INGESTING job to QUEUED (or DONE when nothing is
// left to process) with its final total, and wakes the workers.
func (s *Store) FinishIngest(ctx context.Context, p *engine.FinishIngestParams) (*engine.Job, error) {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		n, err := exec(ctx, tx, `UPDATE jobs SET
				total_items = pending_items + processing_items + done_items + error_items + not_found_items + skipped_items,
				queue_state = CASE WHEN pending_items = 0 THEN 'DONE' ELSE 'QUEUED' END,
				finished_at = CASE WHEN pending_items = 0 THEN ?::bigint ELSE NULL END,
				updated_at = ?, last_heartbeat = ?
			WHERE id = ? AND queue_state = 'INGESTING'`, ms(p.Now), ms(p.Now), ms(p.Now), p.JobID)
		if err != nil {
			return err
		}
		if err := expectOne(ctx, tx, n, p.JobID, "finish ingest of"); err != nil {
			return err
		}
		return s.notify(ctx, tx, wakeWork)
	})
	if err != nil {
		return nil, err
	}
	return s.GetJob(ctx, p.JobID)
}

// expectOne turns "no row updated" into not-found or a conflict.
func expectOne(ctx context.Context, tx pgx.Tx, n int64, jobID int64, what string) error {
	if n == 1 {
		return nil
	}
	var state string
	err := queryRow(ctx, tx, `SELECT queue_state FROM jobs WHERE id = ?`, jobID).Scan(&state)
	if noRows(err) {
		return notFound("job", jobID)
	}
	if err != nil {
		return err
	}
	return engine.Errorf(engine.ECONFLICT, "cannot %s job %d: it is %s", what, jobID, state)
}

// FailJob moves a job to FAILED with a reason and removes its rows.
func (s *Store) FailJob(ctx context.Context, p *engine.FailJobParams) (*engine.Job, error) {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		n, err := exec(ctx, tx, `UPDATE jobs SET queue_state = 'FAILED', last_error = ?, finished_at = ?, updated_at = ?
			WHERE id = ? AND queue_state NOT IN ('DONE', 'CANCELED', 'FAILED')`, p.Reason, ms(p.Now), ms(p.Now), p.JobID)
		if err != nil {
			return err
		}
		if err := expectOne(ctx, tx, n, p.JobID, "fail"); err != nil {
			return err
		}
		if err := dropRows(ctx, tx, p.JobID); err != nil {
			return err
		}
		return s.notify(ctx, tx, wakeChange)
	})
	if err != nil {
		return nil, err
	}
	return s.GetJob(ctx, p.JobID)
}

// deleteAttemptsSQL removes a job's attempts through its items: attempts
// are keyed by item (migration 6), so that recording one touches a single
// index.
const deleteAttemptsSQL = `DELETE FROM item_attempts WHERE item_id IN (SELECT id FROM job_items WHERE job_id = ?)`

// dropRows removes a failed job's items, attempts and blobs and zeroes its
// counters, in the caller's transaction (which holds the job's row lock).
func dropRows(ctx context.Context, tx pgx.Tx, jobID int64) error {
	if err := deleteBlobRows(ctx, tx, `job_id = ?`, jobID); err != nil {
		return err
	}
	if _, err := exec(ctx, tx, deleteAttemptsSQL, jobID); err != nil {
		return err
	}
	if _, err := exec(ctx, tx, `DELETE FROM job_items WHERE job_id = ?`, jobID); err != nil {
		return err
	}
	_, err := exec(ctx, tx, `UPDATE jobs SET pending_items = 0, processing_items = 0, done_items = 0, error_items = 0,
			not_found_items = 0, skipped_items = 0, total_items = 0, first_item_id = NULL, last_item_id = NULL
		WHERE id = ?`, jobID)
	return err
}

// FailStaleIngests fails INGESTING jobs whose ingest stopped sending
// heartbeats, removing their partial rows.
func (s *Store) FailStaleIngests(ctx context.Context, p *engine.FailStaleIngestsParams) ([]*engine.Job, error) {
	var ids []int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		ids = ids[:0]
		rows, err := query(ctx, tx, `UPDATE jobs SET queue_state = 'FAILED', last_error = ?, finished_at = ?, updated_at = ?
			WHERE queue_state = 'INGESTING' AND COALESCE(last_heartbeat, created_at) < ? RETURNING id`,
			p.Reason, ms(p.Now), ms(p.Now), ms(p.Before))
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		for _, id := range ids {
			if err := dropRows(ctx, tx, id); err != nil {
				return err
			}
		}
		if len(ids) > 0 {
			return s.notify(ctx, tx, wakeChange)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fail stale ingests: %w", err)
	}
	out := make([]*engine.Job, 0, len(ids))
	for _, id := range ids {
		j, err := s.GetJob(ctx, id)
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
		states := make([]string, len(p.States))
		for i, st := range p.States {
			states[i] = string(st)
		}
		where = append(where, "queue_state = ANY(?)")
		args = append(args, states)
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
	rows, err := query(ctx, s.pool, q, args...)
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
		finished = "?::bigint"
		args = append(args, ms(p.Now))
	case p.To == engine.JobQueued:
		// Resuming a job whose last items finished while it was paused:
		// nothing would ever finish it, so it is DONE now. A job paused at
		// its spending cap gets another cap's worth of requests.
		state = `CASE WHEN pending_items = 0 AND processing_items = 0 THEN 'DONE' ELSE ?::text END,
			request_limit = CASE WHEN request_limit > 0 AND attempts >= request_limit THEN attempts + request_cap ELSE request_limit END,
			last_error = NULL`
		finished = "CASE WHEN pending_items = 0 AND processing_items = 0 THEN ?::bigint ELSE finished_at END"
		args = append(args, ms(p.Now))
	}
	from := make([]string, len(p.From))
	for i, st := range p.From {
		from[i] = string(st)
	}
	args = append(args, p.JobID, from)
	err := s.tx(ctx, func(tx pgx.Tx) error {
		n, err := exec(ctx, tx, `UPDATE jobs SET queue_state = `+state+`, updated_at = ?, finished_at = `+finished+`
			WHERE id = ? AND queue_state = ANY(?)`, args...)
		if err != nil {
			return err
		}
		if err := expectOne(ctx, tx, n, p.JobID, strings.ToLower("set "+string(p.To)+" on")); err != nil {
			return err
		}
		if p.To == engine.JobCanceled {
			if err := skipPending(ctx, tx, p.JobID, "canceled", ms(p.Now)); err != nil {
				return err
			}
		}
		if p.To == engine.JobQueued {
			return s.notify(ctx, tx, wakeWork)
		}
		return s.notify(ctx, tx, wakeChange)
	})
	if err != nil {
		return nil, err
	}
	return s.GetJob(ctx, p.JobID)
}

// DeleteJob removes a job, its items, attempts and blobs, and its file record.
func (s *Store) DeleteJob(ctx context.Context, id int64) (*engine.File, error) {
	var file *engine.File
	err := s.tx(ctx, func(tx pgx.Tx) error {
		file = nil
		var fileID *int64
		// The row lock makes completers and claims of this job wait, then
		// find nothing.
		err := queryRow(ctx, tx, `SELECT file_id FROM jobs WHERE id = ? FOR UPDATE`, id).Scan(&fileID)
		if noRows(err) {
			return notFound("job", id)
		}
		if err != nil {
			return err
		}
		if _, err := exec(ctx, tx, deleteAttemptsSQL, id); err != nil {
			return err
		}
		if _, err := exec(ctx, tx, `DELETE FROM job_items WHERE job_id = ?`, id); err != nil {
			return err
		}
		if err := deleteBlobRows(ctx, tx, `job_id = ?`, id); err != nil {
			return err
		}
		if _, err := exec(ctx, tx, `DELETE FROM jobs WHERE id = ?`, id); err != nil {
			return err
		}
		if err := s.notify(ctx, tx, wakeChange); err != nil {
			return err
		}
		if fileID == nil {
			return nil
		}
		var f engine.File
		var sha, mt, ref, stored *string
		var created int64
		err = queryRow(ctx, tx, `SELECT id, user_id, name, size, sha256, media_type, source, source_ref, stored_path, created_at
			FROM files WHERE id = ? FOR UPDATE`, *fileID).Scan(&f.ID, &f.UserID, &f.Name, &f.Size, &sha, &mt, &f.Source, &ref, &stored, &created)
		if noRows(err) {
			return nil
		}
		if err != nil {
			return err
		}
		f.SHA256, f.MediaType, f.SourceRef, f.StoredPath, f.CreatedAt = str(sha), str(mt), str(ref), str(stored), fromMS(created)
		var others int
		if err := queryRow(ctx, tx, `SELECT count(*) FROM jobs WHERE file_id = ?`, f.ID).Scan(&others); err != nil {
			return err
		}
		if others == 0 {
			if _, err := exec(ctx, tx, `DELETE FROM files WHERE id = ?`, f.ID); err != nil {
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

// insertJobRow inserts a job row in state INGESTING and returns its id.
func insertJobRow(ctx context.Context, tx pgx.Tx, p *engine.CreateJobParams) (int64, error) {
	maxAttempts := p.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = 5
	}
	source := p.Source
	if source == "" {
		source = "manual"
	}
	if err := checkDedupeWindow(ctx, tx, p); err != nil {
		return 0, err
	}
	var id int64
	err := queryRow(ctx, tx, `INSERT INTO jobs (user_id, pipeline, name, source, source_ref, file_id, queue_state,
			priority, max_attempts, request_cap, request_limit, last_heartbeat, created_at, updated_at, dedupe_key)
		VALUES (?, ?, ?, ?, ?, ?, 'INGESTING', ?, ?, ?, ?, ?, ?, ?, ?) `+onDedupeConflict+` RETURNING id`,
		p.UserID, p.Pipeline, p.Name, source, nullStr(p.SourceRef), nullID(p.FileID), p.Priority, maxAttempts,
		max(p.RequestCap, 0), max(p.RequestCap, 0), ms(p.Now), ms(p.Now), ms(p.Now), nullStr(p.DedupeKey)).Scan(&id)
	if noRows(err) {
		return 0, engine.ErrDuplicate
	}
	return id, err
}

// skipPending turns a job's PENDING items into SKIPPED with a reason, with
// the counters, in the caller's transaction (a canceled job's items that
// never ran). Items running now finish and keep their outcome.
func skipPending(ctx context.Context, tx pgx.Tx, jobID int64, reason string, now int64) error {
	n, err := exec(ctx, tx, `UPDATE job_items SET status = 'SKIPPED', last_error = ?, last_error_code = NULL, updated_at = ?
		WHERE job_id = ? AND status = 'PENDING'`, reason, now, jobID)
	if err != nil || n == 0 {
		return err
	}
	_, err = exec(ctx, tx, `UPDATE jobs SET pending_items = pending_items - ?, skipped_items = skipped_items + ? WHERE id = ?`,
		n, n, jobID)
	return err
}
