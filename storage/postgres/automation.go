package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/engine"
)

// Seed 003 on PostgreSQL: definitions, triggers and their fires, the
// scheduler's lease, worker heartbeats (engine.AutomationStore). Its
// meanings are SQLite's; what differs is how concurrent writers are held
// apart, said at each method.

var _ engine.AutomationStore = (*Store)(nil)

// PutDefinition creates or replaces a definition, bumping its version.
// Concurrent writers of one key take turns on a transaction advisory lock
// (as PutPipeline does), so no version is handed out twice.
func (s *Store) PutDefinition(ctx context.Context, d *engine.Definition, now time.Time) (*engine.Definition, error) {
	var def engine.Definition
	err := s.tx(ctx, func(tx pgx.Tx) error {
		def = *d
		if _, err := exec(ctx, tx, `SELECT pg_advisory_xact_lock(?, hashtext(?))`, s.lockSpace, "definition:"+def.Key); err != nil {
			return err
		}
		var cur int
		err := queryRow(ctx, tx, `SELECT version FROM job_definitions WHERE key = ?`, def.Key).Scan(&cur)
		if err != nil && !noRows(err) {
			return err
		}
		def.Version = cur + 1
		def.UpdatedAt = fromMS(ms(now))
		spec, err := json.Marshal(&def)
		if err != nil {
			return err
		}
		_, err = exec(ctx, tx, `INSERT INTO job_definitions (key, version, spec, is_active, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET version = excluded.version, spec = excluded.spec,
				is_active = excluded.is_active, updated_at = excluded.updated_at`,
			def.Key, def.Version, string(spec), def.IsActive(), ms(now), ms(now))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("put definition %s: %w", d.Key, err)
	}
	return &def, nil
}

// GetDefinition returns a definition by key.
func (s *Store) GetDefinition(ctx context.Context, key string) (*engine.Definition, error) {
	d, err := scanDefinition(queryRow(ctx, s.pool, `SELECT spec, version, updated_at FROM job_definitions WHERE key = ?`, key))
	if noRows(err) {
		return nil, notFound("definition", key)
	}
	if err != nil {
		return nil, fmt.Errorf("get definition %s: %w", key, err)
	}
	return d, nil
}

// ListDefinitions returns every definition by key.
func (s *Store) ListDefinitions(ctx context.Context) ([]*engine.Definition, error) {
	rows, err := query(ctx, s.pool, `SELECT spec, version, updated_at FROM job_definitions ORDER BY key COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("list definitions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*engine.Definition, error) { return scanDefinition(r) })
	if err != nil {
		return nil, fmt.Errorf("list definitions: %w", err)
	}
	return out, nil
}

func scanDefinition(sc scanner) (*engine.Definition, error) {
	var spec string
	var version int
	var updated int64
	if err := sc.Scan(&spec, &version, &updated); err != nil {
		return nil, err
	}
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
	var event, cron, tz, def, pipe, result *string
	var payload string
	var window, created, updated int64
	var next, last, lastJob *int64
	err := sc.Scan(&t.Name, &t.Kind, &event, &cron, &tz, &def, &pipe, &payload, &t.Priority, &window, &t.Missed,
		&t.Enabled, &next, &last, &lastJob, &result, &created, &updated)
	if err != nil {
		return nil, err
	}
	t.Event, t.Cron, t.TZ, t.Definition, t.Pipeline = str(event), str(cron), str(tz), str(def), str(pipe)
	t.Payload = json.RawMessage(payload)
	t.DedupeWindow = engine.Duration(time.Duration(window) * time.Millisecond)
	t.NextFireAt, t.LastFireAt = fromNullMS(next), fromNullMS(last)
	if lastJob != nil {
		t.LastJobID = *lastJob
	}
	t.LastResult = str(result)
	t.CreatedAt, t.UpdatedAt = fromMS(created), fromMS(updated)
	return &t, nil
}

// CreateTrigger stores a new trigger; a taken name is ECONFLICT (the
// primary key decides between concurrent creators).
func (s *Store) CreateTrigger(ctx context.Context, t *engine.Trigger, now time.Time) (*engine.Trigger, error) {
	payload := t.PayloadTemplate()
	missed := t.Missed
	if missed == "" {
		missed = engine.MissedSkip
	}
	out, err := scanTrigger(queryRow(ctx, s.pool, `INSERT INTO job_triggers (name, kind, event_name, cron_expr, timezone,
			definition_key, pipeline, payload_template, priority, dedupe_window_ms, missed, enabled, next_fire_at,
			created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING RETURNING `+triggerColumns,
		t.Name, t.Kind, nullStr(t.Event), nullStr(t.Cron), nullStr(t.TZ), nullStr(t.Definition), nullStr(t.Pipeline),
		payload, t.Priority, t.DedupeWindow.D().Milliseconds(), missed, t.Enabled, nullMS(t.NextFireAt), ms(now), ms(now)))
	if noRows(err) {
		err = engine.Errorf(engine.ECONFLICT, "trigger %q already exists (remove it first: sluice trigger rm %s)", t.Name, t.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("create trigger %s: %w", t.Name, err)
	}
	return out, nil
}

// UpdateTrigger replaces a trigger's settings.
func (s *Store) UpdateTrigger(ctx context.Context, t *engine.Trigger, now time.Time) (*engine.Trigger, error) {
	out, err := scanTrigger(queryRow(ctx, s.pool, `UPDATE job_triggers SET cron_expr = ?, timezone = ?, definition_key = ?, pipeline = ?,
			payload_template = ?, priority = ?, dedupe_window_ms = ?, missed = ?, enabled = ?, next_fire_at = ?, updated_at = ?
		WHERE name = ? RETURNING `+triggerColumns,
		nullStr(t.Cron), nullStr(t.TZ), nullStr(t.Definition), nullStr(t.Pipeline),
		t.PayloadTemplate(), t.Priority, t.DedupeWindow.D().Milliseconds(), cmp.Or(t.Missed, engine.MissedSkip), t.Enabled,
		nullMS(t.NextFireAt), ms(now), t.Name))
	if noRows(err) {
		return nil, notFound("trigger", t.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("update trigger %s: %w", t.Name, err)
	}
	return out, nil
}

// DeleteTrigger removes a trigger.
func (s *Store) DeleteTrigger(ctx context.Context, name string) error {
	n, err := exec(ctx, s.pool, `DELETE FROM job_triggers WHERE name = ?`, name)
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
	q := `SELECT ` + triggerColumns + ` FROM job_triggers WHERE TRUE`
	var args []any
	if p != nil && p.Kind != "" {
		q += ` AND kind = ?`
		args = append(args, p.Kind)
	}
	if p != nil && p.Event != "" {
		q += ` AND kind = 'event' AND event_name = ?`
		args = append(args, p.Event)
	}
	rows, err := query(ctx, s.pool, q+` ORDER BY name COLLATE "C"`, args...)
	if err != nil {
		return nil, fmt.Errorf("list triggers: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*engine.Trigger, error) { return scanTrigger(r) })
	if err != nil {
		return nil, fmt.Errorf("list triggers: %w", err)
	}
	return out, nil
}

// unfinishedStates are the job states that hold a dedupe key; the partial
// unique index jobs_active_dedupe has the same list.
const unfinishedStates = `('INGESTING', 'QUEUED', 'RUNNING', 'PAUSED')`

// onDedupeConflict makes a job insert whose dedupe key an unfinished job
// holds insert nothing (and return no row) instead of failing: the
// caller's transaction goes on, which a fire of many triggers needs. The
// clause names the partial unique index by its columns and predicate.
const onDedupeConflict = `ON CONFLICT (dedupe_key) WHERE dedupe_key IS NOT NULL AND queue_state IN ` + unfinishedStates + ` DO NOTHING`

// checkDedupeWindow returns ErrDuplicate when a job with p.DedupeKey was
// created within p.DedupeWindow before p.Now. (An unfinished holder is
// refused by the insert itself, onDedupeConflict.) The window is a probe,
// not an index: two writers of one key racing, the second is refused by
// the index while the first is unfinished; only a first job that started
// and finished between the second's probe and its insert would slip by.
func checkDedupeWindow(ctx context.Context, tx pgx.Tx, p *engine.CreateJobParams) error {
	if p.DedupeKey == "" || p.DedupeWindow <= 0 {
		return nil
	}
	var one int
	err := queryRow(ctx, tx, `SELECT 1 FROM jobs WHERE dedupe_key = ? AND created_at > ? LIMIT 1`,
		p.DedupeKey, ms(p.Now.Add(-p.DedupeWindow))).Scan(&one)
	switch {
	case err == nil:
		return engine.ErrDuplicate
	case noRows(err):
		return nil
	default:
		return err
	}
}

// heldDedupeKeys returns which of the fires' dedupe keys are held: by an
// unfinished job, or by a job created within that fire's window. One probe
// for the whole batch, so that the usual deduped fire (a frequent schedule
// whose last job still runs) costs no round trip of its own. Keys taken by
// jobs of this batch are refused later by the insert (onDedupeConflict).
func heldDedupeKeys(ctx context.Context, tx pgx.Tx, fires []engine.Fire, now time.Time) (map[string]bool, error) {
	var keys []string
	var since []int64
	for i := range fires {
		f := &fires[i]
		if key, w := f.Dedupe(); key != "" && f.MakesJob() {
			keys = append(keys, key)
			// No window: a created_at no job has.
			cut := int64(1<<63 - 1)
			if w > 0 {
				at := now
				if f.Job != nil {
					at = f.Job.Job.Now
				}
				cut = ms(at.Add(-w))
			}
			since = append(since, cut)
		}
	}
	held := map[string]bool{}
	if len(keys) == 0 {
		return held, nil
	}
	rows, err := query(ctx, tx, `SELECT DISTINCT k.key FROM unnest(?::text[], ?::bigint[]) AS k(key, since)
		WHERE EXISTS (SELECT 1 FROM jobs j WHERE j.dedupe_key = k.key
			AND (j.queue_state IN `+unfinishedStates+` OR j.created_at > k.since))`, keys, since)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	for _, k := range list {
		held[k] = true
	}
	return held, nil
}

// lockTriggers locks the rows of the fires' triggers in name order. Two
// schedulers firing overlapping batches in different orders would
// otherwise each hold a row the other waits for (a deadlock, retried, but
// again and again under load); in one order, the second simply waits for
// the first to commit and then finds its ticks handled.
func lockTriggers(ctx context.Context, tx pgx.Tx, fires []engine.Fire) error {
	names := make([]string, len(fires))
	for i, f := range fires {
		names[i] = f.Trigger
	}
	_, err := exec(ctx, tx, `SELECT 1 FROM job_triggers WHERE name = ANY(?) ORDER BY name COLLATE "C" FOR UPDATE`, names)
	return err
}

// fireSQL is the statement that records one fire with its result: for a
// schedule, the compare-and-set on next_fire_at.
func fireSQL(f *engine.Fire, now time.Time, result string) (string, []any) {
	if f.Due.IsZero() {
		return rebind(`UPDATE job_triggers SET last_fire_at = ?, last_result = ? WHERE name = ?`),
			[]any{ms(now), result, f.Trigger}
	}
	return rebind(`UPDATE job_triggers SET next_fire_at = ?, last_fire_at = ?, last_result = ?
		WHERE name = ? AND next_fire_at = ?`), []any{ms(f.Next), ms(f.Due), result, f.Trigger, ms(f.Due)}
}

// FireTriggers records many fires in one transaction. It first locks the
// batch's trigger rows (lockTriggers); a schedule fire is then a
// conditional UPDATE on next_fire_at = Due: a second scheduler firing the
// same tick waits for the row locks of the first, and once that one
// commits, reads the new rows, finds next_fire_at moved on and updates
// nothing. So a tick fires once however
// many schedulers race (at read committed, which is what s.tx runs).
//
// Fires that make no job (deduped or skipped) are sent as one pipelined
// batch of UPDATEs, flushed before the next fire that makes a job, so the
// fires still apply in order.
func (s *Store) FireTriggers(ctx context.Context, fires []engine.Fire, now time.Time) ([]engine.FireResult, error) {
	var out []engine.FireResult
	var jobIDs []int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = make([]engine.FireResult, len(fires))
		jobIDs = make([]int64, len(fires))
		if err := lockTriggers(ctx, tx, fires); err != nil {
			return err
		}
		held, err := heldDedupeKeys(ctx, tx, fires, now)
		if err != nil {
			return err
		}
		var events []int64
		for i := range fires {
			if fires[i].EventID != 0 {
				events = append(events, fires[i].EventID)
			}
		}
		if len(events) > 0 {
			if err := markEventsDone(ctx, tx, events, ms(now)); err != nil {
				return err
			}
		}
		batch, queued := &pgx.Batch{}, []int(nil)
		flush := func() error {
			if len(queued) == 0 {
				return nil
			}
			br := tx.SendBatch(ctx, batch)
			for _, i := range queued {
				tag, err := br.Exec()
				if err != nil {
					br.Close()
					return err
				}
				if tag.RowsAffected() > 0 {
					f := &fires[i]
					out[i].Fired, out[i].Deduped = true, f.MakesJob()
				}
			}
			batch, queued = &pgx.Batch{}, queued[:0]
			return br.Close()
		}
		enqueued := false
		for i := range fires {
			f := &fires[i]
			if key, _ := f.Dedupe(); !f.MakesJob() || (key != "" && held[key]) {
				result := "skipped"
				if f.MakesJob() {
					result = "deduped"
				}
				q, args := fireSQL(f, now, result)
				batch.Queue(q, args...)
				queued = append(queued, i)
				continue
			}
			if err := flush(); err != nil {
				return err
			}
			q, args := fireSQL(f, now, "job")
			tag, err := tx.Exec(ctx, q, args...)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				continue
			}
			out[i].Fired = true
			p, err := f.JobParams()
			if err != nil {
				out[i].Err = err
				if _, err := exec(ctx, tx, `UPDATE job_triggers SET last_result = 'skipped' WHERE name = ?`, f.Trigger); err != nil {
					return err
				}
				continue
			}
			id, err := enqueueJob(ctx, tx, p)
			result, jobID := "job", &id
			switch {
			case engine.IsDuplicate(err): // a job of this batch, or of a concurrent writer, took the key
				out[i].Deduped, result, jobID = true, "deduped", nil
			case err != nil:
				return fmt.Errorf("trigger %s: %w", f.Trigger, err)
			default:
				jobIDs[i], enqueued = id, true
			}
			if _, err := exec(ctx, tx, `UPDATE job_triggers SET last_result = ?, last_job_id = COALESCE(?, last_job_id) WHERE name = ?`,
				result, jobID, f.Trigger); err != nil {
				return err
			}
		}
		if err := flush(); err != nil {
			return err
		}
		if enqueued {
			return s.notify(ctx, tx, wakeWork)
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
		j, err := s.GetJob(ctx, id)
		if err != nil {
			return nil, err
		}
		out[i].Job = j
	}
	return out, nil
}

// AcquireLeadership takes or renews a lease row in one statement: the
// upsert's row lock orders concurrent takers, and its WHERE lets only the
// holder or a taker of an expired lease write.
//
// Not the advisory locks of leader.go, though they serve the reaper: the
// contract's lease belongs to a holder name and ends at p.Now+p.For, by the
// caller's clock, whatever becomes of connections. A session lock belongs
// to a connection, not a holder (two holders in one process would share
// it), and ends only when the connection does, so neither "a's lease ran
// out" nor a renewal counting from its own time could be kept.
func (s *Store) AcquireLeadership(ctx context.Context, p *engine.LeadershipParams) (bool, error) {
	n, err := exec(ctx, s.pool, `INSERT INTO leader_leases (name, holder, expires_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE leader_leases.holder = excluded.holder OR leader_leases.expires_at <= ?`,
		p.Name, p.Holder, ms(p.Now.Add(p.For)), ms(p.Now))
	if err != nil {
		return false, fmt.Errorf("acquire leadership %s: %w", p.Name, err)
	}
	return n > 0, nil
}

// ReleaseLeadership deletes the lease row when p.Holder holds it.
func (s *Store) ReleaseLeadership(ctx context.Context, p *engine.LeadershipParams) error {
	if _, err := exec(ctx, s.pool, `DELETE FROM leader_leases WHERE name = ? AND holder = ?`, p.Name, p.Holder); err != nil {
		return fmt.Errorf("release leadership %s: %w", p.Name, err)
	}
	return nil
}

// HeartbeatWorker upserts a worker row.
func (s *Store) HeartbeatWorker(ctx context.Context, w *engine.Worker, now time.Time) error {
	_, err := exec(ctx, s.pool, `INSERT INTO job_workers (worker_id, hostname, pid, version, started_at, last_seen, running, scheduler)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (worker_id) DO UPDATE SET version = excluded.version, last_seen = excluded.last_seen,
			running = excluded.running, scheduler = excluded.scheduler`,
		w.ID, w.Host, w.PID, w.Version, ms(w.StartedAt), ms(now), w.Running, w.Scheduler)
	if err != nil {
		return fmt.Errorf("heartbeat worker %s: %w", w.ID, err)
	}
	return nil
}

// RemoveWorker deletes a worker row.
func (s *Store) RemoveWorker(ctx context.Context, id string) error {
	if _, err := exec(ctx, s.pool, `DELETE FROM job_workers WHERE worker_id = ?`, id); err != nil {
		return fmt.Errorf("remove worker %s: %w", id, err)
	}
	return nil
}

// ListWorkers returns the workers by id.
func (s *Store) ListWorkers(ctx context.Context) ([]*engine.Worker, error) {
	rows, err := query(ctx, s.pool, `SELECT worker_id, hostname, pid, version, started_at, last_seen, running, scheduler
		FROM job_workers ORDER BY worker_id COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*engine.Worker, error) {
		var w engine.Worker
		var started, seen int64
		if err := r.Scan(&w.ID, &w.Host, &w.PID, &w.Version, &started, &seen, &w.Running, &w.Scheduler); err != nil {
			return nil, err
		}
		w.StartedAt, w.LastSeen = fromMS(started), fromMS(seen)
		return &w, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	return out, nil
}

// ReclaimDeadWorkers ends the leases held by workers that stopped beating.
// The UPDATE re-checks status and lease on each row it locks, so an item
// its worker completed (or a reaper gave back) meanwhile is left alone;
// the reaper then takes the ended leases as it takes any expired one.
func (s *Store) ReclaimDeadWorkers(ctx context.Context, p *engine.ReclaimParams) (int, error) {
	var n int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		n, err = exec(ctx, tx, `UPDATE job_items SET lease_expires_at = ?
			WHERE status = 'PROCESSING' AND lease_expires_at > ? AND locked_by IN
				(SELECT worker_id FROM job_workers WHERE last_seen < ?)`, ms(p.Now)-1, ms(p.Now), ms(p.StaleBefore))
		if err != nil {
			return err
		}
		if !p.ForgetBefore.IsZero() {
			_, err = exec(ctx, tx, `DELETE FROM job_workers WHERE last_seen < ?`, ms(p.ForgetBefore))
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reclaim dead workers: %w", err)
	}
	return int(n), nil
}
