package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/engine"
)

const (
	// claimJobsSQL picks the jobs that compete for one claim's shares, as
	// on SQLite: runnable jobs with a due item, under their request
	// limit, under the in-flight limit ($4), of users not at theirs ($5),
	// longest unclaimed first (higher priority first). "A due item" is
	// asked as the job's earliest PENDING updated_at, which the planner
	// always reads as the first entry of the job's range of
	// job_items_job_status_updated; written as EXISTS, it chose a
	// sequential scan of job_items while most rows were PENDING, which
	// read through every item already claimed in a drain (tens of
	// milliseconds per claim by its end).
	claimJobsSQL = `SELECT id, request_limit, pipeline FROM jobs
		WHERE queue_state IN ('QUEUED', 'RUNNING') AND pending_items > 0
		AND (request_limit = 0 OR attempts + processing_items < request_limit)
		AND ($3::bigint = 0 OR id = $3)
		AND ($4::bigint = 0 OR processing_items < $4)
		AND NOT (user_id = ANY($5::bigint[]))
		AND (SELECT min(updated_at) FROM job_items WHERE job_items.job_id = jobs.id AND status = 'PENDING') <= $1
		ORDER BY priority DESC, claim_ticket, id LIMIT $2`
	// lockJobsSQL locks the chosen jobs in id order and reads their
	// counters as they are now: a claim that must respect a budget (a
	// spending cap, an in-flight limit) reads it and takes the items under
	// the lock, so that two claims never both spend the last of it.
	lockJobsSQL = `SELECT id, user_id, request_limit, attempts, processing_items, pending_items,
			queue_state IN ('QUEUED', 'RUNNING')
		FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE`
	// userInFlightSQL reads the PROCESSING items of unfinished jobs, to
	// sum per user.
	userInFlightSQL = `SELECT user_id, processing_items FROM jobs
		WHERE queue_state IN ('QUEUED', 'RUNNING', 'PAUSED', 'CANCELED') AND processing_items > 0`
	// claimItemsSQL is seed 003's claim: due PENDING items of one job in
	// (updated_at, id) order, locked with SKIP LOCKED, taken in one UPDATE.
	claimItemsSQL = `WITH c AS (
			SELECT ctid FROM job_items
			WHERE job_id = $1 AND status = 'PENDING' AND updated_at <= $2
			ORDER BY updated_at, id LIMIT $3
			FOR UPDATE SKIP LOCKED)` + claimUpdateSQL
	// claimStage0SQL is claimItemsSQL for a job that also has items at
	// later stages: stage 0 first (strict stage order).
	claimStage0SQL = `WITH c AS (
			SELECT ctid FROM job_items
			WHERE job_id = $1 AND status = 'PENDING' AND updated_at <= $2 AND stage = 0
			ORDER BY updated_at, id LIMIT $3
			FOR UPDATE SKIP LOCKED)` + claimUpdateSQL
	// claimLaterSQL claims the due items of one later stage ($6) of a job,
	// from the index of PENDING items past stage 0.
	claimLaterSQL = `WITH c AS (
			SELECT ctid FROM job_items
			WHERE job_id = $1 AND status = 'PENDING' AND stage > 0 AND stage = $6 AND updated_at <= $2
			ORDER BY updated_at, id LIMIT $3
			FOR UPDATE SKIP LOCKED)` + claimUpdateSQL
	// claimUpdateSQL takes the rows c locked, by their tuple ids (a TID
	// scan): joined by id, the planner hashed the whole of job_items for
	// every claim. A locked row cannot move before the commit, so its tuple
	// id stays good; a row c had to follow to a version newer than the
	// statement's snapshot (changed and committed meanwhile) is not seen by
	// the update and stays as it is, locked until the commit, not claimed.
	claimUpdateSQL = `
		UPDATE job_items i SET status = 'PROCESSING', locked_by = $4, locked_at = $2, lease_expires_at = $5,
			attempts = i.attempts + 1, updated_at = $2
		WHERE i.ctid = ANY(ARRAY(SELECT ctid FROM c))
		RETURNING i.id, i.job_id, i.user_id, i.pipeline, i.seq, i.stage, COALESCE(i.normalized_json, i.input_json),
			i.result_json, i.attempts, i.strategy, i.run_at`
	// laterStageSQL finds a job's next stage above $2 with PENDING items
	// past stage 0 (one probe of job_items_later_stages).
	laterStageSQL = `SELECT MIN(stage) FROM job_items WHERE job_id = $1 AND status = 'PENDING' AND stage > 0 AND stage > $2`
	// stageInFlightSQL counts the PROCESSING items of the pipelines with a
	// bounded stage, by stage.
	stageInFlightSQL = `SELECT pipeline, stage, count(*) FROM job_items
		WHERE status = 'PROCESSING' AND pipeline = ANY($1) GROUP BY pipeline, stage`
	// claimJobSQL moves a job's counters by what one claim took and sends
	// the job to the back of the line.
	claimJobSQL = `UPDATE jobs SET pending_items = pending_items - $1, processing_items = processing_items + $1,
		queue_state = CASE WHEN $1 > 0 AND queue_state = 'QUEUED' THEN 'RUNNING' ELSE queue_state END,
		started_at = CASE WHEN $1 > 0 THEN COALESCE(started_at, $2) ELSE started_at END,
		claim_ticket = nextval('claim_tickets'), updated_at = CASE WHEN $1 > 0 THEN $2 ELSE updated_at END
	WHERE id = $3`
	// perUserLock serialises claims under a per-user limit: the limit
	// spans jobs, so one job's row lock cannot guard it.
	perUserLock = 1
	// perStageLock serialises claims under stage limits, which span jobs
	// and workers.
	perStageLock = 2
)

