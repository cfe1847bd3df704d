package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// PutDefinition creates or replaces a definition, bumping its version.
func (s *Store) PutDefinition(ctx context.Context, d *engine.Definition, now time.Time) (*engine.Definition, error) {
	def := *d
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var cur int
		err := tx.QueryRowContext(ctx, `SELECT version FROM job_definitions WHERE key = ?`, def.Key).Scan(&cur)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		def.Version = cur + 1
		def.UpdatedAt = fromMS(ms(now))
		spec, err := json.Marshal(&def)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO job_definitions (key, version, spec, is_active, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET version = excluded.version, spec = excluded.spec,
				is_active = excluded.is_active, updated_at = excluded.updated_at`,
			def.Key, def.Version, string(spec), def.IsActive(), ms(now), ms(now))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("put definition %s: %w", def.Key, err)
	}
	return &def, nil
}

// GetDefinition returns a definition by key.
func (s *Store) GetDefinition(ctx context.Context, key string) (*engine.Definition, error) {
	d, err := getSpec(ctx, s.r, `SELECT spec, version, updated_at FROM job_definitions WHERE key = ?`, key, decodeDefinition)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("definition", key)
	}
	if err != nil {
		return nil, fmt.Errorf("get definition %s: %w", key, err)
	}
	return d, nil
}

// ListDefinitions returns every definition by key.
func (s *Store) ListDefinitions(ctx context.Context) ([]*engine.Definition, error) {
	out, err := listSpecs(ctx, s.r, `SELECT spec, version, updated_at FROM job_definitions ORDER BY key`, decodeDefinition)
	if err != nil {
		return nil, fmt.Errorf("list definitions: %w", err)
	}
	return out, nil
}

func decodeDefinition(spec string, version int, updated int64) (*engine.Definition, error) {
	var d engine.Definition
	if err := json.Unmarshal([]byte(spec), &d); err != nil {
		return nil, fmt.Errorf("decode definition: %w", err)
	}
	d.Version = version
	d.UpdatedAt = fromMS(updated)
	return &d, nil
}

const triggerColumns = `name, kind, event_name, cron_expr, timezone, definition_key, pipeline, payload_template,
	priority, dedupe_window_ms, missed, enabled, next_fire_at, last_fire_at, last_job_id, last_result, created_at, updated_at`

func scanTrigger(sc scanner) (*engine.Trigger, error) {
	var t engine.Trigger
	var event, cron, tz, def, pipe, result sql.NullString
	var payload string
	var window, created, updated int64
	var next, last, lastJob sql.NullInt64
	err := sc.Scan(&t.Name, &t.Kind, &event, &cron, &tz, &def, &pipe, &payload, &t.Priority, &window, &t.Missed,
		&t.Enabled, &next, &last, &lastJob, &result, &created, &updated)
	if err != nil {
		return nil, err
	}
	t.Event, t.Cron, t.TZ, t.Definition, t.Pipeline = event.String, cron.String, tz.String, def.String, pipe.String
	t.Payload = json.RawMessage(payload)
	t.DedupeWindow = engine.Duration(time.Duration(window) * time.Millisecond)
	t.NextFireAt, t.LastFireAt = fromNullMS(next), fromNullMS(last)
	t.LastJobID, t.LastResult = lastJob.Int64, result.String
	t.CreatedAt, t.UpdatedAt = fromMS(created), fromMS(updated)
	return &t, nil
}

// CreateTrigger stores a new trigger.
func (s *Store) CreateTrigger(ctx context.Context, t *engine.Trigger, now time.Time) (*engine.Trigger, error) {
	payload := string(t.Payload)
	if strings.TrimSpace(payload) == "" {
		payload = "{}"
	}
	missed := t.Missed
	if missed == "" {
		missed = engine.MissedSkip
	}
	var out *engine.Trigger
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM job_triggers WHERE name = ?`, t.Name).Scan(&one)
		if err == nil {
			return engine.Errorf(engine.ECONFLICT, "trigger %q already exists (remove it first: sluice trigger rm %s)", t.Name, t.Name)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		row := tx.QueryRowContext(ctx, `INSERT INTO job_triggers (name, kind, event_name, cron_expr, timezone, definition_key,
				pipeline, payload_template, priority, dedupe_window_ms, missed, enabled, next_fire_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING `+triggerColumns,
			t.Name, t.Kind, nullStr(t.Event), nullStr(t.Cron), nullStr(t.TZ), nullStr(t.Definition), nullStr(t.Pipeline),
			payload, t.Priority, t.DedupeWindow.D().Milliseconds(), missed, t.Enabled, nullMS(t.NextFireAt), ms(now), ms(now))
		out, err = scanTrigger(row)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create trigger %s: %w", t.Name, err)
	}
	return out, nil
}

