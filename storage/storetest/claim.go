package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// claimTests cover ClaimItems.
var claimTests = []subtest{
	{"Basic", testClaimBasic},
	{"StartsJob", testClaimStartsJob},
	{"LimitAndSeqOrder", testClaimLimitAndSeqOrder},
	{"RunAtOrder", testClaimRunAtOrder},
	{"NothingDue", testClaimNothingDue},
	{"OnlyRunnableJobs", testClaimOnlyRunnableJobs},
	{"NotBeforeRunAt", testClaimNotBeforeRunAt},
	{"Fairness", testClaimFairness},
	{"FairnessSmallLimit", testClaimFairnessSmallLimit},
	{"FairnessMaxJobs", testClaimFairnessMaxJobs},
	{"OneJob", testClaimOneJob},
}

// testClaimOneJob: a claim restricted to one job (a kickoff slice) takes
// only that job's items, even when other jobs wait longer.
func testClaimOneJob(t *testing.T, e *env) {
	a := e.queuedJob(5)
	b := e.queuedJob(5)
	got, err := e.s.ClaimItems(e.ctx, &engine.ClaimItemsParams{WorkerID: "w1", Limit: 10, LeaseFor: time.Minute, Now: e.now(), JobID: b.ID})
	require.NoError(t, err)
	require.Len(t, got, 5)
	for _, it := range got {
		require.Equal(t, b.ID, it.JobID)
	}
	got, err = e.s.ClaimItems(e.ctx, &engine.ClaimItemsParams{WorkerID: "w1", Limit: 10, LeaseFor: time.Minute, Now: e.now(), JobID: b.ID})
	require.NoError(t, err)
	require.Empty(t, got, "nothing of the job is left; the other job is not touched")
	require.Equal(t, int64(5), e.job(a.ID).Counts.Pending)
}

// testClaimBasic: claimed items are PROCESSING under the worker's lease,
// with their attempt counted and what a processor needs.
func testClaimBasic(t *testing.T, e *env) {
	j := e.queuedJob(5)
	e.advance(3 * time.Second)
	now := e.now()
	got, err := e.s.ClaimItems(e.ctx, &engine.ClaimItemsParams{WorkerID: "w1", Limit: 3, LeaseFor: 90 * time.Second, Now: now})
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, []int64{1, 2, 3}, seqs(got))
	for _, it := range got {
		require.Positive(t, it.ID)
		require.Equal(t, j.ID, it.JobID)
		require.Equal(t, e.user.ID, it.UserID)
		require.Equal(t, engine.DefaultPipeline, it.Pipeline)
		require.Equal(t, engine.ItemProcessing, it.Status)
		require.Equal(t, "w1", it.LockedBy)
		requireTimePtr(t, now, it.LockedAt, "LockedAt")
		requireTimePtr(t, now.Add(90*time.Second), it.LeaseExpiresAt, "LeaseExpiresAt")
		require.Equal(t, 1, it.Attempts)
		require.Zero(t, it.Stage)
		require.Zero(t, it.Strategy)
		requireJSON(t, normJSON(it.Seq), it.Normalized, "Normalized")

		stored := e.item(it.ID)
		require.Equal(t, engine.ItemProcessing, stored.Status)
		require.Equal(t, "w1", stored.LockedBy)
		requireTimePtr(t, now, stored.LockedAt, "stored LockedAt")
		requireTimePtr(t, now.Add(90*time.Second), stored.LeaseExpiresAt, "stored LeaseExpiresAt")
		require.Equal(t, 1, stored.Attempts)
	}
	e.requireCounts(j.ID, engine.ItemCounts{Pending: 2, Processing: 3})

	rest := e.claim("w2", 10)
	require.Equal(t, []int64{4, 5}, seqs(rest))
	for _, it := range rest {
		require.Equal(t, "w2", it.LockedBy)
	}
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 5})

	require.Empty(t, e.claim("w3", 10), "nothing left to claim")
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 5})
}

// testClaimStartsJob: the first claim moves a QUEUED job to RUNNING and
// sets StartedAt; later claims keep it.
func testClaimStartsJob(t *testing.T, e *env) {
	j := e.queuedJob(4)
	require.Nil(t, e.job(j.ID).StartedAt)
	e.advance(time.Second)
	started := e.now()
	require.Len(t, e.claim("w1", 1), 1)
	got := e.job(j.ID)
	require.Equal(t, engine.JobRunning, got.State)
	requireTimePtr(t, started, got.StartedAt, "StartedAt")

	e.advance(time.Second)
	require.Len(t, e.claim("w1", 1), 1)
	got = e.job(j.ID)
	require.Equal(t, engine.JobRunning, got.State)
	requireTimePtr(t, started, got.StartedAt, "StartedAt is the first claim's")
}

