package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// jobTests cover creating, reading, listing and transitioning jobs.
var jobTests = []subtest{
	{"CreateJob", testCreateJob},
	{"GetJobMissing", testGetJobMissing},
	{"ListJobsNewestFirst", testListJobsNewestFirst},
	{"ListJobsFilters", testListJobsFilters},
	{"ListJobsKeyset", testListJobsKeyset},
	{"SetJobState", testSetJobState},
	{"SetJobStateConflict", testSetJobStateConflict},
	{"Cancel", testCancelJob},
	{"ResumeFinishedWhilePaused", testResumeFinishedWhilePaused},
}

// testResumeFinishedWhilePaused: a job whose last items finished while it
// was paused becomes DONE when resumed (nothing else would ever finish it).
func testResumeFinishedWhilePaused(t *testing.T, e *env) {
	j := e.queuedJob(2)
	claimed := e.claimAll("w1")
	require.Len(t, claimed, 2)
	_, err := e.s.SetJobState(e.ctx, &engine.SetJobStateParams{JobID: j.ID, From: []engine.JobState{engine.JobRunning}, To: engine.JobPaused, Now: e.now()})
	require.NoError(t, err)
	e.completeAll("w1", claimed, engine.ItemDone)
	require.Equal(t, engine.JobPaused, e.job(j.ID).State, "a paused job stays paused")
	e.advance(time.Second)
	got, err := e.s.SetJobState(e.ctx, &engine.SetJobStateParams{JobID: j.ID, From: []engine.JobState{engine.JobPaused}, To: engine.JobQueued, Now: e.now()})
	require.NoError(t, err)
	require.Equal(t, engine.JobDone, got.State)
	requireTimePtr(t, e.now(), got.FinishedAt, "FinishedAt")
}

// testCreateJob: a new job is INGESTING, empty, stamped with Now, and reads
// back the same.
func testCreateJob(t *testing.T, e *env) {
	j, err := e.s.CreateJob(e.ctx, &engine.CreateJobParams{
		UserID:      e.user.ID,
		Pipeline:    engine.DefaultPipeline,
		Name:        "prices.csv",
		Source:      "upload",
		SourceRef:   "prices.csv",
		Priority:    2,
		MaxAttempts: 4,
		Now:         e.now(),
	})
	require.NoError(t, err)
	require.Positive(t, j.ID)
	require.Equal(t, engine.JobIngesting, j.State)
	require.Equal(t, engine.ItemCounts{}, j.Counts)
	require.Zero(t, j.TotalItems)
	requireTime(t, e.now(), j.CreatedAt, "CreatedAt")
	require.Nil(t, j.FinishedAt)

	got := e.job(j.ID)
	require.Equal(t, j.ID, got.ID)
	require.Equal(t, e.user.ID, got.UserID)
	require.Equal(t, engine.DefaultPipeline, got.Pipeline)
	require.Equal(t, "prices.csv", got.Name)
	require.Equal(t, "upload", got.Source)
	require.Equal(t, "prices.csv", got.SourceRef)
	require.Equal(t, 2, got.Priority)
	require.Equal(t, 4, got.MaxAttempts)
	require.Equal(t, engine.JobIngesting, got.State)
	require.Equal(t, engine.ItemCounts{}, got.Counts)
	require.Zero(t, got.TotalItems)
	requireTime(t, e.now(), got.CreatedAt, "CreatedAt")
	require.Nil(t, got.FinishedAt)
	require.Nil(t, got.StartedAt)
}

// testGetJobMissing: an unknown id is not found.
func testGetJobMissing(t *testing.T, e *env) {
	_, err := e.s.GetJob(e.ctx, 987654)
	requireNotFound(t, err)
}

// jobIDs returns the IDs of jobs in order.
func jobIDs(jobs []*engine.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// listJobs lists jobs with p.
func (e *env) listJobs(p *engine.ListJobsParams) []*engine.Job {
	e.t.Helper()
	jobs, err := e.s.ListJobs(e.ctx, p)
	require.NoError(e.t, err, "ListJobs")
	return jobs
}

// testListJobsNewestFirst: jobs come newest (highest id) first.
func testListJobsNewestFirst(t *testing.T, e *env) {
	var ids []int64
	for range 5 {
		ids = append(ids, e.createJob().ID)
		e.advance(time.Second)
	}
	got := jobIDs(e.listJobs(&engine.ListJobsParams{Limit: 100}))
	require.Equal(t, []int64{ids[4], ids[3], ids[2], ids[1], ids[0]}, got)
}

// testListJobsFilters: States and UserID filter the listing.
func testListJobsFilters(t *testing.T, e *env) {
	ingesting := e.createJob()
	queued := e.queuedJob(2)
	failed := e.createJob()
	_, err := e.s.FailJob(e.ctx, &engine.FailJobParams{JobID: failed.ID, Reason: "unreadable", Now: e.now()})
	require.NoError(t, err)
	queued2 := e.queuedJob(1)

	got := jobIDs(e.listJobs(&engine.ListJobsParams{States: []engine.JobState{engine.JobQueued}, Limit: 100}))
	require.Equal(t, []int64{queued2.ID, queued.ID}, got)

	got = jobIDs(e.listJobs(&engine.ListJobsParams{States: []engine.JobState{engine.JobIngesting, engine.JobFailed}, Limit: 100}))
	require.Equal(t, []int64{failed.ID, ingesting.ID}, got)

	got = jobIDs(e.listJobs(&engine.ListJobsParams{States: []engine.JobState{engine.JobDone}, Limit: 100}))
	require.Empty(t, got)

	got = jobIDs(e.listJobs(&engine.ListJobsParams{UserID: e.user.ID, Limit: 100}))
	require.Equal(t, []int64{queued2.ID, failed.ID, queued.ID, ingesting.ID}, got)

	got = jobIDs(e.listJobs(&engine.ListJobsParams{UserID: e.user.ID + 1000, Limit: 100}))
	require.Empty(t, got, "no jobs of another user")

	got = jobIDs(e.listJobs(&engine.ListJobsParams{UserID: e.user.ID, States: []engine.JobState{engine.JobFailed}, Limit: 100}))
	require.Equal(t, []int64{failed.ID}, got)
}

// testListJobsKeyset: Limit bounds a page and BeforeID continues it.
func testListJobsKeyset(t *testing.T, e *env) {
	var ids []int64
	for range 7 {
		ids = append(ids, e.createJob().ID)
	}
	var seen []int64
	before := int64(0)
	pages := 0
	for {
		page := e.listJobs(&engine.ListJobsParams{BeforeID: before, Limit: 3})
		require.LessOrEqual(t, len(page), 3, "Limit respected")
		if len(page) == 0 {
			break
		}
		pages++
		seen = append(seen, jobIDs(page)...)
		before = page[len(page)-1].ID
		require.Less(t, pages, 10, "keyset listing never ends")
	}
	require.Equal(t, []int64{ids[6], ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]}, seen)
	require.Equal(t, 3, pages)

	page := e.listJobs(&engine.ListJobsParams{BeforeID: ids[3], Limit: 100})
	require.Equal(t, []int64{ids[2], ids[1], ids[0]}, jobIDs(page))
}