// DeleteTrigger removes a trigger.
func (s *Store) DeleteTrigger(ctx context.Context, name string) error {
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM job_triggers WHERE name = ?`, name)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("delete trigger %s: %w", name, err)
	}
	if n == 0 {
		return notFound("trigger", name)
	}
	return nil
}

// ListTriggers returns triggers by name.
func (s *Store) ListTriggers(ctx context.Context, p *engine.ListTriggersParams) ([]*engine.Trigger, error) {
	q := `SELECT ` + triggerColumns + ` FROM job_triggers WHERE 1 = 1`
	var args []any
	if p != nil && p.Kind != "" {
		q += ` AND kind = ?`
		args = append(args, p.Kind)
	}
	if p != nil && p.Event != "" {
		q += ` AND kind = 'event' AND event_name = ?`
		args = append(args, p.Event)
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY name`, args...)
	if err != nil {
		return nil, fmt.Errorf("list triggers: %w", err)
	}
	defer rows.Close()
	var out []*engine.Trigger
	for rows.Next() {
		t, err := scanTrigger(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// The statements of a fire, prepared once (writeCachedSQL).
const (
	fireDueSQL    = `UPDATE job_triggers SET next_fire_at = ?, last_fire_at = ?, last_result = ? WHERE name = ? AND next_fire_at = ?`
	fireEventSQL  = `UPDATE job_triggers SET last_fire_at = ?, last_result = ? WHERE name = ?`
	fireResultSQL = `UPDATE job_triggers SET last_result = ?, last_job_id = COALESCE(?, last_job_id) WHERE name = ?`
)

// dedupeBatch is how many keys one probe of activeDedupeSQL looks up.
const dedupeBatch = 128

// activeDedupeSQL finds which of dedupeBatch keys an unfinished job holds
// (unused places are NULL, which matches nothing).
var activeDedupeSQL = `SELECT dedupe_key FROM jobs WHERE dedupe_key IN (` + placeholders(dedupeBatch) + `)
	AND queue_state IN ('INGESTING', 'QUEUED', 'RUNNING', 'PAUSED')`

// activeDedupeKeys returns the dedupe keys of the fires' jobs that an
// unfinished job holds: one probe per dedupeBatch fires instead of one per
// fire.
func (s *Store) activeDedupeKeys(ctx context.Context, tx *sql.Tx, fires []engine.Fire) (map[string]bool, error) {
	var keys []any
	for _, f := range fires {
		if f.Job != nil && f.Job.Job.DedupeKey != "" {
			keys = append(keys, f.Job.Job.DedupeKey)
		}
	}
	active := map[string]bool{}
	for len(keys) > 0 {
		n := min(len(keys), dedupeBatch)
		args := make([]any, dedupeBatch)
		copy(args, keys[:n])
		keys = keys[n:]
		st := s.writes.lookup(activeDedupeSQL)
		var rows *sql.Rows
		var err error
		if st != nil {
			rows, err = tx.StmtContext(ctx, st).QueryContext(ctx, args...)
		} else {
			rows, err = tx.QueryContext(ctx, activeDedupeSQL, args...)
		}
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				rows.Close()
				return nil, err
			}
			active[k] = true
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	return active, nil
}

// FireTriggers records many fires in one transaction. The compare on
// next_fire_at is what makes a tick fire once: a second scheduler, or the
// same one after a restart, finds the value already moved on.
func (s *Store) FireTriggers(ctx context.Context, fires []engine.Fire, now time.Time) ([]engine.FireResult, error) {
	out := make([]engine.FireResult, len(fires))
	var jobIDs []int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		jobIDs = make([]int64, len(fires))
		active, err := s.activeDedupeKeys(ctx, tx, fires)
		if err != nil {
			return err
		}
		for i, f := range fires {
			// A fire whose job would be deduped (the common case of a
			// frequent schedule whose last job still runs) is one statement.
			dup := false
			if f.Job != nil && f.Job.Job.DedupeKey != "" {
				dup = active[f.Job.Job.DedupeKey]
				if !dup && f.Job.Job.DedupeWindow > 0 {
					err := s.checkDedupe(ctx, tx, &f.Job.Job)
					if err != nil && !errors.Is(err, engine.ErrDuplicate) {
						return err
					}
					dup = err != nil
				}
			}
			result := "skipped"
			if dup {
				result = "deduped"
			}
			var r sql.Result
			var err error
			if f.Due.IsZero() {
				r, err = s.txExec(ctx, tx, fireEventSQL, ms(now), result, f.Trigger)
			} else {
				r, err = s.txExec(ctx, tx, fireDueSQL, ms(f.Next), ms(f.Due), result, f.Trigger, ms(f.Due))
			}
			if err != nil {
				return err
			}
			if n, _ := r.RowsAffected(); n == 0 {
				continue
			}
			out[i].Fired, out[i].Deduped = true, dup
			if f.Job == nil || dup {
				continue
			}
			var id int64
			job, err := s.enqueueJob(ctx, tx, f.Job)
			if job != nil {
				id = job.ID
			}
			result, jobID := "job", sql.NullInt64{Int64: id, Valid: true}
			switch {
			case errors.Is(err, engine.ErrDuplicate): // a job of this batch took the key
				out[i].Deduped, result, jobID = true, "deduped", sql.NullInt64{}
			case err != nil:
				return fmt.Errorf("trigger %s: %w", f.Trigger, err)
			default:
				jobIDs[i] = id
			}
			if _, err := s.txExec(ctx, tx, fireResultSQL, result, jobID, f.Trigger); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fire triggers: %w", err)
	}
	for i, id := range jobIDs {
		if id == 0 {
			continue
		}
		j, err := s.writerJob(ctx, id)
		if err != nil {
			return nil, err
		}
		out[i].Job = j
	}
	return out, nil
}

// AcquireLeadership takes or renews a lease row.
func (s *Store) AcquireLeadership(ctx context.Context, p *engine.LeadershipParams) (bool, error) {
	var held bool
	err := s.tx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `INSERT INTO leader_leases (name, holder, expires_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
			WHERE leader_leases.holder = excluded.holder OR leader_leases.expires_at <= ?`,
			p.Name, p.Holder, ms(p.Now.Add(p.For)), ms(p.Now))
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		held = n > 0
		return err
	})
	if err != nil {
		return false, fmt.Errorf("acquire leadership %s: %w", p.Name, err)
	}
	return held, nil
}

