package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// ingestTests cover InsertItems, FinishIngest, FailJob and FailStaleIngests.
var ingestTests = []subtest{
	{"InsertItemsCountsAndHeartbeat", testInsertItems},
	{"InsertItemsStoresRows", testInsertItemsStoresRows},
	{"InsertItemsNotIngesting", testInsertItemsNotIngesting},
	{"FinishIngestQueued", testFinishIngestQueued},
	{"FinishIngestAllSkipped", testFinishIngestAllSkipped},
	{"FinishIngestEmpty", testFinishIngestEmpty},
	{"FailJob", testFailJob},
	{"FailStaleIngests", testFailStaleIngests},
	{"EnqueueJob", testEnqueueJob},
	{"EnqueueJobNothingPending", testEnqueueJobNothingPending},
}

// testInsertItems: each batch bumps Pending and Skipped exactly and sets the
// heartbeat.
func testInsertItems(t *testing.T, e *env) {
	j := e.createJob()

	e.advance(time.Second)
	batch := append(rows(1, 3), skippedRow(4))
	e.insert(j.ID, batch)
	got := e.job(j.ID)
	require.Equal(t, engine.ItemCounts{Pending: 3, Skipped: 1}, got.Counts)
	require.Equal(t, engine.JobIngesting, got.State)
	requireTimePtr(t, e.now(), got.LastHeartbeat, "LastHeartbeat after first batch")

	e.advance(2 * time.Second)
	e.insert(j.ID, append(rows(5, 9), skippedRow(10), skippedRow(11)))
	got = e.job(j.ID)
	require.Equal(t, engine.ItemCounts{Pending: 8, Skipped: 3}, got.Counts)
	requireTimePtr(t, e.now(), got.LastHeartbeat, "LastHeartbeat after second batch")
	require.Equal(t, engine.JobIngesting, got.State)
}

// testInsertItemsStoresRows: rows read back with their seq, status, input,
// normalised input, owner and pipeline; skipped rows keep their error.
func testInsertItemsStoresRows(t *testing.T, e *env) {
	j := e.createJob()
	e.insert(j.ID, append(rows(1, 2), skippedRow(3)))

	items := e.items(j.ID)
	require.Len(t, items, 3)
	for i, it := range items {
		seq := int64(i + 1)
		require.Positive(t, it.ID)
		require.Equal(t, seq, it.Seq)
		require.Equal(t, j.ID, it.JobID)
		require.Equal(t, e.user.ID, it.UserID)
		require.Equal(t, engine.DefaultPipeline, it.Pipeline)
		require.Zero(t, it.Attempts)
		require.Zero(t, it.Stage)
		require.Empty(t, it.LockedBy)
		require.Nil(t, it.LeaseExpiresAt)
	}
	for _, it := range items[:2] {
		got := e.item(it.ID)
		require.Equal(t, engine.ItemPending, got.Status)
		requireJSON(t, rowJSON(it.Seq), got.Input, "Input")
		requireJSON(t, normJSON(it.Seq), got.Normalized, "Normalized")
		require.Empty(t, got.LastError)
	}
	sk := e.item(items[2].ID)
	require.Equal(t, engine.ItemSkipped, sk.Status)
	require.Equal(t, skippedRow(3).LastError, sk.LastError)
	requireJSON(t, skippedRow(3).Input, sk.Input, "skipped Input")
}

// testInsertItemsNotIngesting: only an INGESTING job takes rows.
func testInsertItemsNotIngesting(t *testing.T, e *env) {
	queued := e.queuedJob(2)
	err := e.s.InsertItems(e.ctx, &engine.InsertItemsParams{JobID: queued.ID, Items: rows(3, 4), Now: e.now()})
	requireConflict(t, err, "InsertItems on a QUEUED job")
	e.requireCounts(queued.ID, engine.ItemCounts{Pending: 2})
	require.Len(t, e.items(queued.ID), 2)

	failed := e.createJob()
	_, err = e.s.FailJob(e.ctx, &engine.FailJobParams{JobID: failed.ID, Reason: "bad file", Now: e.now()})
	require.NoError(t, err)
	err = e.s.InsertItems(e.ctx, &engine.InsertItemsParams{JobID: failed.ID, Items: rows(1, 2), Now: e.now()})
	requireConflict(t, err, "InsertItems on a FAILED job")
	e.requireCounts(failed.ID, engine.ItemCounts{})
}

