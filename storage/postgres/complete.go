package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/engine"
)

// completeItemsSQL applies a batch of outcomes in one statement under the
// lease guard (still PROCESSING, same worker, same stage and attempt).
// Moving on to another stage starts the attempt count again: each stage
// has its own budget. A granted hand-off (o.handoff) keeps the item
// PROCESSING under the same worker at its next stage, its first attempt
// begun, with a new lease. It returns the items it changed.
const completeItemsSQL = `UPDATE job_items i SET status = CASE WHEN o.handoff THEN 'PROCESSING' ELSE o.status END,
		stage = o.next_stage,
		attempts = CASE WHEN o.handoff THEN 1 WHEN i.stage = o.next_stage THEN i.attempts ELSE 0 END,
		result_json = COALESCE(o.result, i.result_json), last_error = o.err, last_error_code = o.code,
		run_at = o.run_at, strategy = o.strategy,
		locked_by = CASE WHEN o.handoff THEN i.locked_by END,
		locked_at = CASE WHEN o.handoff THEN $12::bigint END,
		lease_expires_at = CASE WHEN o.handoff THEN o.lease END,
		updated_at = CASE WHEN o.handoff THEN $12::bigint ELSE o.run_at END
	FROM unnest($2::bigint[], $3::text[], $4::int[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::int[],
			$10::int[], $11::int[], $13::bool[], $14::bigint[])
		AS o(id, status, next_stage, result, err, code, run_at, strategy, attempt, stage, handoff, lease)
	WHERE i.id = o.id AND i.status = 'PROCESSING' AND i.locked_by = $1 AND i.attempts = o.attempt AND i.stage = o.stage
	RETURNING i.id`

// runnableJobsSQL picks, of the given jobs, those that take new attempts
// (a hand-off is granted only to them).
const runnableJobsSQL = `SELECT id FROM jobs WHERE id = ANY($1) AND queue_state IN ('QUEUED', 'RUNNING')`

// insertAttemptsSQL records a batch of attempts from arrays.
const insertAttemptsSQL = `INSERT INTO item_attempts (item_id, job_id, attempt_no, stage, worker, started_at, finished_at,
		outcome, error_class, error, duration_us, detail)
	SELECT a.item_id, a.job_id, a.attempt_no, a.stage, $1, a.started_at, $2, a.outcome, a.class, a.err, a.us, a.detail
	FROM unnest($3::bigint[], $4::bigint[], $5::int[], $6::int[], $7::bigint[], $8::text[], $9::text[], $10::text[],
			$11::bigint[], $12::text[]) WITH ORDINALITY
		AS a(item_id, job_id, attempt_no, stage, started_at, outcome, class, err, us, detail, n)
	ORDER BY a.n`

// jobDelta accumulates counter changes of one job within a transaction.
type jobDelta struct {
	counts engine.ItemCounts
	// requests is how many attempts ran (the spending cap counts them).
	requests int64
}

// deltas maps jobs to their counter changes.
type deltas map[int64]*jobDelta

func (d deltas) of(job int64) *jobDelta {
	x := d[job]
	if x == nil {
		x = &jobDelta{}
		d[job] = x
	}
	return x
}