// testClaimLimitAndSeqOrder: Limit bounds a claim and fresh items of one job
// come in seq order.
func testClaimLimitAndSeqOrder(t *testing.T, e *env) {
	j := e.queuedJob(20)
	var claimed []int64
	for _, limit := range []int{7, 7, 7} {
		got := e.claim("w1", limit)
		require.LessOrEqual(t, len(got), limit)
		claimed = append(claimed, seqs(got)...)
	}
	require.Equal(t, seqRange(1, 20), claimed)
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 20})

	k := e.queuedJob(10)
	got := e.claim("w1", 4)
	require.Equal(t, []int64{1, 2, 3, 4}, seqs(got))
	for _, it := range got {
		require.Equal(t, k.ID, it.JobID)
	}
}

// testClaimRunAtOrder: within a job, an item retried later comes after the
// items that were due before it.
func testClaimRunAtOrder(t *testing.T, e *env) {
	j := e.queuedJob(3)
	e.advance(time.Second)
	first := e.claim("w1", 1)
	require.Len(t, first, 1)
	require.Equal(t, int64(1), first[0].Seq)
	o := e.outcome(first[0], engine.ItemPending)
	o.RunAt = e.now().Add(time.Minute)
	res := e.complete("w1", o)
	require.Equal(t, 1, res.Applied)

	e.advance(2 * time.Minute)
	got := e.claim("w1", 2)
	require.Equal(t, []int64{2, 3}, seqs(got), "the items due earlier come first")
	got = e.claim("w1", 2)
	require.Len(t, got, 1)
	require.Equal(t, first[0].ID, got[0].ID)
	require.Equal(t, 2, got[0].Attempts)
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 3})
}

// testClaimNothingDue: a claim with nothing due returns no items and no error.
func testClaimNothingDue(t *testing.T, e *env) {
	got, err := e.s.ClaimItems(e.ctx, &engine.ClaimItemsParams{WorkerID: "w1", Limit: 10, LeaseFor: time.Minute, Now: e.now()})
	require.NoError(t, err)
	require.Empty(t, got, "empty store")

	e.createJob() // INGESTING, no rows
	j := e.queuedJob(1)
	require.Len(t, e.claim("w1", 10), 1)
	got, err = e.s.ClaimItems(e.ctx, &engine.ClaimItemsParams{WorkerID: "w1", Limit: 10, LeaseFor: time.Minute, Now: e.now()})
	require.NoError(t, err)
	require.Empty(t, got, "everything claimed")
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 1})
}

// testClaimOnlyRunnableJobs: items of INGESTING, PAUSED, CANCELED, FAILED
// and DONE jobs are never claimed.
func testClaimOnlyRunnableJobs(t *testing.T, e *env) {
	ingesting := e.createJob(withName("ingesting"))
	e.insert(ingesting.ID, rows(1, 3))

	failed := e.createJob(withName("failed"))
	e.insert(failed.ID, rows(1, 3))
	_, err := e.s.FailJob(e.ctx, &engine.FailJobParams{JobID: failed.ID, Reason: "bad", Now: e.now()})
	require.NoError(t, err)

	setState := func(name string, to engine.JobState) *engine.Job {
		j := e.queuedJob(3, withName(name))
		_, err := e.s.SetJobState(e.ctx, &engine.SetJobStateParams{
			JobID: j.ID, From: []engine.JobState{engine.JobQueued}, To: to, Now: e.now(),
		})
		require.NoError(t, err, "SetJobState %s", to)
		return j
	}
	paused := setState("paused", engine.JobPaused)
	canceled := setState("canceled", engine.JobCanceled)
	done := setState("done", engine.JobDone)

	runnable := e.queuedJob(2, withName("runnable"))
	e.advance(time.Minute)

	got := e.claim("w1", 100)
	require.Len(t, got, 2)
	for _, it := range got {
		require.Equal(t, runnable.ID, it.JobID)
	}
	require.Empty(t, e.claim("w1", 100))
	e.requireCounts(failed.ID, engine.ItemCounts{})
	require.Empty(t, e.items(failed.ID), "a failed job keeps no rows")
	e.requireCounts(canceled.ID, engine.ItemCounts{Skipped: 3})
	for _, j := range []*engine.Job{ingesting, paused, done} {
		e.requireCounts(j.ID, engine.ItemCounts{Pending: 3})
		for _, it := range e.items(j.ID) {
			require.Equal(t, engine.ItemPending, it.Status)
		}
	}

	// A paused job that is resumed becomes claimable again.
	_, err = e.s.SetJobState(e.ctx, &engine.SetJobStateParams{
		JobID: paused.ID, From: []engine.JobState{engine.JobPaused}, To: engine.JobQueued, Now: e.now(),
	})
	require.NoError(t, err)
	got = e.claim("w1", 100)
	require.Len(t, got, 3)
	for _, it := range got {
		require.Equal(t, paused.ID, it.JobID)
	}
}

