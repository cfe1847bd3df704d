package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
	payload := t.PayloadTemplate()
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

// UpdateTrigger replaces a trigger's settings.
func (s *Store) UpdateTrigger(ctx context.Context, t *engine.Trigger, now time.Time) (*engine.Trigger, error) {
	var out *engine.Trigger
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = scanTrigger(tx.QueryRowContext(ctx, `UPDATE job_triggers SET cron_expr = ?, timezone = ?, definition_key = ?, pipeline = ?,
			payload_template = ?, priority = ?, dedupe_window_ms = ?, missed = ?, enabled = ?, next_fire_at = ?, updated_at = ?
		WHERE name = ? RETURNING `+triggerColumns,
			nullStr(t.Cron), nullStr(t.TZ), nullStr(t.Definition), nullStr(t.Pipeline),
			t.PayloadTemplate(), t.Priority, t.DedupeWindow.D().Milliseconds(), cmp.Or(t.Missed, engine.MissedSkip), t.Enabled,
			nullMS(t.NextFireAt), ms(now), t.Name))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("trigger", t.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("update trigger %s: %w", t.Name, err)
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
	// fireManySQL is fireDueSQL for many schedule fires at once, given as
	// a JSON array of [name, due, next, result]: the compare-and-set of a
	// tick's deduped fires in one statement instead of one each.
	fireManySQL = `UPDATE job_triggers SET next_fire_at = f.nx, last_fire_at = f.due, last_result = f.res
		FROM (SELECT value->>0 AS nm, value->>1 AS due, value->>2 AS nx, value->>3 AS res FROM json_each(?)) AS f
		WHERE job_triggers.name = f.nm AND job_triggers.next_fire_at = f.due
		RETURNING name`
)

// activeDedupeSQL finds which of the keys (a JSON array) an unfinished job
// holds: one probe for a whole batch of fires instead of one per fire.
const activeDedupeSQL = `SELECT dedupe_key FROM jobs WHERE dedupe_key IN (SELECT value FROM json_each(?))
	AND queue_state IN ('INGESTING', 'QUEUED', 'RUNNING', 'PAUSED')`

// activeDedupeKeys returns the dedupe keys of the fires' jobs that an
// unfinished job holds.
func (s *Store) activeDedupeKeys(ctx context.Context, tx *sql.Tx, fires []engine.Fire) (map[string]bool, error) {
	var keys []string
	for i := range fires {
		if k, _ := fires[i].Dedupe(); k != "" && fires[i].MakesJob() {
			keys = append(keys, k)
		}
	}
	active := map[string]bool{}
	if len(keys) == 0 {
		return active, nil
	}
	list, err := json.Marshal(keys)
	if err != nil {
		return nil, err
	}
	rows, err := s.txQuery(ctx, tx, activeDedupeSQL, string(list))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		active[k] = true
	}
	return active, rows.Err()
}

// dueFires gathers schedule fires that make no job (skipped or deduped)
// and writes them with one fireManySQL, so that a tick of a thousand
// deduped triggers is one statement.
type dueFires struct {
	buf []byte
	idx map[string]int
}

func (d *dueFires) add(i int, f *engine.Fire, result string) {
	if d.idx == nil {
		d.idx = map[string]int{}
	}
	if len(d.buf) == 0 {
		d.buf = append(d.buf, '[')
	} else {
		d.buf = append(d.buf, ',')
	}
	name, _ := json.Marshal(f.Trigger)
	d.buf = append(d.buf, '[')
	d.buf = append(d.buf, name...)
	d.buf = append(d.buf, ',')
	d.buf = strconv.AppendInt(d.buf, ms(f.Due), 10)
	d.buf = append(d.buf, ',')
	d.buf = strconv.AppendInt(d.buf, ms(f.Next), 10)
	d.buf = append(d.buf, `,"`+result+`"]`...)
	d.idx[f.Trigger] = i
}

// flush writes the gathered fires and marks those that counted.
func (d *dueFires) flush(ctx context.Context, s *Store, tx *sql.Tx, out []engine.FireResult) error {
	if len(d.idx) == 0 {
		return nil
	}
	d.buf = append(d.buf, ']')
	rows, err := s.txQuery(ctx, tx, fireManySQL, string(d.buf))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return err
		}
		if i, ok := d.idx[name]; ok {
			out[i].Fired = true
		}
	}
	d.buf, d.idx = d.buf[:0], nil
	return rows.Err()
}

