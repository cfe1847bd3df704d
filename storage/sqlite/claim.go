package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// The claims return only the ids they took: ClaimItems reads the items
// after the commit, on the read pool (claimedItemsSQL), so that the one
// write connection, the queue's bottleneck, neither copies their payloads
// nor hands their columns over row by row (docs/BENCHMARKS.md).
const claimItemsSQL = `UPDATE job_items SET status = 1 /* PROCESSING */, locked_by = ?, locked_at = ?, lease_expires_at = ?,
		attempts = attempts + 1, updated_at = ?
	WHERE id IN (SELECT id FROM job_items INDEXED BY job_items_job_status_updated
		WHERE job_id = ? AND status = 0 /* PENDING */ AND updated_at <= ? ORDER BY updated_at, id LIMIT ?)
	RETURNING id`

// claimStage0SQL is claimItemsSQL for a job that also has items at later
// stages: stage 0 first (strict stage order).
const claimStage0SQL = `UPDATE job_items SET status = 1 /* PROCESSING */, locked_by = ?, locked_at = ?, lease_expires_at = ?,
		attempts = attempts + 1, updated_at = ?
	WHERE id IN (SELECT id FROM job_items INDEXED BY job_items_job_status_updated
		WHERE job_id = ? AND status = 0 /* PENDING */ AND updated_at <= ? AND stage = 0 ORDER BY updated_at, id LIMIT ?)
	RETURNING id`

// claimLaterSQL claims the due items of one later stage of a job, from the
// index of PENDING items past stage 0.
const claimLaterSQL = `UPDATE job_items SET status = 1 /* PROCESSING */, locked_by = ?, locked_at = ?, lease_expires_at = ?,
		attempts = attempts + 1, updated_at = ?
	WHERE id IN (SELECT id FROM job_items INDEXED BY job_items_later_stages
		WHERE job_id = ? AND status = 0 /* PENDING */ AND stage > 0 AND stage = ? AND updated_at <= ? ORDER BY updated_at, id LIMIT ?)
	RETURNING id`

// laterStageSQL finds a job's next stage above ? with PENDING items (due
// or not), past stage 0: one seek in job_items_later_stages.
const laterStageSQL = `SELECT MIN(stage) FROM job_items INDEXED BY job_items_later_stages
	WHERE job_id = ? AND status = 0 /* PENDING */ AND stage > 0 AND stage > ?`

// stageInFlightSQL counts the PROCESSING items of the pipelines (a JSON
// array) with a bounded stage, by stage. The items in flight are few (the
// workers' claims): the jobs that hold any are found by their counter, and
// their items in flight by the per-job index.
const stageInFlightSQL = `SELECT i.pipeline, i.stage, count(*)
	FROM jobs j INDEXED BY jobs_runnable
	JOIN job_items i INDEXED BY job_items_job_status_updated ON i.job_id = j.id AND i.status = 1 /* PROCESSING */
	WHERE ` + jobsInFlight + `
	AND j.pipeline IN (SELECT value FROM json_each(?)) GROUP BY i.pipeline, i.stage`