// CompleteItems applies many outcomes in one transaction: the items change
// in one statement (they are this worker's, under its lease), the attempts
// are recorded in another, and the job counters follow, in job id order,
// last: a job's row is locked only from there to the commit.
func (s *Store) CompleteItems(ctx context.Context, p *engine.CompleteItemsParams) (*engine.CompleteItemsResult, error) {
	res := &engine.CompleteItemsResult{}
	if len(p.Outcomes) == 0 {
		return res, nil
	}
	now := ms(p.Now)
	n := len(p.Outcomes)
	// The batch as arrays. An item named twice is applied once (the first
	// outcome); the rest are stale, as they are one after another on SQLite.
	var (
		ids                    = make([]int64, 0, n)
		statuses, results      = make([]string, 0, n), make([]*string, 0, n)
		errs, codes            = make([]*string, 0, n), make([]*string, 0, n)
		runAts                 = make([]int64, 0, n)
		nextStages, strategies = make([]int32, 0, n), make([]int32, 0, n)
		attemptNos, stages     = make([]int32, 0, n), make([]int32, 0, n)
		handOffs, leases       = make([]bool, 0, n), make([]int64, 0, n)
		handOffJobs            []int64
		byItem                 = make(map[int64]int, n)
		dupes                  []int64
	)
	for i := range p.Outcomes {
		o := &p.Outcomes[i]
		nextStage, at, err := o.Next(p.Now)
		if err != nil {
			return nil, err
		}
		if _, twice := byItem[o.ItemID]; twice {
			dupes = append(dupes, o.ItemID)
			continue
		}
		byItem[o.ItemID] = i
		runAt := ms(at)
		ids = append(ids, o.ItemID)
		statuses = append(statuses, string(o.Status))
		nextStages = append(nextStages, int32(nextStage))
		results = append(results, nullJSON(o.Result))
		errs = append(errs, nullStr(o.Error))
		codes = append(codes, nullStr(string(o.ErrorClass)))
		runAts = append(runAts, runAt)
		strategies = append(strategies, int32(o.Strategy))
		attemptNos = append(attemptNos, int32(o.Attempt))
		stages = append(stages, int32(o.Stage))
		wants := o.WantsHandOff(p.Now)
		handOffs, leases = append(handOffs, wants), append(leases, ms(o.LeaseUntil))
		if wants {
			handOffJobs = append(handOffJobs, o.JobID)
		}
	}
	var wake bool
	err := s.tx(ctx, func(tx pgx.Tx) error {
		*res = engine.CompleteItemsResult{}
		wake = false
		granted := slices.Clone(handOffs)
		if len(handOffJobs) > 0 {
			// A hand-off is granted only while its job takes new attempts.
			rows, err := tx.Query(ctx, runnableJobsSQL, handOffJobs)
			if err != nil {
				return err
			}
			ok, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return err
			}
			for k, id := range ids {
				granted[k] = handOffs[k] && slices.Contains(ok, p.Outcomes[byItem[id]].JobID)
			}
		}
		// Planned anew with each batch's arrays (an unnamed statement, so
		// never a generic plan): a generic plan guesses 10 outcomes and,
		// with statistics taken while few items were in flight, joined the
		// worker's in-flight items to the batch in a nested loop that read
		// the whole batch once per item (900 × 900 rows, ~0.7 s per
		// completion where a hash join takes ~35 ms; docs/BENCHMARKS.md).
		rows, err := tx.Query(ctx, completeItemsSQL, pgx.QueryExecModeCacheDescribe, p.WorkerID, ids, statuses, nextStages,
			results, errs, codes, runAts, strategies, attemptNos, stages, now, granted, leases)
		if err != nil {
			return err
		}
		applied, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("complete items: %w", err)
		}
		done := make(map[int64]bool, len(applied))
		for _, id := range applied {
			done[id] = true
		}
		handedOff := make(map[int64]bool, len(handOffJobs))
		for k, id := range ids {
			if granted[k] {
				handedOff[id] = true
			}
		}
		d := deltas{}
		var (
			aItems, aJobs, aStarted, aUS []int64
			aNo, aStage                  []int32
			aOutcome                     []string
			aClass, aErr, aDetail        []*string
		)
		for _, id := range ids {
			o := &p.Outcomes[byItem[id]]
			if !done[id] {
				res.Stale = append(res.Stale, id)
				continue
			}
			res.Applied++
			jd := d.of(o.JobID)
			jd.requests++
			if handedOff[id] {
				// Still PROCESSING, one more attempt begun.
				res.HandedOff = append(res.HandedOff, id)
			} else {
				jd.counts.Processing--
				jd.counts.Add(o.Status, 1)
				if o.Status == engine.ItemPending {
					wake = true
				}
			}
			started := o.StartedAt
			if started.IsZero() {
				started = p.Now
			}
			aItems, aJobs = append(aItems, o.ItemID), append(aJobs, o.JobID)
			aNo, aStage = append(aNo, int32(o.Attempt)), append(aStage, int32(o.Stage))
			aStarted, aUS = append(aStarted, ms(started)), append(aUS, o.Duration.Microseconds())
			aOutcome = append(aOutcome, string(o.Status))
			aClass, aErr, aDetail = append(aClass, nullStr(string(o.ErrorClass))), append(aErr, nullStr(o.Error)), append(aDetail, nullJSON(o.Detail))
		}
		res.Stale = append(res.Stale, dupes...)
		if len(aItems) > 0 {
			if _, err := tx.Exec(ctx, insertAttemptsSQL, nullStr(p.WorkerID), now, aItems, aJobs, aNo, aStage, aStarted,
				aOutcome, aClass, aErr, aUS, aDetail); err != nil {
				return fmt.Errorf("record attempts: %w", err)
			}
		}
		finished, err := applyDeltas(ctx, tx, d, now)
		res.Finished = finished
		if err != nil {
			return err
		}
		kind := wakeChange
		if wake {
			kind = wakeWork
		}
		return s.notify(ctx, tx, kind)
	})
	if err != nil {
		return nil, fmt.Errorf("complete items: %w", err)
	}
	return res, nil
}

// applyDeltas bumps job counters and finishes jobs that have nothing left.
// Each UPDATE locks its job's row until the commit, in id order, so that
// transactions touching several jobs never wait for each other in a cycle;
// it reads the counters it decides on from its own UPDATE.
func applyDeltas(ctx context.Context, tx pgx.Tx, d deltas, now int64) ([]int64, error) {
	ids := make([]int64, 0, len(d))
	for id := range d {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var finished []int64
	for _, id := range ids {
		c := d[id].counts
		var pending, processing, requests, limit int64
		var state string
		err := tx.QueryRow(ctx, `UPDATE jobs SET pending_items = pending_items + $1, processing_items = processing_items + $2,
				done_items = done_items + $3, error_items = error_items + $4, not_found_items = not_found_items + $5,
				skipped_items = skipped_items + $6, attempts = attempts + $7, updated_at = $8
			WHERE id = $9 RETURNING pending_items, processing_items, queue_state, attempts, request_limit`,
			c.Pending, c.Processing, c.Done, c.Error, c.NotFound, c.Skipped, d[id].requests, now, id).
			Scan(&pending, &processing, &state, &requests, &limit)
		if noRows(err) {
			continue // the job was deleted meanwhile; its rows went with it
		}
		if err != nil {
			return nil, fmt.Errorf("update counters of job %d: %w", id, err)
		}
		runnable := state == string(engine.JobQueued) || state == string(engine.JobRunning)
		switch {
		case runnable && pending == 0 && processing == 0:
			if _, err := tx.Exec(ctx, `UPDATE jobs SET queue_state = 'DONE', finished_at = $1 WHERE id = $2`, now, id); err != nil {
				return nil, fmt.Errorf("finish job %d: %w", id, err)
			}
			finished = append(finished, id)
		case runnable && limit > 0 && requests >= limit && pending > 0:
			reason := fmt.Sprintf("spending cap reached: %d requests (the pipeline's maxRequestsPerJob); resume to allow more", requests)
			if _, err := tx.Exec(ctx, `UPDATE jobs SET queue_state = 'PAUSED', last_error = $1 WHERE id = $2`, reason, id); err != nil {
				return nil, fmt.Errorf("pause job %d: %w", id, err)
			}
		}
	}
	return finished, nil
}