// FireTriggers records many fires in one transaction. The compare on
// next_fire_at is what makes a tick fire once: a second scheduler, or the
// same one after a restart, finds the value already moved on. Schedule
// fires that make no job are gathered and written together, flushed before
// any fire that makes a job or names a trigger already gathered, so that
// fires still apply in order.
func (s *Store) FireTriggers(ctx context.Context, fires []engine.Fire, now time.Time) ([]engine.FireResult, error) {
	out := make([]engine.FireResult, len(fires))
	// The jobs made, as the enqueue read them back inside the transaction:
	// given out only once it has committed.
	var jobs []*engine.Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		clear(out)
		jobs = make([]*engine.Job, len(fires))
		active, err := s.activeDedupeKeys(ctx, tx, fires)
		if err != nil {
			return err
		}
		var due dueFires
		for i := range fires {
			f := &fires[i]
			if f.EventID != 0 {
				if _, err := s.txExec(ctx, tx, markEventDoneSQL, ms(now), f.EventID); err != nil {
					return err
				}
			}
			// A fire whose job would be deduped (the common case of a
			// frequent schedule whose last job still runs) is written with
			// the others.
			dup := false
			if key, window := f.Dedupe(); f.MakesJob() && key != "" {
				dup = active[key]
				if !dup && window > 0 {
					err := checkDedupe(&engine.CreateJobParams{DedupeKey: key, DedupeWindow: window, Now: now}, s.txProbe(ctx, tx))
					if err != nil && !errors.Is(err, engine.ErrDuplicate) {
						return err
					}
					dup = err != nil
				}
			}
			if _, seen := due.idx[f.Trigger]; seen || f.Due.IsZero() || (f.MakesJob() && !dup) {
				if err := due.flush(ctx, s, tx, out); err != nil {
					return err
				}
			}
			out[i].Deduped = dup
			result := "job"
			switch {
			case dup:
				result = "deduped"
			case !f.MakesJob():
				result = "skipped"
			}
			if result != "job" && !f.Due.IsZero() {
				due.add(i, f, result)
				continue
			}
			var r sql.Result
			if f.Due.IsZero() {
				r, err = s.txExec(ctx, tx, fireEventSQL, ms(now), result, f.Trigger)
			} else {
				r, err = s.txExec(ctx, tx, fireDueSQL, ms(f.Next), ms(f.Due), result, f.Trigger, ms(f.Due))
			}
			if err != nil {
				return err
			}
			if n, _ := r.RowsAffected(); n == 0 {
				out[i].Deduped = false
				continue
			}
			out[i].Fired = true
			if result != "job" {
				continue
			}
			p, err := f.JobParams()
			if err != nil {
				out[i].Err = err
				if _, err := s.txExec(ctx, tx, fireResultSQL, "skipped", nil, f.Trigger); err != nil {
					return err
				}
				continue
			}
			var id int64
			job, err := s.enqueueJob(ctx, tx, p)
			if job != nil {
				id = job.ID
			}
			jobID := sql.NullInt64{Int64: id, Valid: true}
			switch {
			case errors.Is(err, engine.ErrDuplicate): // a job of this batch took the key
				out[i].Deduped, result, jobID = true, "deduped", sql.NullInt64{}
			case err != nil:
				return fmt.Errorf("trigger %s: %w", f.Trigger, err)
			default:
				jobs[i] = job
			}
			if _, err := s.txExec(ctx, tx, fireResultSQL, result, jobID, f.Trigger); err != nil {
				return err
			}
		}
		if err := due.flush(ctx, s, tx, out); err != nil {
			return err
		}
		// A gathered fire that did not count was not deduped either.
		for i := range out {
			if !out[i].Fired {
				out[i].Deduped = false
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fire triggers: %w", err)
	}
	for i, j := range jobs {
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
		// Items in flight are found through the jobs that hold any (the
		// per-job index), as the global one leaves them out.
		r, err := tx.ExecContext(ctx, `UPDATE job_items SET lease_expires_at = ?
			WHERE id IN (SELECT i.id FROM jobs j INDEXED BY jobs_runnable
				JOIN job_items i INDEXED BY job_items_job_status_updated ON i.job_id = j.id AND i.status = 1 /* PROCESSING */
				WHERE `+jobsInFlight+`
				AND i.lease_expires_at > ? AND i.locked_by IN (SELECT worker_id FROM job_workers WHERE last_seen < ?))`,
			ms(p.Now)-1, ms(p.Now), ms(p.StaleBefore))
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