// claimJob is a job chosen for a claim, as read under its row lock.
type claimJob struct {
	id, user                             int64
	limit, requests, processing, pending int64
	runnable                             bool
}

// ClaimItems claims due items fairly across runnable jobs: it takes the
// runnable jobs that have waited longest since their last claim (higher
// priority first) and gives each an equal share of the limit.
func (s *Store) ClaimItems(ctx context.Context, p *engine.ClaimItemsParams) ([]*engine.Item, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	maxJobs := p.MaxJobs
	if maxJobs <= 0 {
		maxJobs = 8
	}
	now := ms(p.Now)
	lease := ms(p.Now.Add(p.LeaseFor))
	var out []*engine.Item
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		// A claim need not survive a crash of the server: one lost that
		// way leaves its items PENDING, as if the worker had died, and the
		// worker's outcomes for them are refused as stale. Its commit skips
		// the wait for the WAL flush, most of an idle worker's pickup time.
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return err
		}
		// userLeft: how many more items each user may have in flight
		// (only with a per-user limit; users at it are left out).
		var userLeft map[int64]int
		blocked := []int64{}
		if p.MaxInFlightPerUser > 0 {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, s.lockSpace, perUserLock); err != nil {
				return err
			}
			var err error
			if userLeft, blocked, err = userInFlight(ctx, tx, p.MaxInFlightPerUser); err != nil {
				return err
			}
		}
		var budgets engine.StageBudgets
		if len(p.StageLimits) > 0 {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, s.lockSpace, perStageLock); err != nil {
				return err
			}
			var err error
			if budgets, err = stageBudgets(ctx, tx, p.StageLimits); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, claimJobsSQL, now, maxJobs, p.JobID, max(p.MaxInFlightPerJob, 0), blocked)
		if err != nil {
			return err
		}
		var order []int64
		budgeted := p.MaxInFlightPerJob > 0 || p.MaxInFlightPerUser > 0
		pipeline := map[int64]string{}
		for rows.Next() {
			var id, limit int64
			var pipe string
			if err := rows.Scan(&id, &limit, &pipe); err != nil {
				rows.Close()
				return err
			}
			order = append(order, id)
			pipeline[id] = pipe
			budgeted = budgeted || limit > 0
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(order) == 0 {
			return err
		}
		jobs := order
		// budget: how many more items a job with a spending cap or an
		// in-flight limit may have claimed, from its counters as locked.
		budget := map[int64]int{}
		owner := map[int64]int64{}
		if budgeted {
			if jobs, err = s.lockBudgets(ctx, tx, p, order, budget, owner, userLeft); err != nil {
				return err
			}
		}
		// took: items taken per job, of every job that had a share to take.
		took := make(map[int64]int, len(jobs))
		claimOne := func(jobID int64, limit int) (int, error) {
			if b, capped := budget[jobID]; capped {
				limit = min(limit, b)
			}
			if userLeft != nil {
				limit = min(limit, userLeft[owner[jobID]])
			}
			if limit <= 0 {
				return 0, nil
			}
			n, err := claimJobItems(ctx, tx, jobID, pipeline[jobID], limit, budgets, p.WorkerID, now, lease, &out)
			if err != nil {
				return 0, err
			}
			if b, capped := budget[jobID]; capped {
				budget[jobID] = b - n
			}
			if userLeft != nil {
				userLeft[owner[jobID]] -= n
			}
			took[jobID] += n
			return n, nil
		}
		if err := engine.SpreadClaim(jobs, p.Limit, claimOne); err != nil {
			return err
		}
		// The counters move last, job by job in id order: the job rows are
		// locked only from here to the commit, and never in an order that
		// could deadlock with another claim or a completion. A job moves to
		// the back of the line also when none of its items was due, so
		// that jobs waiting only for retries do not crowd out the others.
		ids := slices.Sorted(maps.Keys(took))
		for _, id := range ids {
			if _, err := tx.Exec(ctx, claimJobSQL, took[id], now, id); err != nil {
				return err
			}
		}
		if len(out) > 0 {
			return s.notify(ctx, tx, wakeChange)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim items: %w", err)
	}
	return out, nil
}

