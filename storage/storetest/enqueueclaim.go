package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// enqueueClaimTests cover engine.EnqueueClaimer (direct hand-off on
// enqueue), for the stores that offer it; others take the plain path
// (EnqueueJob, then a claim), which the other groups cover.
var enqueueClaimTests = []subtest{
	{"LeavesTheRowsOfAClaim", testEnqueueClaimedLikeClaim},
	{"CompleteAndReap", testEnqueueClaimedCompleteAndReap},
	{"BackOfTheClaimLine", testEnqueueClaimedBackOfLine},
	{"OtherShapesPlain", testEnqueueClaimedOtherShapes},
	{"Dedupe", testEnqueueClaimedDedupe},
}

// claimer returns the store as an EnqueueClaimer, or skips: the capability
// is optional.
func (e *env) claimer() engine.EnqueueClaimer {
	e.t.Helper()
	ec, ok := e.s.(engine.EnqueueClaimer)
	if !ok {
		e.t.Skip("the store does not claim in its enqueue (optional: engine.EnqueueClaimer)")
	}
	return ec
}

// enqueueClaimed enqueues a job of items claimed by worker at the current
// fake time.
func (e *env) enqueueClaimed(worker, name string, items []engine.NewItem) (*engine.Job, *engine.Item) {
	e.t.Helper()
	j, it, err := e.claimer().EnqueueJobClaimed(e.ctx, &engine.EnqueueJobParams{
		Job:   engine.CreateJobParams{UserID: e.user.ID, Pipeline: engine.DefaultPipeline, Name: name, Source: "api", MaxAttempts: 3, Now: e.now()},
		Items: items,
	}, &engine.EnqueueClaim{WorkerID: worker, LeaseFor: defaultLease})
	require.NoError(e.t, err, "EnqueueJobClaimed")
	require.NotNil(e.t, j)
	return j, it
}

// testEnqueueClaimedLikeClaim: the item and job an enqueue-with-claim
// leaves are those an enqueue and a claim at the same moment leave.
func testEnqueueClaimedLikeClaim(t *testing.T, e *env) {
	e.claimer()
	plain := e.enqueue("plain", rows(1, 1))
	claimed := e.claim("w1", 1)
	require.Len(t, claimed, 1)
	want := claimed[0]

	j, got := e.enqueueClaimed("w1", "direct", rows(1, 1))
	require.NotNil(t, got, "the one PENDING item was claimed")
	require.Equal(t, e.job(j.ID), j, "the job returned is the job stored")
	require.Equal(t, engine.JobRunning, j.State)
	require.Equal(t, engine.ItemCounts{Processing: 1}, j.Counts)
	require.EqualValues(t, 1, j.TotalItems)
	requireTimePtr(t, e.now(), j.StartedAt, "StartedAt")

	sameItem := func(want, got *engine.Item, what string) {
		t.Helper()
		require.Positive(t, got.ID, what)
		require.Equal(t, j.ID, got.JobID, what)
		require.Equal(t, want.Seq, got.Seq, what)
		require.Equal(t, want.UserID, got.UserID, what)
		require.Equal(t, want.Pipeline, got.Pipeline, what)
		require.Equal(t, want.Stage, got.Stage, what)
		require.Equal(t, want.Status, got.Status, what)
		require.Equal(t, want.Attempts, got.Attempts, what)
		require.Equal(t, want.Strategy, got.Strategy, what)
		require.Equal(t, want.LockedBy, got.LockedBy, what)
		requireTimePtr(t, *want.LockedAt, got.LockedAt, what+" LockedAt")
		requireTimePtr(t, *want.LeaseExpiresAt, got.LeaseExpiresAt, what+" LeaseExpiresAt")
		requireJSON(t, want.Normalized, got.Normalized, what+" Normalized")
	}
	sameItem(want, got, "returned item")
	sameItem(e.item(want.ID), e.item(got.ID), "stored item")
	requireTime(t, want.RunAt, got.RunAt, "RunAt")

	pj, dj := e.job(plain.ID), e.job(j.ID)
	require.Equal(t, pj.State, dj.State)
	require.Equal(t, pj.Counts, dj.Counts)
	require.Equal(t, pj.TotalItems, dj.TotalItems)
	requireTimePtr(t, *pj.StartedAt, dj.StartedAt, "StartedAt")

	require.Empty(t, e.claim("w2", 10), "a claimed item is not claimed again")
	q := e.summary()
	require.EqualValues(t, 2, q.Processing)
	require.Zero(t, q.Due)
}