// ReleaseLeadership deletes the lease row when p.Holder holds it.
func (s *Store) ReleaseLeadership(ctx context.Context, p *engine.LeadershipParams) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM leader_leases WHERE name = ? AND holder = ?`, p.Name, p.Holder)
		return err
	})
	if err != nil {
		return fmt.Errorf("release leadership %s: %w", p.Name, err)
	}
	return nil
}

// HeartbeatWorker upserts a worker row.
func (s *Store) HeartbeatWorker(ctx context.Context, w *engine.Worker, now time.Time) error {
	err := s.lightTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO job_workers (worker_id, hostname, pid, version, started_at, last_seen, running, scheduler)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (worker_id) DO UPDATE SET version = excluded.version, last_seen = excluded.last_seen,
				running = excluded.running, scheduler = excluded.scheduler`,
			w.ID, w.Host, w.PID, w.Version, ms(w.StartedAt), ms(now), w.Running, w.Scheduler)
		return err
	})
	if err != nil {
		return fmt.Errorf("heartbeat worker %s: %w", w.ID, err)
	}
	return nil
}

// RemoveWorker deletes a worker row.
func (s *Store) RemoveWorker(ctx context.Context, id string) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM job_workers WHERE worker_id = ?`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("remove worker %s: %w", id, err)
	}
	return nil
}

// ListWorkers returns the workers by id.
func (s *Store) ListWorkers(ctx context.Context) ([]*engine.Worker, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT worker_id, hostname, pid, version, started_at, last_seen, running, scheduler
		FROM job_workers ORDER BY worker_id`)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	defer rows.Close()
	var out []*engine.Worker
	for rows.Next() {
		var w engine.Worker
		var started, seen int64
		if err := rows.Scan(&w.ID, &w.Host, &w.PID, &w.Version, &started, &seen, &w.Running, &w.Scheduler); err != nil {
			return nil, err
		}
		w.StartedAt, w.LastSeen = fromMS(started), fromMS(seen)
		out = append(out, &w)
	}
	return out, rows.Err()
}

// ReclaimDeadWorkers ends the leases held by workers that stopped beating.
func (s *Store) ReclaimDeadWorkers(ctx context.Context, p *engine.ReclaimParams) (int, error) {
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `UPDATE job_items SET lease_expires_at = ?
			WHERE status = 'PROCESSING' AND lease_expires_at > ? AND locked_by IN
				(SELECT worker_id FROM job_workers WHERE last_seen < ?)`, ms(p.Now)-1, ms(p.Now), ms(p.StaleBefore))
		if err != nil {
			return err
		}
		if n, err = r.RowsAffected(); err != nil {
			return err
		}
		if !p.ForgetBefore.IsZero() {
			_, err = tx.ExecContext(ctx, `DELETE FROM job_workers WHERE last_seen < ?`, ms(p.ForgetBefore))
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reclaim dead workers: %w", err)
	}
	return int(n), nil
}
