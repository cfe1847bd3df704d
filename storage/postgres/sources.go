package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/engine"
)

const sourceColumns = `name, kind, config_json, pipeline, after_action, poll_ms, enabled, last_poll_at,
	last_error, ingested, failed, created_at, updated_at`

func scanSource(sc scanner) (*engine.SourceRecord, error) {
	var src engine.SourceRecord
	var cfg string
	var pollMS, created, updated int64
	var enabled bool
	var lastPoll *int64
	var lastErr *string
	if err := sc.Scan(&src.Name, &src.Kind, &cfg, &src.Pipeline, &src.After, &pollMS, &enabled, &lastPoll,
		&lastErr, &src.Ingested, &src.Failed, &created, &updated); err != nil {
		return nil, err
	}
	src.Config = json.RawMessage(cfg)
	src.Poll = time.Duration(pollMS) * time.Millisecond
	src.Enabled = enabled
	src.LastPollAt = fromNullMS(lastPoll)
	src.LastError = str(lastErr)
	src.CreatedAt, src.UpdatedAt = fromMS(created), fromMS(updated)
	return &src, nil
}

// CreateSource stores a new source.
func (s *Store) CreateSource(ctx context.Context, src *engine.SourceRecord, now time.Time) (*engine.SourceRecord, error) {
	after, cfg, err := src.Prepare()
	if err != nil {
		return nil, err
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		var n int
		if err := queryRow(ctx, tx, `SELECT count(*) FROM sources WHERE name = ?`, src.Name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return engine.Errorf(engine.ECONFLICT, "source %q already exists", src.Name)
		}
		_, err := exec(ctx, tx, `INSERT INTO sources (name, kind, config_json, pipeline, after_action, poll_ms, enabled, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			src.Name, src.Kind, cfg, src.Pipeline, after, src.Poll.Milliseconds(), src.Enabled, ms(now), ms(now))
		return err
	})
	if err != nil {
		if engine.ErrorCode(err) != engine.EINTERNAL {
			return nil, err
		}
		return nil, fmt.Errorf("create source: %w", err)
	}
	return s.GetSource(ctx, src.Name)
}

// GetSource returns a source or ErrNotFound.
func (s *Store) GetSource(ctx context.Context, name string) (*engine.SourceRecord, error) {
	src, err := scanSource(queryRow(ctx, s.pool, `SELECT `+sourceColumns+` FROM sources WHERE name = ?`, name))
	if noRows(err) {
		return nil, notFound("source", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get source: %w", err)
	}
	return src, nil
}

// ListSources returns every source ordered by name.
func (s *Store) ListSources(ctx context.Context) ([]*engine.SourceRecord, error) {
	rows, err := query(ctx, s.pool, `SELECT `+sourceColumns+` FROM sources ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	defer rows.Close()
	var out []*engine.SourceRecord
	for rows.Next() {
		src, err := scanSource(rows)
		if err != nil {
			return nil, fmt.Errorf("list sources: %w", err)
		}
		out = append(out, src)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	return out, nil
}

// DeleteSource removes a source and its ledger.
func (s *Store) DeleteSource(ctx context.Context, name string) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		n, err := exec(ctx, tx, `DELETE FROM sources WHERE name = ?`, name)
		if err != nil {
			return fmt.Errorf("delete source: %w", err)
		}
		if n == 0 {
			return notFound("source", name)
		}
		if _, err := exec(ctx, tx, `DELETE FROM source_objects WHERE source = ?`, name); err != nil {
			return fmt.Errorf("delete source: %w", err)
		}
		return nil
	})
}

// RecordSourcePoll notes a look at the source.
func (s *Store) RecordSourcePoll(ctx context.Context, name, lastError string, now time.Time) error {
	n, err := exec(ctx, s.pool, `UPDATE sources SET last_poll_at = ?, last_error = ? WHERE name = ?`,
		ms(now), nullStr(lastError), name)
	if err != nil {
		return fmt.Errorf("record source poll: %w", err)
	}
	if n == 0 {
		return notFound("source", name)
	}
	return nil
}

const objectColumns = `id, source, key, size, mtime, etag, sha256, job_id, state, error, attempts, created_at, updated_at`