// testEnqueueClaimedCompleteAndReap: the claimed item completes like a
// claimed one; left alone past its lease, the reaper returns it.
func testEnqueueClaimedCompleteAndReap(t *testing.T, e *env) {
	e.claimer()
	done, it := e.enqueueClaimed("w1", "done", rows(1, 1))
	e.completeAll("w1", []*engine.Item{it}, engine.ItemDone)
	got := e.job(done.ID)
	require.Equal(t, engine.JobDone, got.State)
	require.Equal(t, engine.ItemCounts{Done: 1}, got.Counts)

	orphan, lost := e.enqueueClaimed("dead", "orphan", rows(1, 1))
	e.advance(defaultLease - time.Millisecond)
	require.Zero(t, e.reap(), "the lease has not expired")
	e.advance(2 * time.Millisecond)
	require.Equal(t, 1, e.reap())
	got = e.job(orphan.ID)
	require.Equal(t, engine.ItemCounts{Pending: 1}, got.Counts)
	re := e.claim("w2", 10)
	require.Len(t, re, 1)
	require.Equal(t, lost.ID, re[0].ID)
	require.Equal(t, 2, re[0].Attempts, "the reaped attempt counts")
	e.completeAll("w2", re, engine.ItemDone)
	require.Equal(t, engine.ItemCounts{Done: 1}, e.job(orphan.ID).Counts)
	res := e.complete("dead", e.outcome(lost, engine.ItemDone))
	require.Zero(t, res.Applied, "the dead worker's late outcome is stale")
}

// testEnqueueClaimedBackOfLine: a job whose item was claimed in its
// enqueue moved to the back of the claim line, as a claim moves it.
func testEnqueueClaimedBackOfLine(t *testing.T, e *env) {
	e.claimer()
	first, it := e.enqueueClaimed("w1", "first", rows(1, 1))
	e.advance(defaultLease + time.Millisecond)
	require.Equal(t, 1, e.reap()) // first has a PENDING item again
	second := e.enqueue("second", rows(1, 1))
	got, err := e.s.ClaimItems(e.ctx, &engine.ClaimItemsParams{WorkerID: "w2", Limit: 1, MaxJobs: 1, LeaseFor: defaultLease, Now: e.now()})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, second.ID, got[0].JobID, "the job never claimed goes before the one claimed in its enqueue")
	next := e.claim("w2", 1)
	require.Len(t, next, 1)
	require.Equal(t, it.ID, next[0].ID)
	require.Equal(t, first.ID, next[0].JobID)
}

// testEnqueueClaimedOtherShapes: a job of several items, or of one item
// that is not PENDING, is enqueued as EnqueueJob does, nothing claimed.
func testEnqueueClaimedOtherShapes(t *testing.T, e *env) {
	e.claimer()
	many, it := e.enqueueClaimed("w1", "many", rows(1, 2))
	require.Nil(t, it)
	require.Equal(t, engine.JobQueued, many.State)
	require.Equal(t, engine.ItemCounts{Pending: 2}, many.Counts)

	skipped, it := e.enqueueClaimed("w1", "skipped", []engine.NewItem{skippedRow(1)})
	require.Nil(t, it)
	require.Equal(t, engine.JobDone, skipped.State)
	require.Equal(t, engine.ItemCounts{Skipped: 1}, skipped.Counts)
	require.Len(t, e.claim("w2", 10), 2)
}

// testEnqueueClaimedDedupe: a dedupe key held by an unfinished job, or by
// a job created within the window, refuses the enqueue (ErrDuplicate) and
// stores nothing; once the job is done and the window has passed, the key
// is free again.
func testEnqueueClaimedDedupe(t *testing.T, e *env) {
	ec := e.claimer()
	enqueue := func(window time.Duration) (*engine.Job, *engine.Item, error) {
		return ec.EnqueueJobClaimed(e.ctx, &engine.EnqueueJobParams{
			Job: engine.CreateJobParams{UserID: e.user.ID, Pipeline: engine.DefaultPipeline, Name: "keyed", Source: "api",
				DedupeKey: "order-7", DedupeWindow: window, Now: e.now()},
			Items: rows(1, 1),
		}, &engine.EnqueueClaim{WorkerID: "w1", LeaseFor: defaultLease})
	}
	first, it, err := enqueue(0)
	require.NoError(t, err)
	require.NotNil(t, it, "the first is claimed")

	_, _, err = enqueue(0)
	require.ErrorIs(t, err, engine.ErrDuplicate, "the key is held by an unfinished job")
	jobs, err := e.s.ListJobs(e.ctx, &engine.ListJobsParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 1, "the refused enqueue stored nothing")

	_, err = e.s.CompleteItems(e.ctx, &engine.CompleteItemsParams{WorkerID: "w1", Now: e.now(), Outcomes: []engine.Outcome{
		{ItemID: it.ID, JobID: first.ID, Attempt: it.Attempts, Status: engine.ItemDone, Result: it.Normalized, StartedAt: e.now()}}})
	require.NoError(t, err)
	_, _, err = enqueue(time.Hour)
	require.ErrorIs(t, err, engine.ErrDuplicate, "the key was used within the window")
	again, it, err := enqueue(0)
	require.NoError(t, err, "done and no window: the key is free")
	require.NotNil(t, it)
	require.NotEqual(t, first.ID, again.ID)
}