// lockBudgets locks the jobs of a budgeted claim in id order, drops those
// that stopped being runnable since they were picked, and fills each job's
// budget and owner from its counters as locked. It returns the jobs left,
// in the pick's order.
func (s *Store) lockBudgets(ctx context.Context, tx pgx.Tx, p *engine.ClaimItemsParams, order []int64,
	budget map[int64]int, owner map[int64]int64, userLeft map[int64]int) ([]int64, error) {
	rows, err := tx.Query(ctx, lockJobsSQL, order)
	if err != nil {
		return nil, err
	}
	locked := map[int64]*claimJob{}
	for rows.Next() {
		j := &claimJob{}
		if err := rows.Scan(&j.id, &j.user, &j.limit, &j.requests, &j.processing, &j.pending, &j.runnable); err != nil {
			rows.Close()
			return nil, err
		}
		locked[j.id] = j
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var jobs []int64
	for _, id := range order {
		j := locked[id]
		if j == nil || !j.runnable || j.pending <= 0 {
			continue // changed between the pick and the lock
		}
		jobs = append(jobs, id)
		owner[id] = j.user
		if j.limit > 0 {
			budget[id] = int(j.limit - j.requests - j.processing)
		}
		if p.MaxInFlightPerJob > 0 {
			b := p.MaxInFlightPerJob - int(j.processing)
			if old, capped := budget[id]; !capped || b < old {
				budget[id] = b
			}
		}
		if userLeft != nil {
			if _, seen := userLeft[j.user]; !seen {
				userLeft[j.user] = p.MaxInFlightPerUser
			}
		}
	}
	return jobs, nil
}

// userInFlight returns how many more items each user with items in flight
// may have claimed under limit, and the users at it.
func userInFlight(ctx context.Context, tx pgx.Tx, limit int) (map[int64]int, []int64, error) {
	rows, err := tx.Query(ctx, userInFlightSQL)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	left := map[int64]int{}
	for rows.Next() {
		var user, processing int64
		if err := rows.Scan(&user, &processing); err != nil {
			return nil, nil, err
		}
		if _, seen := left[user]; !seen {
			left[user] = limit
		}
		left[user] -= int(processing)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	full := []int64{}
	for user, n := range left {
		if n <= 0 {
			full = append(full, user)
		}
	}
	return left, full, nil
}

// stageBudgets reads how many more items each bounded stage may have in
// flight; the caller holds perStageLock.
func stageBudgets(ctx context.Context, tx pgx.Tx, limits []engine.StageLimit) (engine.StageBudgets, error) {
	budgets := engine.NewStageBudgets(limits)
	rows, err := tx.Query(ctx, stageInFlightSQL, budgets.Pipelines())
	if err != nil {
		return nil, fmt.Errorf("count items in flight by stage: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var pipeline string
		var stage int32
		var n int64
		if err := rows.Scan(&pipeline, &stage, &n); err != nil {
			return nil, err
		}
		budgets.Spend(pipeline, int(stage), int(n))
	}
	return budgets, rows.Err()
}

// claimJobItems claims up to limit due items of one job, earlier stages
// first (engine.ClaimInStageOrder). A job with nothing past stage 0 and no
// bound on stage 0 (every single-stage job) takes the one-query path.
func claimJobItems(ctx context.Context, tx pgx.Tx, jobID int64, pipeline string, limit int,
	budgets engine.StageBudgets, worker string, now, lease int64, out *[]*engine.Item) (int, error) {
	next := func(after int) (int, bool, error) {
		var st *int32
		err := tx.QueryRow(ctx, laterStageSQL, jobID, after).Scan(&st)
		if err != nil || st == nil {
			return 0, false, err
		}
		return int(*st), true, nil
	}
	return engine.ClaimInStageOrder(limit, pipeline, budgets, next, func(stage, n int) (int, error) {
		switch stage {
		case engine.AllStages:
			return claimFromJob(ctx, tx, claimItemsSQL, out, jobID, n, worker, now, lease)
		case 0:
			return claimFromJob(ctx, tx, claimStage0SQL, out, jobID, n, worker, now, lease)
		}
		return claimFromJob(ctx, tx, claimLaterSQL, out, jobID, n, worker, now, lease, stage)
	})
}

// claimFromJob runs one claim statement ($1 job, $2 now, $3 limit, $4
// worker, $5 lease, then extra) and appends the items it took to out, in
// run_at, id order.
func claimFromJob(ctx context.Context, tx pgx.Tx, query string, out *[]*engine.Item, jobID int64, limit int, worker string,
	now, lease int64, extra ...any) (int, error) {
	rows, err := tx.Query(ctx, query, append([]any{jobID, now, limit, worker, lease}, extra...)...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	start := len(*out)
	lockedAt := fromMS(now)
	leaseAt := fromMS(lease)
	for rows.Next() {
		it := &engine.Item{Status: engine.ItemProcessing, LockedBy: worker, LockedAt: &lockedAt, LeaseExpiresAt: &leaseAt,
			UpdatedAt: lockedAt}
		var norm, result *string
		var runAt int64
		if err := rows.Scan(&it.ID, &it.JobID, &it.UserID, &it.Pipeline, &it.Seq, &it.Stage, &norm, &result,
			&it.Attempts, &it.Strategy, &runAt); err != nil {
			return 0, err
		}
		if norm != nil {
			it.Normalized = []byte(*norm)
		}
		if result != nil {
			it.Result = []byte(*result)
		}
		it.RunAt = fromMS(runAt)
		*out = append(*out, it)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	// RETURNING gives no order; hand items out in run_at, id order.
	claimed := (*out)[start:]
	slices.SortFunc(claimed, func(a, b *engine.Item) int {
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return int(a.ID - b.ID)
	})
	return len(claimed), nil
}

// RenewLeases extends the leases the worker still holds.
func (s *Store) RenewLeases(ctx context.Context, p *engine.RenewLeasesParams) (int, error) {
	if len(p.ItemIDs) == 0 {
		return 0, nil
	}
	// SKIP LOCKED: an item being completed right now needs no renewal, and
	// waiting for it could deadlock with the completion's own row order.
	n, err := exec(ctx, s.pool, `UPDATE job_items SET lease_expires_at = ?
		WHERE id IN (SELECT id FROM job_items WHERE id = ANY(?) AND locked_by = ? AND status = 'PROCESSING'
			FOR UPDATE SKIP LOCKED)`, ms(p.Now.Add(p.LeaseFor)), p.ItemIDs, p.WorkerID)
	if err != nil {
		return 0, fmt.Errorf("renew leases: %w", err)
	}
	return int(n), nil
}

// QueueSummary reports what is left to do. DONE and FAILED jobs hold no
// pending or processing items, so only the others are read.
func (s *Store) QueueSummary(ctx context.Context, now time.Time) (*engine.QueueSummary, error) {
	var q engine.QueueSummary
	var pending int64
	var next *int64
	err := s.pool.QueryRow(ctx, `SELECT
			COALESCE(SUM(CASE WHEN queue_state IN ('QUEUED', 'RUNNING') THEN pending_items END), 0)::bigint,
			COALESCE(SUM(processing_items), 0)::bigint,
			count(*) FILTER (WHERE queue_state = 'INGESTING')
		FROM jobs WHERE queue_state IN ('INGESTING', 'QUEUED', 'RUNNING', 'PAUSED', 'CANCELED')`).Scan(&pending, &q.Processing, &q.Ingesting)
	if err != nil {
		return nil, fmt.Errorf("queue summary: %w", err)
	}
	if pending > 0 {
		err = s.pool.QueryRow(ctx, `SELECT count(*) FROM job_items
			WHERE job_id IN (SELECT id FROM jobs WHERE queue_state IN ('QUEUED', 'RUNNING') AND pending_items > 0)
			AND status = 'PENDING' AND updated_at <= $1`, ms(now)).Scan(&q.Due)
		if err != nil {
			return nil, fmt.Errorf("queue summary: %w", err)
		}
		q.Later = max(pending-q.Due, 0)
		if q.Later > 0 {
			err = s.pool.QueryRow(ctx, `SELECT min(updated_at) FROM job_items
				WHERE job_id IN (SELECT id FROM jobs WHERE queue_state IN ('QUEUED', 'RUNNING') AND pending_items > 0)
				AND status = 'PENDING' AND updated_at > $1`, ms(now)).Scan(&next)
			if err != nil {
				return nil, fmt.Errorf("queue summary: %w", err)
			}
			q.NextRunAt = fromNullMS(next)
		}
	}
	return &q, nil
}