// testFinishIngestQueued: a job with pending rows becomes QUEUED with its
// final total.
func testFinishIngestQueued(t *testing.T, e *env) {
	j := e.createJob()
	e.insert(j.ID, rows(1, 4))
	e.insert(j.ID, append(rows(5, 6), skippedRow(7)))
	e.advance(time.Second)
	fin := e.finish(j.ID)
	require.Equal(t, engine.JobQueued, fin.State)
	require.Equal(t, int64(7), fin.TotalItems)
	require.Nil(t, fin.FinishedAt)

	got := e.job(j.ID)
	require.Equal(t, engine.JobQueued, got.State)
	require.Equal(t, int64(7), got.TotalItems)
	require.Equal(t, engine.ItemCounts{Pending: 6, Skipped: 1}, got.Counts)
	require.Nil(t, got.FinishedAt)
}

// testFinishIngestAllSkipped: with nothing pending the job is DONE at once.
func testFinishIngestAllSkipped(t *testing.T, e *env) {
	j := e.createJob()
	e.insert(j.ID, []engine.NewItem{skippedRow(1), skippedRow(2)})
	e.advance(time.Second)
	fin := e.finish(j.ID)
	require.Equal(t, engine.JobDone, fin.State)
	require.Equal(t, int64(2), fin.TotalItems)
	got := e.job(j.ID)
	require.Equal(t, engine.JobDone, got.State)
	require.Equal(t, int64(2), got.TotalItems)
	require.Equal(t, engine.ItemCounts{Skipped: 2}, got.Counts)
	requireTimePtr(t, e.now(), got.FinishedAt, "FinishedAt")
}

// testFinishIngestEmpty: a job without rows is DONE at once.
func testFinishIngestEmpty(t *testing.T, e *env) {
	j := e.createJob()
	e.advance(time.Second)
	fin := e.finish(j.ID)
	require.Equal(t, engine.JobDone, fin.State)
	got := e.job(j.ID)
	require.Equal(t, engine.JobDone, got.State)
	require.Zero(t, got.TotalItems)
	require.Equal(t, engine.ItemCounts{}, got.Counts)
	requireTimePtr(t, e.now(), got.FinishedAt, "FinishedAt")
}

// testFailJob: a failed job keeps its reason and items, which nobody can
// claim.
func testFailJob(t *testing.T, e *env) {
	j := e.createJob()
	e.insert(j.ID, rows(1, 3))
	e.advance(time.Second)
	f, err := e.s.FailJob(e.ctx, &engine.FailJobParams{JobID: j.ID, Reason: "row 4: invalid UTF-8", Now: e.now()})
	require.NoError(t, err)
	require.Equal(t, engine.JobFailed, f.State)

	got := e.job(j.ID)
	require.Equal(t, engine.JobFailed, got.State)
	require.Equal(t, "row 4: invalid UTF-8", got.LastError)
	requireTimePtr(t, e.now(), got.FinishedAt, "FinishedAt")
	require.Empty(t, e.items(j.ID), "a failed ingest keeps no partial rows")
	require.Equal(t, engine.ItemCounts{}, got.Counts, "counters follow the rows")
	require.Empty(t, e.claim("w1", 10), "nothing of a FAILED job is claimable")
	n, err := e.s.ReprocessItems(e.ctx, &engine.ReprocessParams{JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemSkipped}, Now: e.now()})
	require.Error(t, err, "a failed ingest cannot be reprocessed into a job that looks complete")
	require.Equal(t, engine.ECONFLICT, engine.ErrorCode(err))
	require.Zero(t, n)
}

// testFailStaleIngests: INGESTING jobs whose heartbeat (or creation when
// there is none) is older than Before are failed and returned.
func testFailStaleIngests(t *testing.T, e *env) {
	t0 := e.now()
	staleBeat := e.createJob(withName("stale heartbeat"))
	e.insert(staleBeat.ID, rows(1, 2))
	staleNoBeat := e.createJob(withName("never inserted"))
	queued := e.queuedJob(1, withName("queued"))
	fresh := e.createJob(withName("fresh heartbeat"))

	e.advance(10 * time.Minute)
	e.insert(fresh.ID, rows(1, 1))
	freshNew := e.createJob(withName("created late"))

	e.advance(time.Minute)
	before := t0.Add(5 * time.Minute)
	failed, err := e.s.FailStaleIngests(e.ctx, &engine.FailStaleIngestsParams{Before: before, Reason: "ingest stopped", Now: e.now()})
	require.NoError(t, err)
	require.ElementsMatch(t, []int64{staleBeat.ID, staleNoBeat.ID}, jobIDs(failed))

	for _, id := range []int64{staleBeat.ID, staleNoBeat.ID} {
		got := e.job(id)
		require.Equal(t, engine.JobFailed, got.State, "job %d", id)
		require.Equal(t, "ingest stopped", got.LastError)
		requireTimePtr(t, e.now(), got.FinishedAt, "FinishedAt")
	}
	require.Equal(t, engine.JobIngesting, e.job(fresh.ID).State)
	require.Equal(t, engine.JobIngesting, e.job(freshNew.ID).State)
	require.Equal(t, engine.JobQueued, e.job(queued.ID).State)
	e.requireCounts(staleBeat.ID, engine.ItemCounts{})
	require.Empty(t, e.items(staleBeat.ID), "an interrupted ingest keeps no partial rows")

	again, err := e.s.FailStaleIngests(e.ctx, &engine.FailStaleIngestsParams{Before: before, Reason: "ingest stopped", Now: e.now()})
	require.NoError(t, err)
	require.Empty(t, again)
}

