package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// leaseTests cover lease renewal, the reaper, the queue summary and the
// change counter.
var leaseTests = []subtest{
	{"ReleaseItems", testReleaseItems},
	{"RenewLeases", testRenewLeases},
	{"ReapExpired", testReapExpired},
	{"ReapPoison", testReapPoison},
	{"StaleAfterReap", testStaleAfterReap},
	{"QueueSummary", testQueueSummary},
	{"ChangeCounter", testChangeCounter},
}

// reap runs the reaper at the current fake time.
func (e *env) reap() int {
	e.t.Helper()
	n, err := e.s.ReapExpiredLeases(e.ctx, &engine.ReapParams{Now: e.now(), Limit: 1000})
	require.NoError(e.t, err, "ReapExpiredLeases")
	return n
}

// testRenewLeases: only items still PROCESSING under the worker are
// extended.
func testRenewLeases(t *testing.T, e *env) {
	e.queuedJob(4)
	mine := e.claim("w1", 3)
	require.Len(t, mine, 3)
	theirs := e.claim("w2", 1)
	require.Len(t, theirs, 1)
	e.complete("w1", e.outcome(mine[2], engine.ItemDone))

	e.advance(30 * time.Second)
	ids := append(itemIDs(mine), theirs[0].ID)
	n, err := e.s.RenewLeases(e.ctx, &engine.RenewLeasesParams{WorkerID: "w1", ItemIDs: ids, LeaseFor: 2 * time.Minute, Now: e.now()})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for _, it := range mine[:2] {
		got := e.item(it.ID)
		require.Equal(t, engine.ItemProcessing, got.Status)
		requireTimePtr(t, e.now().Add(2*time.Minute), got.LeaseExpiresAt, "renewed lease")
	}
	got := e.item(mine[2].ID)
	require.Equal(t, engine.ItemDone, got.Status)
	require.Nil(t, got.LeaseExpiresAt)
	got = e.item(theirs[0].ID)
	require.Equal(t, "w2", got.LockedBy)
	requireTimePtr(t, *theirs[0].LeaseExpiresAt, got.LeaseExpiresAt, "another worker's lease untouched")

	// A renewed lease survives the reaper past its original expiry.
	e.advance(time.Minute)
	require.Equal(t, 1, e.reap(), "only w2's lease expired")
	require.Equal(t, engine.ItemProcessing, e.item(mine[0].ID).Status)
	require.Equal(t, engine.ItemPending, e.item(theirs[0].ID).Status)

	n, err = e.s.RenewLeases(e.ctx, &engine.RenewLeasesParams{WorkerID: "w2", ItemIDs: []int64{theirs[0].ID}, LeaseFor: time.Minute, Now: e.now()})
	require.NoError(t, err)
	require.Zero(t, n, "a reaped item cannot be renewed")
}

// testReapExpired: expired leases go back to PENDING, due now, unlocked;
// unexpired ones stay.
func testReapExpired(t *testing.T, e *env) {
	j := e.queuedJob(3, withMaxAttempts(5))
	early := e.claim("w1", 2)
	require.Len(t, early, 2)
	e.advance(50 * time.Second)
	late := e.claim("w2", 1)
	require.Len(t, late, 1)

	e.advance(defaultLease - 50*time.Second) // early leases expire exactly now
	require.Zero(t, e.reap(), "a lease expiring exactly now is not yet expired")

	e.advance(time.Second)
	require.Equal(t, 2, e.reap())
	for _, it := range early {
		got := e.item(it.ID)
		require.Equal(t, engine.ItemPending, got.Status)
		require.Empty(t, got.LockedBy)
		require.Nil(t, got.LeaseExpiresAt)
		require.False(t, got.RunAt.After(e.now()), "due now")
		require.Equal(t, 1, got.Attempts)
	}
	e.requireCounts(j.ID, engine.ItemCounts{Pending: 2, Processing: 1})
	e.requireUntouched(late[0])
	require.Zero(t, e.reap(), "nothing more to reap")

	again := e.claim("w3", 10)
	require.ElementsMatch(t, itemIDs(early), itemIDs(again))
	for _, it := range again {
		require.Equal(t, 2, it.Attempts)
	}
}

// testReapPoison: an item whose lease expires with the job's MaxAttempts
// spent becomes ERROR with class poison.
func testReapPoison(t *testing.T, e *env) {
	j := e.queuedJob(1, withMaxAttempts(2))
	it := e.claim("w1", 1)[0]
	require.Equal(t, 1, it.Attempts)
	e.advance(defaultLease + time.Second)
	require.Equal(t, 1, e.reap())
	e.requireCounts(j.ID, engine.ItemCounts{Pending: 1})

	it = e.claim("w2", 1)[0]
	require.Equal(t, 2, it.Attempts)
	e.advance(defaultLease + time.Second)
	require.Equal(t, 1, e.reap())
	got := e.item(it.ID)
	require.Equal(t, engine.ItemError, got.Status)
	require.Equal(t, string(engine.ClassPoison), got.LastErrorCode)
	require.Empty(t, got.LockedBy)
	require.Nil(t, got.LeaseExpiresAt)
	e.requireCounts(j.ID, engine.ItemCounts{Error: 1})
	require.Empty(t, e.claim("w3", 10))
}