const (
	// Only jobs with a due item compete for the claim's shares: jobs whose
	// pending items are all retries scheduled for later would otherwise
	// take the slots (by priority) and claim nothing.
	//
	// Jobs at their in-flight limit (?4), and jobs of users at theirs (the
	// JSON array ?5), do not compete either.
	claimJobsSQL = `SELECT id, user_id, pipeline, request_limit, attempts, processing_items FROM jobs
		WHERE queue_state IN ('QUEUED', 'RUNNING') AND pending_items > 0
		AND (request_limit = 0 OR attempts + processing_items < request_limit)
		AND (?3 = 0 OR id = ?3)
		AND (?4 = 0 OR processing_items < ?4)
		AND user_id NOT IN (SELECT value FROM json_each(?5))
		AND EXISTS (SELECT 1 FROM job_items INDEXED BY job_items_job_status_updated
			WHERE job_items.job_id = jobs.id AND status = 0 /* PENDING */ AND updated_at <= ?1)
		ORDER BY priority DESC, claim_ticket, id LIMIT ?2`
	// lastTicketSQL reads the largest ticket a job that may still be
	// claimed holds (see ticketClock).
	lastTicketSQL = `SELECT COALESCE(MAX(claim_ticket), 0) FROM jobs INDEXED BY jobs_runnable
		WHERE queue_state IN ('INGESTING', 'QUEUED', 'RUNNING', 'PAUSED')`
	// jobsInFlight selects the jobs that have items in flight. Only
	// unfinished jobs can hold any (DONE jobs have none, FAILED ones lost
	// their rows), so with the jobs_runnable index it reads only them. Its
	// columns are unqualified: job_items has none of these names.
	jobsInFlight = `queue_state IN ('QUEUED', 'RUNNING', 'PAUSED', 'CANCELED') AND processing_items > 0`
	// userInFlightSQL reads the PROCESSING items of jobs, to sum per user.
	userInFlightSQL = `SELECT user_id, processing_items FROM jobs INDEXED BY jobs_runnable WHERE ` + jobsInFlight
	// inFlightJobsSQL lists the jobs of some users (a JSON array) that have
	// items in flight.
	inFlightJobsSQL = `SELECT id FROM jobs INDEXED BY jobs_runnable WHERE ` + jobsInFlight + `
		AND user_id IN (SELECT value FROM json_each(?))`
	claimJobSQL = `UPDATE jobs SET pending_items = pending_items - ?, processing_items = processing_items + ?,
		queue_state = CASE WHEN ? > 0 AND queue_state = 'QUEUED' THEN 'RUNNING' ELSE queue_state END,
		started_at = CASE WHEN ? > 0 THEN COALESCE(started_at, ?) ELSE started_at END,
		claim_ticket = ?, updated_at = CASE WHEN ? > 0 THEN ? ELSE updated_at END
	WHERE id = ?`
)