// enqueue creates a job with its items in one call at the current fake time.
func (e *env) enqueue(name string, items []engine.NewItem) *engine.Job {
	e.t.Helper()
	j, err := e.s.EnqueueJob(e.ctx, &engine.EnqueueJobParams{
		Job: engine.CreateJobParams{
			UserID:      e.user.ID,
			Pipeline:    engine.DefaultPipeline,
			Name:        name,
			Source:      "api",
			MaxAttempts: 3,
			Now:         e.now(),
		},
		Items: items,
	})
	require.NoError(e.t, err, "EnqueueJob")
	require.NotNil(e.t, j)
	return j
}

// testEnqueueJob: a job created with its items is QUEUED at once with its
// total and counters, and its items are claimable.
func testEnqueueJob(t *testing.T, e *env) {
	j := e.enqueue("api items", append(rows(1, 3), skippedRow(4)))
	require.Positive(t, j.ID)
	require.Equal(t, engine.JobQueued, j.State)
	require.Equal(t, int64(4), j.TotalItems)
	require.Equal(t, engine.ItemCounts{Pending: 3, Skipped: 1}, j.Counts)
	requireTime(t, e.now(), j.CreatedAt, "CreatedAt")
	require.Nil(t, j.FinishedAt)

	got := e.job(j.ID)
	require.Equal(t, engine.JobQueued, got.State)
	require.Equal(t, "api items", got.Name)
	require.Equal(t, e.user.ID, got.UserID)
	require.Equal(t, engine.DefaultPipeline, got.Pipeline)
	require.Equal(t, 3, got.MaxAttempts)
	require.Equal(t, int64(4), got.TotalItems)
	require.Equal(t, engine.ItemCounts{Pending: 3, Skipped: 1}, got.Counts)

	items := e.items(j.ID)
	require.Equal(t, []int64{1, 2, 3, 4}, scanSeqs(items))
	for _, it := range items[:3] {
		require.Equal(t, engine.ItemPending, it.Status)
		requireJSON(t, rowJSON(it.Seq), it.Input, "Input")
		requireJSON(t, normJSON(it.Seq), it.Normalized, "Normalized")
	}
	require.Equal(t, engine.ItemSkipped, items[3].Status)
	require.Equal(t, skippedRow(4).LastError, items[3].LastError)

	claimed := e.claim("w1", 10)
	require.Equal(t, []int64{1, 2, 3}, seqs(claimed))
	e.completeAll("w1", claimed, engine.ItemDone)
	require.Equal(t, engine.JobDone, e.job(j.ID).State)
}

// testEnqueueJobNothingPending: without PENDING items the job is DONE at
// once.
func testEnqueueJobNothingPending(t *testing.T, e *env) {
	skipped := e.enqueue("all skipped", []engine.NewItem{skippedRow(1), skippedRow(2)})
	require.Equal(t, engine.JobDone, skipped.State)
	got := e.job(skipped.ID)
	require.Equal(t, engine.JobDone, got.State)
	require.Equal(t, int64(2), got.TotalItems)
	require.Equal(t, engine.ItemCounts{Skipped: 2}, got.Counts)
	requireTimePtr(t, e.now(), got.FinishedAt, "FinishedAt")

	empty := e.enqueue("empty", nil)
	got = e.job(empty.ID)
	require.Equal(t, engine.JobDone, got.State)
	require.Zero(t, got.TotalItems)
	requireTimePtr(t, e.now(), got.FinishedAt, "FinishedAt")
	require.Empty(t, e.claim("w1", 10))
}