// testClaimNotBeforeRunAt: items inserted now are due now; a retry is due
// at its RunAt and not a millisecond before.
func testClaimNotBeforeRunAt(t *testing.T, e *env) {
	j := e.queuedJob(1)
	got := e.claim("w1", 10) // same instant as the insert: due
	require.Len(t, got, 1)
	o := e.outcome(got[0], engine.ItemPending)
	runAt := e.now().Add(45 * time.Second)
	o.RunAt = runAt
	e.complete("w1", o)

	e.advance(45*time.Second - time.Millisecond)
	require.Empty(t, e.claim("w1", 10), "not due before RunAt")
	e.advance(time.Millisecond)
	requireTime(t, runAt, e.now())
	got = e.claim("w1", 10)
	require.Len(t, got, 1, "due at RunAt")
	require.Equal(t, 2, got[0].Attempts)
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 1})
}

// testClaimFairness: a small job submitted after a big one is not starved.
func testClaimFairness(t *testing.T, e *env) {
	big := e.queuedJob(1000, withName("big"))
	e.advance(time.Second)
	small := e.queuedJob(10, withName("small"))
	e.advance(time.Second)

	first := e.claim("w1", 100)
	require.Len(t, first, 100, "1,010 items are due: the claim is full")
	groups := byJob(first)
	require.NotEmpty(t, groups[big.ID], "first claim includes the big job")
	require.NotEmpty(t, groups[small.ID], "first claim includes the small job")

	smallClaimed := len(groups[small.ID])
	bigClaimed := len(groups[big.ID])
	claims := 1
	for smallClaimed < 10 {
		require.Less(t, claims, 2, "the small job's 10 items are claimed within two claims")
		got := e.claim("w1", 100)
		require.NotEmpty(t, got)
		claims++
		g := byJob(got)
		smallClaimed += len(g[small.ID])
		bigClaimed += len(g[big.ID])
	}
	require.Less(t, bigClaimed, 1000, "the small job finished long before the big one")
	e.requireCounts(small.ID, engine.ItemCounts{Processing: 10})
	e.requireCounts(big.ID, engine.ItemCounts{Pending: int64(1000 - bigClaimed), Processing: int64(bigClaimed)})
}

// servedWithin claims with limit (and maxJobs, 0 = default) once per fake
// second, up to claims times, and returns the jobs served.
func (e *env) servedWithin(claims, limit, maxJobs int) map[int64]int {
	e.t.Helper()
	served := map[int64]int{}
	for range claims {
		e.advance(time.Second)
		got, err := e.s.ClaimItems(e.ctx, &engine.ClaimItemsParams{
			WorkerID: "w1", Limit: limit, MaxJobs: maxJobs, LeaseFor: time.Hour, Now: e.now(),
		})
		require.NoError(e.t, err, "ClaimItems")
		require.LessOrEqual(e.t, len(got), limit)
		for _, it := range got {
			served[it.JobID]++
		}
	}
	return served
}

// testClaimFairnessSmallLimit: when a claim is smaller than the number of
// runnable jobs, successive claims rotate over the jobs instead of draining
// the oldest one first.
func testClaimFairnessSmallLimit(t *testing.T, e *env) {
	var jobs []*engine.Job
	for range 3 {
		jobs = append(jobs, e.queuedJob(20))
	}
	served := e.servedWithin(6, 1, 0)
	for _, j := range jobs {
		require.Positive(t, served[j.ID], "job %d served within six claims of one item: %v", j.ID, served)
	}

	var more []*engine.Job
	for range 5 {
		more = append(more, e.queuedJob(20))
	}
	// Eight runnable jobs, claims of three items.
	served = e.servedWithin(8, 3, 0)
	for _, j := range append(jobs, more...) {
		require.Positive(t, served[j.ID], "job %d served within eight claims of three items: %v", j.ID, served)
	}
}

// testClaimFairnessMaxJobs: a claim spreads over at most MaxJobs jobs, and
// the jobs left out are served by the next claims.
func testClaimFairnessMaxJobs(t *testing.T, e *env) {
	var jobs []*engine.Job
	for range 4 {
		jobs = append(jobs, e.queuedJob(30))
	}
	e.advance(time.Second)
	got, err := e.s.ClaimItems(e.ctx, &engine.ClaimItemsParams{WorkerID: "w1", Limit: 10, MaxJobs: 2, LeaseFor: time.Hour, Now: e.now()})
	require.NoError(t, err)
	require.Len(t, got, 10)
	require.Len(t, byJob(got), 2, "one claim spreads over MaxJobs jobs")

	served := e.servedWithin(3, 10, 2)
	for _, it := range got {
		served[it.JobID]++
	}
	for _, j := range jobs {
		require.Positive(t, served[j.ID], "job %d served within four claims: %v", j.ID, served)
	}
}