// testSetJobState: pause and resume move the job between states.
func testSetJobState(t *testing.T, e *env) {
	j := e.queuedJob(3)
	e.advance(time.Second)
	paused, err := e.s.SetJobState(e.ctx, &engine.SetJobStateParams{
		JobID: j.ID, From: []engine.JobState{engine.JobQueued, engine.JobRunning}, To: engine.JobPaused, Now: e.now(),
	})
	require.NoError(t, err)
	require.Equal(t, engine.JobPaused, paused.State)
	require.Equal(t, engine.JobPaused, e.job(j.ID).State)
	require.Nil(t, e.job(j.ID).FinishedAt)

	resumed, err := e.s.SetJobState(e.ctx, &engine.SetJobStateParams{
		JobID: j.ID, From: []engine.JobState{engine.JobPaused}, To: engine.JobQueued, Now: e.now(),
	})
	require.NoError(t, err)
	require.Equal(t, engine.JobQueued, resumed.State)
	require.Equal(t, engine.JobQueued, e.job(j.ID).State)
	require.Equal(t, engine.ItemCounts{Pending: 3}, e.job(j.ID).Counts)
}

// testSetJobStateConflict: a transition from a state not in From is
// ECONFLICT and changes nothing.
func testSetJobStateConflict(t *testing.T, e *env) {
	j := e.queuedJob(1)
	_, err := e.s.SetJobState(e.ctx, &engine.SetJobStateParams{
		JobID: j.ID, From: []engine.JobState{engine.JobPaused}, To: engine.JobQueued, Now: e.now(),
	})
	requireConflict(t, err)
	require.Equal(t, engine.JobQueued, e.job(j.ID).State)

	ing := e.createJob()
	_, err = e.s.SetJobState(e.ctx, &engine.SetJobStateParams{
		JobID: ing.ID, From: []engine.JobState{engine.JobQueued, engine.JobRunning}, To: engine.JobPaused, Now: e.now(),
	})
	requireConflict(t, err)
	require.Equal(t, engine.JobIngesting, e.job(ing.ID).State)
}

// testCancelJob: canceling sets FinishedAt; a canceled job cannot be paused.
func testCancelJob(t *testing.T, e *env) {
	j := e.queuedJob(3)
	running := e.claim("w1", 1)
	require.Len(t, running, 1)
	e.advance(5 * time.Second)
	c, err := e.s.SetJobState(e.ctx, &engine.SetJobStateParams{
		JobID: j.ID, From: []engine.JobState{engine.JobQueued, engine.JobRunning, engine.JobPaused}, To: engine.JobCanceled, Now: e.now(),
	})
	require.NoError(t, err)
	require.Equal(t, engine.JobCanceled, c.State)
	got := e.job(j.ID)
	require.Equal(t, engine.JobCanceled, got.State)
	requireTimePtr(t, e.now(), got.FinishedAt, "FinishedAt")

	_, err = e.s.SetJobState(e.ctx, &engine.SetJobStateParams{
		JobID: j.ID, From: []engine.JobState{engine.JobQueued, engine.JobRunning}, To: engine.JobPaused, Now: e.now(),
	})
	requireConflict(t, err)
	require.Equal(t, engine.JobCanceled, e.job(j.ID).State)

	// The items that had not run are SKIPPED with the reason; the running
	// one finishes and its outcome is kept.
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 1, Skipped: 2})
	for _, it := range e.items(j.ID) {
		if it.ID != running[0].ID {
			require.Equal(t, engine.ItemSkipped, it.Status)
			require.Equal(t, "canceled", it.LastError)
		}
	}
	require.Empty(t, e.claim("w2", 10))
	e.completeAll("w1", running, engine.ItemDone)
	e.requireCounts(j.ID, engine.ItemCounts{Done: 1, Skipped: 2})
	require.Equal(t, engine.JobCanceled, e.job(j.ID).State)
}
