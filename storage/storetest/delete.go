package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// deleteTests cover CreateFile and DeleteJob.
var deleteTests = []subtest{
	{"WithoutFile", testDeleteJobWithoutFile},
	{"WithFile", testDeleteJobWithFile},
	{"IDsNeverReused", testDeleteIDsNeverReused},
}

// testDeleteIDsNeverReused: after the newest job is deleted, a new job and
// its items get new ids, so an outcome computed for a deleted item can never
// be applied to a new one.
func testDeleteIDsNeverReused(t *testing.T, e *env) {
	j := e.queuedJob(3)
	claimed := e.claimAll("w1")
	require.Len(t, claimed, 3)
	_, err := e.s.DeleteJob(e.ctx, j.ID)
	require.NoError(t, err)

	j2 := e.queuedJob(3)
	require.Greater(t, j2.ID, j.ID, "job ids are not reused")
	for _, it := range e.items(j2.ID) {
		for _, old := range claimed {
			require.NotEqual(t, old.ID, it.ID, "item ids are not reused")
		}
	}
	again := e.claimAll("w1")
	require.Len(t, again, 3)
	outs := make([]engine.Outcome, 0, len(claimed))
	for _, it := range claimed {
		outs = append(outs, e.outcome(it, engine.ItemDone))
	}
	res, err := e.s.CompleteItems(e.ctx, &engine.CompleteItemsParams{WorkerID: "w1", Outcomes: outs, Now: e.now()})
	require.NoError(t, err)
	require.Zero(t, res.Applied, "outcomes of deleted items are stale")
	require.Len(t, res.Stale, 3)
	e.requireCounts(j2.ID, engine.ItemCounts{Processing: 3})
}

// testDeleteJobWithoutFile: the job, its items and attempts go; other jobs
// stay; no file is returned.
func testDeleteJobWithoutFile(t *testing.T, e *env) {
	j := e.queuedJob(3)
	other := e.queuedJob(2)
	claimed := e.claimAll("w1")
	require.Len(t, claimed, 5)
	e.completeAll("w1", claimed, engine.ItemDone)
	items := e.items(j.ID)
	require.Len(t, items, 3)

	f, err := e.s.DeleteJob(e.ctx, j.ID)
	require.NoError(t, err)
	require.Nil(t, f, "a job without a file returns no file")

	_, err = e.s.GetJob(e.ctx, j.ID)
	requireNotFound(t, err, "GetJob after DeleteJob")
	for _, it := range items {
		_, err := e.s.GetItem(e.ctx, it.ID)
		requireNotFound(t, err, "GetItem after DeleteJob")
		attempts, err := e.s.ListAttempts(e.ctx, it.ID)
		if err == nil {
			require.Empty(t, attempts, "attempts deleted with the job")
		} else {
			requireNotFound(t, err)
		}
	}
	require.NotContains(t, jobIDs(e.listJobs(&engine.ListJobsParams{Limit: 100})), j.ID)
	require.Len(t, e.walkItems(engine.ListItemsParams{Limit: 100}), 2, "only the other job's items remain")

	got := e.job(other.ID)
	require.Equal(t, engine.JobDone, got.State)
	require.Len(t, e.items(other.ID), 2)
	for _, it := range e.items(other.ID) {
		attempts, err := e.s.ListAttempts(e.ctx, it.ID)
		require.NoError(t, err)
		require.Len(t, attempts, 1)
	}
}

// testDeleteJobWithFile: deleting a job returns its file for the caller to
// delete.
func testDeleteJobWithFile(t *testing.T, e *env) {
	f, err := e.s.CreateFile(e.ctx, &engine.CreateFileParams{
		File: &engine.File{
			UserID:     e.user.ID,
			Name:       "prices.csv",
			Size:       1234,
			SHA256:     "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			MediaType:  "text/csv",
			Source:     "upload",
			StoredPath: "files/0001-prices.csv",
		},
		Now: e.now(),
	})
	require.NoError(t, err)
	require.Positive(t, f.ID)
	require.Equal(t, "files/0001-prices.csv", f.StoredPath)

	j := e.queuedJob(2, withFile(f.ID))
	require.Equal(t, f.ID, e.job(j.ID).FileID)

	got, err := e.s.DeleteJob(e.ctx, j.ID)
	require.NoError(t, err)
	require.NotNil(t, got, "the job's file is returned")
	require.Equal(t, f.ID, got.ID)
	require.Equal(t, "files/0001-prices.csv", got.StoredPath)
	require.Equal(t, "prices.csv", got.Name)
	_, err = e.s.GetJob(e.ctx, j.ID)
	requireNotFound(t, err)
}
