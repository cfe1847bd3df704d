package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// reprocessTests cover ReprocessItems.
var reprocessTests = []subtest{
	{"DefaultStatuses", testReprocessDefault},
	{"Statuses", testReprocessStatuses},
	{"ItemIDsResetAttempts", testReprocessItemIDs},
	{"NeverActiveItems", testReprocessActiveItems},
	{"OtherJobsItems", testReprocessOtherJob},
}

// finishedJob makes a DONE job whose items end, by seq: 1-2 DONE, 3-4 ERROR,
// 5 NOT_FOUND, 6 SKIPPED (at ingest). It returns the job and its items by
// seq (index 0 is seq 1).
func (e *env) finishedJob() (*engine.Job, []*engine.Item) {
	e.t.Helper()
	j := e.createJob()
	e.insert(j.ID, append(rows(1, 5), skippedRow(6)))
	e.finish(j.ID)
	claimed := e.claimAll("w1")
	require.Len(e.t, claimed, 5)
	want := map[int64]engine.ItemStatus{1: engine.ItemDone, 2: engine.ItemDone, 3: engine.ItemError, 4: engine.ItemError, 5: engine.ItemNotFound}
	var outs []engine.Outcome
	for _, it := range claimed {
		outs = append(outs, e.outcome(it, want[it.Seq]))
	}
	e.advance(time.Second)
	res := e.complete("w1", outs...)
	require.Equal(e.t, []int64{j.ID}, res.Finished)
	got := e.job(j.ID)
	require.Equal(e.t, engine.JobDone, got.State)
	require.Equal(e.t, engine.ItemCounts{Done: 2, Error: 2, NotFound: 1, Skipped: 1}, got.Counts)
	items := e.items(j.ID)
	require.Len(e.t, items, 6)
	return got, items
}

// reprocess runs ReprocessItems at the current fake time.
func (e *env) reprocess(p engine.ReprocessParams) int64 {
	e.t.Helper()
	p.Now = e.now()
	n, err := e.s.ReprocessItems(e.ctx, &p)
	require.NoError(e.t, err, "ReprocessItems")
	return n
}

// requireReprocessed checks that items are PENDING and due now.
func (e *env) requireReprocessed(items ...*engine.Item) {
	e.t.Helper()
	for _, it := range items {
		got := e.item(it.ID)
		require.Equal(e.t, engine.ItemPending, got.Status, "item seq %d", it.Seq)
		requireTime(e.t, e.now(), got.RunAt, "RunAt of seq %d", it.Seq)
		require.Empty(e.t, got.LockedBy)
		require.Nil(e.t, got.LeaseExpiresAt)
	}
}

// requireStatus checks the stored status of items.
func (e *env) requireStatus(st engine.ItemStatus, items ...*engine.Item) {
	e.t.Helper()
	for _, it := range items {
		require.Equal(e.t, st, e.item(it.ID).Status, "item seq %d", it.Seq)
	}
}

// testReprocessDefault: without Statuses or ItemIDs, ERROR and NOT_FOUND
// items go back to PENDING and the DONE job back to QUEUED.
func testReprocessDefault(t *testing.T, e *env) {
	j, items := e.finishedJob()
	require.NotNil(t, j.FinishedAt)
	e.advance(time.Hour)

	n := e.reprocess(engine.ReprocessParams{JobID: j.ID})
	require.Equal(t, int64(3), n)
	e.requireReprocessed(items[2], items[3], items[4])
	e.requireStatus(engine.ItemDone, items[0], items[1])
	e.requireStatus(engine.ItemSkipped, items[5])

	got := e.job(j.ID)
	require.Equal(t, engine.JobQueued, got.State)
	require.Nil(t, got.FinishedAt)
	require.Equal(t, engine.ItemCounts{Pending: 3, Done: 2, Skipped: 1}, got.Counts)

	claimed := e.claim("w2", 10)
	require.ElementsMatch(t, itemIDs(items[2:5]), itemIDs(claimed))
	for _, it := range claimed {
		require.Equal(t, 2, it.Attempts, "attempts kept")
	}
	e.completeAll("w2", claimed, engine.ItemDone)
	got = e.job(j.ID)
	require.Equal(t, engine.JobDone, got.State)
	require.Equal(t, engine.ItemCounts{Done: 5, Skipped: 1}, got.Counts)
}