// testStaleAfterReap: the outcome of a worker whose lease was reaped is
// dropped, also when the item was claimed again.
func testStaleAfterReap(t *testing.T, e *env) {
	j := e.queuedJob(2)
	claimed := e.claim("w1", 2)
	require.Len(t, claimed, 2)
	e.advance(defaultLease + time.Second)
	require.Equal(t, 2, e.reap())

	res := e.complete("w1", e.outcome(claimed[0], engine.ItemDone))
	require.Zero(t, res.Applied)
	require.Equal(t, []int64{claimed[0].ID}, res.Stale)
	require.Equal(t, engine.ItemPending, e.item(claimed[0].ID).Status)
	e.requireCounts(j.ID, engine.ItemCounts{Pending: 2})

	again := e.claim("w1", 2)
	require.Len(t, again, 2)
	res = e.complete("w1", e.outcome(claimed[1], engine.ItemDone))
	require.Zero(t, res.Applied, "same worker, previous attempt")
	require.Equal(t, []int64{claimed[1].ID}, res.Stale)
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 2})
}

// summary returns the queue summary at the current fake time.
func (e *env) summary() *engine.QueueSummary {
	e.t.Helper()
	q, err := e.s.QueueSummary(e.ctx, e.now())
	require.NoError(e.t, err, "QueueSummary")
	require.NotNil(e.t, q)
	return q
}

// testQueueSummary: Due, Later, Processing, Ingesting and NextRunAt.
func testQueueSummary(t *testing.T, e *env) {
	q := e.summary()
	require.True(t, q.Idle(), "a fresh store is idle: %+v", q)
	require.Nil(t, q.NextRunAt)

	ing := e.createJob()
	e.insert(ing.ID, rows(1, 4))
	q = e.summary()
	require.Equal(t, int64(1), q.Ingesting)
	require.Zero(t, q.Due, "items of an INGESTING job are not due")

	e.queuedJob(5)
	q = e.summary()
	require.Equal(t, int64(5), q.Due)
	require.Zero(t, q.Later)
	require.Zero(t, q.Processing)
	require.Nil(t, q.NextRunAt)

	claimed := e.claim("w1", 3)
	require.Len(t, claimed, 3)
	q = e.summary()
	require.Equal(t, int64(2), q.Due)
	require.Equal(t, int64(3), q.Processing)

	soon := e.outcome(claimed[0], engine.ItemPending)
	soon.RunAt = e.now().Add(time.Minute)
	later := e.outcome(claimed[1], engine.ItemPending)
	later.RunAt = e.now().Add(10 * time.Minute)
	e.complete("w1", soon, later)
	q = e.summary()
	require.Equal(t, int64(2), q.Due)
	require.Equal(t, int64(2), q.Later)
	require.Equal(t, int64(1), q.Processing)
	requireTimePtr(t, soon.RunAt, q.NextRunAt, "NextRunAt")

	paused := e.queuedJob(7)
	_, err := e.s.SetJobState(e.ctx, &engine.SetJobStateParams{
		JobID: paused.ID, From: []engine.JobState{engine.JobQueued}, To: engine.JobPaused, Now: e.now(),
	})
	require.NoError(t, err)
	q = e.summary()
	require.Equal(t, int64(2), q.Due, "a paused job's items are not due")
	require.Equal(t, int64(2), q.Later)

	e.advance(time.Minute)
	q = e.summary()
	require.Equal(t, int64(3), q.Due, "the first retry is due")
	require.Equal(t, int64(1), q.Later)
	requireTimePtr(t, later.RunAt, q.NextRunAt, "NextRunAt")
	require.Equal(t, int64(1), q.Processing)
	require.Equal(t, int64(1), q.Ingesting)
	require.False(t, q.Idle())
}

// testChangeCounter: the counter can be read.
func testChangeCounter(t *testing.T, e *env) {
	_, err := e.s.ChangeCounter(e.ctx)
	require.NoError(t, err)
	e.queuedJob(2)
	_, err = e.s.ChangeCounter(e.ctx)
	require.NoError(t, err)
}

// testReleaseItems: items claimed but never started go back to PENDING, due
// now, with the claim's attempt not counted and no attempt record; items
// held by another worker or already completed are left alone.
func testReleaseItems(t *testing.T, e *env) {
	j := e.queuedJob(3)
	claimed := e.claimAll("w1")
	require.Len(t, claimed, 3)
	e.complete("w1", e.outcome(claimed[0], engine.ItemDone))
	e.advance(time.Second)
	n, err := e.s.ReleaseItems(e.ctx, &engine.ReleaseItemsParams{WorkerID: "w2", Items: claimed[1:], Now: e.now()})
	require.NoError(t, err)
	require.Zero(t, n, "another worker's items are not released")
	n, err = e.s.ReleaseItems(e.ctx, &engine.ReleaseItemsParams{WorkerID: "w1", Items: claimed, Now: e.now()})
	require.NoError(t, err)
	require.Equal(t, 2, n, "the completed item is not released")
	e.requireCounts(j.ID, engine.ItemCounts{Pending: 2, Done: 1})
	for _, it := range claimed[1:] {
		got := e.item(it.ID)
		require.Equal(t, engine.ItemPending, got.Status)
		require.Zero(t, got.Attempts, "a released claim is not an attempt")
		require.Empty(t, got.LockedBy)
		attempts, err := e.s.ListAttempts(e.ctx, it.ID)
		require.NoError(t, err)
		require.Empty(t, attempts)
	}
	require.Len(t, e.claim("w2", 10), 2, "released items are due at once")
}