func scanObject(sc scanner) (*engine.SourceObject, error) {
	var o engine.SourceObject
	var mtime, created, updated int64
	var sha, errMsg *string
	var jobID *int64
	var state string
	if err := sc.Scan(&o.ID, &o.Source, &o.Key, &o.Size, &mtime, &o.ETag, &sha, &jobID, &state, &errMsg,
		&o.Attempts, &created, &updated); err != nil {
		return nil, err
	}
	o.MTime, o.CreatedAt, o.UpdatedAt = fromMS(mtime), fromMS(created), fromMS(updated)
	o.SHA256, o.Error = str(sha), str(errMsg)
	if jobID != nil {
		o.JobID = *jobID
	}
	o.State = engine.SourceObjectState(state)
	return &o, nil
}

func getObject(ctx context.Context, q querier, id int64) (*engine.SourceObject, error) {
	o, err := scanObject(queryRow(ctx, q, `SELECT `+objectColumns+` FROM source_objects WHERE id = ?`, id))
	if noRows(err) {
		return nil, notFound("source object", id)
	}
	return o, err
}

// ClaimSourceObject takes one object version for ingest in one
// transaction. Concurrent claims of one key are serialised by a
// transaction-scoped advisory lock on (source, key): the ledger's decision
// reads the key's latest row, which a row lock cannot guard before it exists.
func (s *Store) ClaimSourceObject(ctx context.Context, p *engine.ClaimSourceObjectParams) (*engine.SourceObject, bool, error) {
	if p.Source == "" || p.Key == "" {
		return nil, false, engine.Errorf(engine.EINVALID, "a source object needs a source and a key")
	}
	now, mtime := ms(p.Now), ms(p.MTime)
	var got *engine.SourceObject
	var claimed bool
	err := s.tx(ctx, func(tx pgx.Tx) error {
		got, claimed = nil, false
		if _, err := exec(ctx, tx, `SELECT pg_advisory_xact_lock(?, hashtext(?))`, s.lockSpace, "object:"+p.Source+"\n"+p.Key); err != nil {
			return err
		}
		latest, err := scanObject(queryRow(ctx, tx, `SELECT `+objectColumns+` FROM source_objects
			WHERE source = ? AND key = ? ORDER BY id DESC LIMIT 1`, p.Source, p.Key))
		if err != nil && !noRows(err) {
			return err
		}
		if latest != nil {
			same := latest.Size == p.Size && ms(latest.MTime) == mtime && latest.ETag == p.ETag
			switch {
			case same && latest.State == engine.ObjectSeen:
				if _, err := exec(ctx, tx, `UPDATE source_objects SET state = ?, attempts = attempts + 1,
					error = NULL, updated_at = ? WHERE id = ?`, engine.ObjectIngesting, now, latest.ID); err != nil {
					return err
				}
				claimed = true
				got, err = getObject(ctx, tx, latest.ID)
				return err
			case same, latest.State == engine.ObjectIngesting:
				// This version is taken or finished, or another version
				// is in flight.
				got = latest
				return nil
			case latest.State == engine.ObjectDone && !p.Reingest:
				got = latest
				return nil
			}
			// An older version of this very object (a key that changed
			// back) keeps its row: claim it again as a new version.
			if _, err := exec(ctx, tx, `DELETE FROM source_objects WHERE source = ? AND key = ? AND size = ?
				AND mtime = ? AND etag = ? AND state IN ('DONE', 'FAILED')`, p.Source, p.Key, p.Size, mtime, p.ETag); err != nil {
				return err
			}
			if latest.State == engine.ObjectSeen {
				// Given back after a crash and changed since: its old
				// version was never ingested, so the row becomes the new one.
				if _, err := exec(ctx, tx, `UPDATE source_objects SET size = ?, mtime = ?, etag = ?, state = ?,
					attempts = attempts + 1, error = NULL, updated_at = ? WHERE id = ?`,
					p.Size, mtime, p.ETag, engine.ObjectIngesting, now, latest.ID); err != nil {
					return err
				}
				claimed = true
				got, err = getObject(ctx, tx, latest.ID)
				return err
			}
		}
		var id int64
		if err := queryRow(ctx, tx, `INSERT INTO source_objects (source, key, size, mtime, etag, state, attempts, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?) RETURNING id`, p.Source, p.Key, p.Size, mtime, p.ETag, engine.ObjectIngesting, now, now).Scan(&id); err != nil {
			return err
		}
		claimed = true
		got, err = getObject(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("claim source object: %w", err)
	}
	return got, claimed, nil
}

// FinishSourceObject ends an INGESTING object's ingest.
func (s *Store) FinishSourceObject(ctx context.Context, p *engine.FinishSourceObjectParams) (*engine.SourceObject, error) {
	if p.State != engine.ObjectDone && p.State != engine.ObjectFailed {
		return nil, engine.Errorf(engine.EINVALID, "an ingest ends DONE or FAILED, not %s", p.State)
	}
	var got *engine.SourceObject
	err := s.tx(ctx, func(tx pgx.Tx) error {
		o, err := getObject(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		if o.State != engine.ObjectIngesting {
			return engine.Errorf(engine.ECONFLICT, "source object %d is %s, not INGESTING", p.ID, o.State)
		}
		if _, err := exec(ctx, tx, `UPDATE source_objects SET state = ?, job_id = ?, sha256 = COALESCE(?, sha256),
			error = ?, updated_at = ? WHERE id = ?`,
			p.State, nullID(p.JobID), nullStr(p.SHA256), nullStr(p.Error), ms(p.Now), p.ID); err != nil {
			return err
		}
		if err := countObject(ctx, tx, o.Source, p.State); err != nil {
			return err
		}
		got, err = getObject(ctx, tx, p.ID)
		return err
	})
	if err != nil {
		if engine.ErrorCode(err) != engine.EINTERNAL {
			return nil, err
		}
		return nil, fmt.Errorf("finish source object: %w", err)
	}
	return got, nil
}

// countObject bumps the source's counter of its finished objects.
func countObject(ctx context.Context, tx pgx.Tx, source string, st engine.SourceObjectState) error {
	col := "ingested"
	if st == engine.ObjectFailed {
		col = "failed"
	}
	_, err := exec(ctx, tx, `UPDATE sources SET `+col+` = `+col+` + 1 WHERE name = ?`, source)
	return err
}

// RecoverSourceObjects settles INGESTING objects claimed before p.Before by
// the state of their job.
func (s *Store) RecoverSourceObjects(ctx context.Context, p *engine.RecoverSourceObjectsParams) (int, error) {
	moved := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		moved = 0
		rows, err := query(ctx, tx, `SELECT o.id, j.id, j.queue_state FROM source_objects o
			LEFT JOIN jobs j ON j.source_ref = 'source-object:' || o.id::text AND j.source = ?
			WHERE o.source = ? AND o.state = ? AND o.updated_at < ?
			ORDER BY o.id, j.id DESC FOR UPDATE OF o`, engine.JobSource, p.Source, engine.ObjectIngesting, ms(p.Before))
		if err != nil {
			return err
		}
		type found struct {
			id    int64
			job   *int64
			state *string
		}
		var all []found
		for rows.Next() {
			var f found
			if err := rows.Scan(&f.id, &f.job, &f.state); err != nil {
				rows.Close()
				return err
			}
			// Newest job first: a FAILED attempt followed by a good one
			// settles on the good one.
			if len(all) > 0 && all[len(all)-1].id == f.id {
				continue
			}
			all = append(all, f)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, f := range all {
			to, keep := engine.RecoveredObject(engine.JobState(str(f.state)))
			switch {
			case keep:
				continue
			case to == engine.ObjectSeen:
				_, err = exec(ctx, tx, `UPDATE source_objects SET state = ?, updated_at = ? WHERE id = ?`,
					to, ms(p.Now), f.id)
			default:
				_, err = exec(ctx, tx, `UPDATE source_objects SET state = ?, job_id = ?, updated_at = ? WHERE id = ?`,
					to, *f.job, ms(p.Now), f.id)
				if err == nil {
					err = countObject(ctx, tx, p.Source, engine.ObjectDone)
				}
			}
			if err != nil {
				return err
			}
			moved++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("recover source objects: %w", err)
	}
	return moved, nil
}

// ListSourceObjects returns a source's ledger, newest first.
func (s *Store) ListSourceObjects(ctx context.Context, p *engine.ListSourceObjectsParams) ([]*engine.SourceObject, error) {
	q := `SELECT ` + objectColumns + ` FROM source_objects WHERE source = ?`
	args := []any{p.Source}
	if len(p.States) > 0 {
		states := make([]string, len(p.States))
		for i, st := range p.States {
			states[i] = string(st)
		}
		q += ` AND state = ANY(?)`
		args = append(args, states)
	}
	q += ` ORDER BY id DESC`
	if p.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, p.Limit)
	}
	rows, err := query(ctx, s.pool, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list source objects: %w", err)
	}
	defer rows.Close()
	var out []*engine.SourceObject
	for rows.Next() {
		o, err := scanObject(rows)
		if err != nil {
			return nil, fmt.Errorf("list source objects: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list source objects: %w", err)
	}
	return out, nil
}