// ClaimItems claims due items fairly across runnable jobs: it takes the
// runnable jobs that have waited longest since their last claim (higher
// priority first) and gives each an equal share of the limit. Within a
// job, due items of earlier stages go first, and no stage is taken past
// its in-flight limit (StageLimits).
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
	var out claimOut
	// A claim need not survive power loss (see lightTx): its commit skips
	// the fsync, which is most of an idle worker's pickup latency.
	err := s.lightTx(ctx, func(tx *sql.Tx) error {
		out = claimOut{}
		// userLeft: how many more items each user may have in flight
		// (only with a per-user limit; users at it are left out).
		var userLeft map[int64]int
		blocked := "[]"
		if p.MaxInFlightPerUser > 0 {
			var err error
			if userLeft, blocked, err = userInFlight(ctx, tx, p.MaxInFlightPerUser); err != nil {
				return err
			}
		}
		budgets, err := stageBudgets(ctx, tx, p.StageLimits)
		if err != nil {
			return err
		}
		rows, err := tx.StmtContext(ctx, s.claimJobs).QueryContext(ctx, now, maxJobs, p.JobID, max(p.MaxInFlightPerJob, 0), blocked)
		if err != nil {
			return err
		}
		var jobs []int64
		// budget: how many more items a job with a spending cap or an
		// in-flight limit may have claimed (its request limit less what ran
		// and what is running; its in-flight limit less what is running).
		budget := map[int64]int{}
		owner := map[int64]int64{}
		pipeline := map[int64]string{}
		for rows.Next() {
			var id, user, limit, requests, processing int64
			var pipe string
			if err := rows.Scan(&id, &user, &pipe, &limit, &requests, &processing); err != nil {
				rows.Close()
				return err
			}
			jobs = append(jobs, id)
			owner[id] = user
			pipeline[id] = pipe
			if limit > 0 {
				budget[id] = int(limit - requests - processing)
			}
			if p.MaxInFlightPerJob > 0 {
				b := p.MaxInFlightPerJob - int(processing)
				if old, capped := budget[id]; !capped || b < old {
					budget[id] = b
				}
			}
			if userLeft != nil {
				if _, seen := userLeft[user]; !seen {
					userLeft[user] = p.MaxInFlightPerUser
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// Each job that gets a share moves to the back of the line with a
		// fresh ticket.
		claimJob := func(jobID int64, limit int) (int, error) {
			if b, capped := budget[jobID]; capped {
				limit = min(limit, b)
			}
			if userLeft != nil {
				limit = min(limit, userLeft[owner[jobID]])
			}
			if limit <= 0 {
				return 0, nil
			}
			n, err := s.claimJobItems(ctx, tx, jobID, pipeline[jobID], limit, budgets, p.WorkerID, now, lease, &out)
			if err != nil {
				return 0, err
			}
			if b, capped := budget[jobID]; capped {
				budget[jobID] = b - n
			}
			if userLeft != nil {
				userLeft[owner[jobID]] -= n
			}
			// A job moves to the back of the line also when none of its
			// items was due, so that jobs waiting only for retries do not
			// crowd out the others.
			if _, err := tx.StmtContext(ctx, s.claimJob).ExecContext(ctx, n, n, n, n, now, s.tickets.next(), n, now, jobID); err != nil {
				return 0, err
			}
			return n, nil
		}
		return engine.SpreadClaim(jobs, p.Limit, claimJob)
	})
	if err != nil {
		return nil, fmt.Errorf("claim items: %w", err)
	}
	// The claim has committed: its items are read even if ctx ends now,
	// or they would sit PROCESSING until their leases ran out. Should the
	// read fail, they do: the reaper gives them back then, as for a worker
	// that died.
	items, err := s.claimedItems(context.WithoutCancel(ctx), &out, p.WorkerID, now, lease)
	if err != nil {
		return nil, fmt.Errorf("claim items: %w", err)
	}
	return items, nil
}

// claimOut collects the ids one ClaimItems took, in runs: one run per
// claim statement (a job, or one stage of a job), in the order run.
type claimOut struct {
	ids    []int64
	starts []int
}

// claimedItemsSQL reads claimed items by id (a JSON array).
const claimedItemsSQL = `SELECT id, job_id, user_id, pipeline, seq, stage, attempts, strategy, run_at,
		COALESCE(normalized_json, input_json), result_json
	FROM job_items WHERE id IN (SELECT value FROM json_each(?))`

// claimedItems reads the items a claim took from a read connection, after
// the claim committed, and returns them run by run, each run in run_at, id
// order. What is read cannot change while an item is claimed (only its
// lease holder moves it on), except by the deletion of its job: such items
// are left out, as they no longer exist.
func (s *Store) claimedItems(ctx context.Context, out *claimOut, worker string, now, lease int64) ([]*engine.Item, error) {
	if len(out.ids) == 0 {
		return nil, nil
	}
	list := make([]byte, 0, 8*len(out.ids))
	list = append(list, '[')
	for i, id := range out.ids {
		if i > 0 {
			list = append(list, ',')
		}
		list = strconv.AppendInt(list, id, 10)
	}
	list = append(list, ']')
	st, err := s.reads.get(ctx, claimedItemsSQL)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, string(list))
	if err != nil {
		return nil, fmt.Errorf("read claimed items: %w", err)
	}
	defer rows.Close()
	lockedAt, leaseAt := fromMS(now), fromMS(lease)
	byID := make(map[int64]*engine.Item, len(out.ids))
	for rows.Next() {
		it := &engine.Item{Status: engine.ItemProcessing, LockedBy: worker, LockedAt: &lockedAt, LeaseExpiresAt: &leaseAt,
			UpdatedAt: lockedAt}
		var runAt int64
		var norm, result []byte
		if err := rows.Scan(&it.ID, &it.JobID, &it.UserID, &it.Pipeline, &it.Seq, &it.Stage,
			&it.Attempts, &it.Strategy, &runAt, &norm, &result); err != nil {
			return nil, err
		}
		it.RunAt, it.Normalized, it.Result = fromMS(runAt), norm, result
		byID[it.ID] = it
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read claimed items: %w", err)
	}
	items := make([]*engine.Item, 0, len(byID))
	for r, start := range out.starts {
		end := len(out.ids)
		if r+1 < len(out.starts) {
			end = out.starts[r+1]
		}
		first := len(items)
		for _, id := range out.ids[start:end] {
			if it := byID[id]; it != nil {
				items = append(items, it)
			}
		}
		// RETURNING gives no order; hand items out in run_at, id order.
		slices.SortFunc(items[first:], func(a, b *engine.Item) int {
			if c := a.RunAt.Compare(b.RunAt); c != 0 {
				return c
			}
			return int(a.ID - b.ID)
		})
	}
	return items, nil
}

// userInFlight returns how many more items each user with items in flight
// may have claimed under limit, and the users at it as a JSON array.
func userInFlight(ctx context.Context, tx *sql.Tx, limit int) (map[int64]int, string, error) {
	rows, err := tx.QueryContext(ctx, userInFlightSQL)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	left := map[int64]int{}
	for rows.Next() {
		var user, processing int64
		if err := rows.Scan(&user, &processing); err != nil {
			return nil, "", err
		}
		if _, seen := left[user]; !seen {
			left[user] = limit
		}
		left[user] -= int(processing)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	var full []int64
	for user, n := range left {
		if n <= 0 {
			full = append(full, user)
		}
	}
	b, err := json.Marshal(full)
	if full == nil {
		b = []byte("[]")
	}
	return left, string(b), err
}

// stageBudgets reads how many more items each bounded stage may have in
// flight (nil without limits).
func stageBudgets(ctx context.Context, tx *sql.Tx, limits []engine.StageLimit) (engine.StageBudgets, error) {
	budgets := engine.NewStageBudgets(limits)
	if budgets == nil {
		return nil, nil
	}
	names, err := json.Marshal(budgets.Pipelines())
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, stageInFlightSQL, string(names))
	if err != nil {
		return nil, fmt.Errorf("count items in flight by stage: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var pipeline string
		var stage, n int
		if err := rows.Scan(&pipeline, &stage, &n); err != nil {
			return nil, err
		}
		budgets.Spend(pipeline, stage, n)
	}
	return budgets, rows.Err()
}

// claimJobItems claims up to limit due items of one job, earlier stages
// first (engine.ClaimInStageOrder). A job with nothing past stage 0 and no
// bound on stage 0 (every single-stage job) takes the one-query path.
func (s *Store) claimJobItems(ctx context.Context, tx *sql.Tx, jobID int64, pipeline string, limit int,
	budgets engine.StageBudgets, worker string, now, lease int64, out *claimOut) (int, error) {
	later := tx.StmtContext(ctx, s.laterStage)
	next := func(after int) (int, bool, error) {
		var st sql.NullInt64
		err := later.QueryRowContext(ctx, jobID, after).Scan(&st)
		return int(st.Int64), st.Valid, err
	}
	return engine.ClaimInStageOrder(limit, pipeline, budgets, next, func(stage, n int) (int, error) {
		switch stage {
		case engine.AllStages:
			return claimFromJob(ctx, tx.StmtContext(ctx, s.claim), out, worker, now, lease, jobID, now, n)
		case 0:
			return claimFromJob(ctx, tx.StmtContext(ctx, s.claimStage0), out, worker, now, lease, jobID, now, n)
		}
		return claimFromJob(ctx, tx.StmtContext(ctx, s.claimLater), out, worker, now, lease, jobID, stage, now, n)
	})
}

// claimFromJob runs one claim statement (its SET arguments from worker,
// now and lease, then the arguments of its WHERE) and adds the ids it took
// to out as one run.
func claimFromJob(ctx context.Context, stmt *sql.Stmt, out *claimOut, worker string, now, lease int64, where ...any) (int, error) {
	rows, err := stmt.QueryContext(ctx, append([]any{worker, now, lease, now}, where...)...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	start := len(out.ids)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return 0, err
		}
		out.ids = append(out.ids, id)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if n := len(out.ids) - start; n > 0 {
		out.starts = append(out.starts, start)
	}
	return len(out.ids) - start, nil
}

// RenewLeases extends the leases the worker still holds.
func (s *Store) RenewLeases(ctx context.Context, p *engine.RenewLeasesParams) (int, error) {
	if len(p.ItemIDs) == 0 {
		return 0, nil
	}
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		for chunk := range slices.Chunk(p.ItemIDs, 500) {
			args := []any{ms(p.Now.Add(p.LeaseFor)), p.WorkerID}
			for _, id := range chunk {
				args = append(args, id)
			}
			res, err := tx.ExecContext(ctx, `UPDATE job_items SET lease_expires_at = ?
				WHERE locked_by = ? AND status = 1 /* PROCESSING */ AND id IN (`+placeholders(len(chunk))+`)`, args...)
			if err != nil {
				return err
			}
			c, _ := res.RowsAffected()
			n += c
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("renew leases: %w", err)
	}
	return int(n), nil
}

// ChangeCounter returns SQLite's data_version as seen by one dedicated
// connection: it changes whenever any other connection commits.
func (s *Store) ChangeCounter(ctx context.Context) (int64, error) {
	var v int64
	if err := s.dv.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("data_version: %w", err)
	}
	return v, nil
}

// QueueSummary reports what is left to do (an idle runner asks after each
// empty claim: its reads are prepared once). DONE and FAILED jobs hold no
// pending or processing items, so only the others are read (by the state
// index, not the whole history of jobs).
func (s *Store) QueueSummary(ctx context.Context, now time.Time) (*engine.QueueSummary, error) {
	var q engine.QueueSummary
	var pending int64
	var next sql.NullInt64
	err := cachedReader{s}.QueryRowContext(ctx, `SELECT
			COALESCE(SUM(CASE WHEN queue_state IN ('QUEUED', 'RUNNING') THEN pending_items END), 0),
			COALESCE(SUM(processing_items), 0),
			COALESCE(SUM(queue_state = 'INGESTING'), 0)
		FROM jobs WHERE queue_state IN ('INGESTING', 'QUEUED', 'RUNNING', 'PAUSED', 'CANCELED')`).Scan(&pending, &q.Processing, &q.Ingesting)
	if err != nil {
		return nil, fmt.Errorf("queue summary: %w", err)
	}
	if pending > 0 {
		err = cachedReader{s}.QueryRowContext(ctx, `SELECT count(*) FROM job_items INDEXED BY job_items_job_status_updated
			WHERE job_id IN (SELECT id FROM jobs WHERE queue_state IN ('QUEUED', 'RUNNING') AND pending_items > 0)
			AND status = 0 /* PENDING */ AND updated_at <= ?`, ms(now)).Scan(&q.Due)
		if err != nil {
			return nil, fmt.Errorf("queue summary: %w", err)
		}
		q.Later = max(pending-q.Due, 0)
		if q.Later > 0 {
			err = cachedReader{s}.QueryRowContext(ctx, `SELECT min(updated_at) FROM job_items INDEXED BY job_items_job_status_updated
				WHERE job_id IN (SELECT id FROM jobs WHERE queue_state IN ('QUEUED', 'RUNNING') AND pending_items > 0)
				AND status = 0 /* PENDING */ AND updated_at > ?`, ms(now)).Scan(&next)
			if err != nil {
				return nil, fmt.Errorf("queue summary: %w", err)
			}
			q.NextRunAt = fromNullMS(next)
		}
	}
	return &q, nil
}

// ticketClock hands out claim tickets. A job's place in the claim line
// (claim_ticket, smallest first) is the moment it last went to the back of
// it: microseconds of the wall clock, never less than the last ticket plus
// one, so that a clock that stands still or steps back still gives rising
// tickets. Every process that opens the database reads the same clock, so
// their tickets interleave as their claims do; and each starts above the
// tickets of the jobs that may still be claimed (Open reads them), so a
// clock set back across a restart cannot keep those jobs waiting behind
// the new claims.
//
// A counter in the database would do as well but costs its page in every
// claim and every enqueue that claims (and MAX(claim_ticket) needs an
// index of its own): each page a commit changes is one more page it writes
// and syncs.
type ticketClock struct {
	mu   sync.Mutex
	last int64
}

// seed makes every later ticket larger than t.
func (c *ticketClock) seed(t int64) {
	c.mu.Lock()
	c.last = max(c.last, t)
	c.mu.Unlock()
}

// next returns a ticket larger than every ticket it returned before.
func (c *ticketClock) next() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = max(c.last+1, time.Now().UnixMicro())
	return c.last
}