// testReprocessStatuses: explicit Statuses select what is reprocessed.
func testReprocessStatuses(t *testing.T, e *env) {
	j, items := e.finishedJob()
	e.advance(time.Minute)

	n := e.reprocess(engine.ReprocessParams{JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemDone, engine.ItemSkipped}})
	require.Equal(t, int64(3), n)
	e.requireReprocessed(items[0], items[1], items[5])
	e.requireStatus(engine.ItemError, items[2], items[3])
	e.requireStatus(engine.ItemNotFound, items[4])
	got := e.job(j.ID)
	require.Equal(t, engine.JobQueued, got.State)
	require.Nil(t, got.FinishedAt)
	require.Equal(t, engine.ItemCounts{Pending: 3, Error: 2, NotFound: 1}, got.Counts)

	n = e.reprocess(engine.ReprocessParams{JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemNotFound}})
	require.Equal(t, int64(1), n)
	e.requireCounts(j.ID, engine.ItemCounts{Pending: 4, Error: 2})

	n = e.reprocess(engine.ReprocessParams{JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemNotFound}})
	require.Zero(t, n, "nothing left in NOT_FOUND")
}

// testReprocessItemIDs: ItemIDs reprocess exactly those items;
// ResetAttempts zeroes their attempts.
func testReprocessItemIDs(t *testing.T, e *env) {
	j, items := e.finishedJob()
	e.advance(time.Minute)

	n := e.reprocess(engine.ReprocessParams{JobID: j.ID, ItemIDs: []int64{items[0].ID, items[3].ID}, ResetAttempts: true})
	require.Equal(t, int64(2), n)
	e.requireReprocessed(items[0], items[3])
	require.Zero(t, e.item(items[0].ID).Attempts)
	require.Zero(t, e.item(items[3].ID).Attempts)
	e.requireStatus(engine.ItemDone, items[1])
	e.requireStatus(engine.ItemError, items[2])
	e.requireStatus(engine.ItemNotFound, items[4])
	got := e.job(j.ID)
	require.Equal(t, engine.JobQueued, got.State)
	require.Nil(t, got.FinishedAt)
	require.Equal(t, engine.ItemCounts{Pending: 2, Done: 1, Error: 1, NotFound: 1, Skipped: 1}, got.Counts)

	claimed := e.claim("w1", 10)
	require.Len(t, claimed, 2)
	for _, it := range claimed {
		require.Equal(t, 1, it.Attempts, "attempts restart from zero")
	}
}

// testReprocessActiveItems: PENDING and PROCESSING items are never touched.
func testReprocessActiveItems(t *testing.T, e *env) {
	j := e.queuedJob(4)
	claimed := e.claim("w1", 2)
	require.Len(t, claimed, 2)
	e.complete("w1", e.outcome(claimed[0], engine.ItemError))
	processing := claimed[1]
	all := e.items(j.ID)
	var pending []*engine.Item
	for _, it := range all {
		if it.Status == engine.ItemPending {
			pending = append(pending, it)
		}
	}
	require.Len(t, pending, 2)
	e.advance(time.Minute)

	ids := []int64{claimed[0].ID, processing.ID, pending[0].ID}
	n := e.reprocess(engine.ReprocessParams{JobID: j.ID, ItemIDs: ids, ResetAttempts: true})
	require.Equal(t, int64(1), n, "only the ERROR item")
	e.requireReprocessed(claimed[0])
	e.requireUntouched(processing)
	got := e.item(pending[0].ID)
	require.Equal(t, engine.ItemPending, got.Status)
	requireTime(t, pending[0].RunAt, got.RunAt, "pending item's RunAt untouched")

	// A store may refuse non-terminal statuses outright; if it accepts them
	// it must not move anything.
	n, err := e.s.ReprocessItems(e.ctx, &engine.ReprocessParams{
		JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemPending, engine.ItemProcessing}, Now: e.now(),
	})
	if err == nil {
		require.Zero(t, n)
	}
	e.requireUntouched(processing)
	e.requireCounts(j.ID, engine.ItemCounts{Pending: 3, Processing: 1})

	// The lease holder can still complete its item.
	res := e.complete("w1", e.outcome(processing, engine.ItemDone))
	require.Equal(t, 1, res.Applied)
}

// testReprocessOtherJob: ItemIDs of another job are not touched.
func testReprocessOtherJob(t *testing.T, e *env) {
	a, aItems := e.finishedJob()
	b, bItems := e.finishedJob()
	e.advance(time.Minute)

	n := e.reprocess(engine.ReprocessParams{JobID: a.ID, ItemIDs: []int64{bItems[2].ID, bItems[4].ID}})
	require.Zero(t, n)
	e.requireStatus(engine.ItemError, bItems[2])
	e.requireStatus(engine.ItemNotFound, bItems[4])
	for _, id := range []int64{a.ID, b.ID} {
		got := e.job(id)
		require.Equal(t, engine.JobDone, got.State)
		require.Equal(t, engine.ItemCounts{Done: 2, Error: 2, NotFound: 1, Skipped: 1}, got.Counts)
	}

	n = e.reprocess(engine.ReprocessParams{JobID: a.ID, ItemIDs: []int64{aItems[2].ID, bItems[3].ID}})
	require.Equal(t, int64(1), n)
	e.requireReprocessed(aItems[2])
	e.requireStatus(engine.ItemError, bItems[3])
	require.Equal(t, engine.JobDone, e.job(b.ID).State)
}
