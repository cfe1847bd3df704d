package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// completeTests cover CompleteItems and ListAttempts.
var completeTests = []subtest{
	{"Done", testCompleteDone},
	{"Failures", testCompleteFailures},
	{"RetryAndNextStage", testCompleteRetry},
	{"DoneClearsError", testCompleteDoneClearsError},
	{"NilResultKeepsResult", testCompleteNilResult},
	{"StaleWrongWorker", testCompleteStaleWrongWorker},
	{"StaleWrongAttempt", testCompleteStaleWrongAttempt},
	{"StaleNotProcessing", testCompleteStaleNotProcessing},
	{"FinishesJob", testCompleteFinishesJob},
	{"FinishesJobInOneCall", testCompleteFinishesJobInOneCall},
	{"PausedJobNotFinished", testCompletePausedJob},
	{"ManyJobsOneCall", testCompleteManyJobs},
	{"Attempts", testCompleteAttempts},
}

// testCompleteDone: a DONE outcome stores the result, clears the lock and
// moves the counters.
func testCompleteDone(t *testing.T, e *env) {
	j := e.queuedJob(3)
	claimed := e.claim("w1", 3)
	require.Len(t, claimed, 3)
	e.advance(2 * time.Second)

	it := claimed[0]
	res := e.complete("w1", e.outcome(it, engine.ItemDone))
	require.Equal(t, 1, res.Applied)
	require.Empty(t, res.Stale)
	require.Empty(t, res.Finished)

	got := e.item(it.ID)
	require.Equal(t, engine.ItemDone, got.Status)
	requireJSON(t, resultJSON(it.Seq), got.Result, "Result")
	requireJSON(t, rowJSON(it.Seq), got.Input, "Input kept")
	requireJSON(t, normJSON(it.Seq), got.Normalized, "Normalized kept")
	require.Empty(t, got.LockedBy)
	require.Nil(t, got.LeaseExpiresAt)
	require.Empty(t, got.LastError)
	require.Empty(t, got.LastErrorCode)
	require.Equal(t, 1, got.Attempts)
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 2, Done: 1})
	require.Equal(t, engine.JobRunning, e.job(j.ID).State)
}

// testCompleteFailures: ERROR, NOT_FOUND and SKIPPED outcomes store the
// error and its class; counters are exact after each call.
func testCompleteFailures(t *testing.T, e *env) {
	j := e.queuedJob(4)
	claimed := e.claim("w1", 4)
	require.Len(t, claimed, 4)
	e.advance(time.Second)

	errOut := e.outcome(claimed[0], engine.ItemError)
	res := e.complete("w1", errOut)
	require.Equal(t, 1, res.Applied)
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 3, Error: 1})
	got := e.item(claimed[0].ID)
	require.Equal(t, engine.ItemError, got.Status)
	require.Equal(t, errOut.Error, got.LastError)
	require.Equal(t, string(engine.ClassPermanent), got.LastErrorCode)
	require.Empty(t, got.LockedBy)
	require.Nil(t, got.LeaseExpiresAt)

	nfOut := e.outcome(claimed[1], engine.ItemNotFound)
	nfOut.Result = []byte(`{"sku":"A2","found":false}`)
	nfOut.Strategy = 2 // the last query variant tried
	res = e.complete("w1", nfOut)
	require.Equal(t, 1, res.Applied)
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 2, Error: 1, NotFound: 1})
	got = e.item(claimed[1].ID)
	require.Equal(t, engine.ItemNotFound, got.Status)
	require.Equal(t, nfOut.Error, got.LastError)
	require.Equal(t, string(engine.ClassNotFound), got.LastErrorCode)
	requireJSON(t, nfOut.Result, got.Result, "NOT_FOUND result")
	require.Equal(t, 2, got.Strategy, "a terminal outcome keeps the strategy it reports")

	skOut := e.outcome(claimed[2], engine.ItemSkipped)
	skOut.ErrorClass = engine.ClassPermanent
	skOut.Error = "empty sku"
	res = e.complete("w1", skOut)
	require.Equal(t, 1, res.Applied)
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 1, Error: 1, NotFound: 1, Skipped: 1})
	got = e.item(claimed[2].ID)
	require.Equal(t, engine.ItemSkipped, got.Status)
	require.Equal(t, "empty sku", got.LastError)
	require.Empty(t, got.LockedBy)

	require.Equal(t, engine.JobRunning, e.job(j.ID).State, "one item still PROCESSING")
}

// testCompleteRetry: a PENDING outcome stores RunAt, Stage and Strategy;
// the item is due again at RunAt with its next attempt.
func testCompleteRetry(t *testing.T, e *env) {
	j := e.queuedJob(2)
	claimed := e.claim("w1", 2)
	require.Len(t, claimed, 2)
	e.advance(time.Second)

	retry := e.outcome(claimed[0], engine.ItemPending)
	retry.RunAt = e.now().Add(30 * time.Second)
	retry.Strategy = 2
	next := e.outcome(claimed[1], engine.ItemPending)
	next.ErrorClass, next.Error = "", ""
	next.RunAt = e.now()
	next.NextStage = 1
	next.Result = []byte(`{"sku":"A2","stage0":"ok"}`)
	res := e.complete("w1", retry, next)
	require.Equal(t, 2, res.Applied)
	require.Empty(t, res.Finished)
	e.requireCounts(j.ID, engine.ItemCounts{Pending: 2})
	require.Equal(t, engine.JobRunning, e.job(j.ID).State)

	got := e.item(claimed[0].ID)
	require.Equal(t, engine.ItemPending, got.Status)
	requireTime(t, retry.RunAt, got.RunAt, "RunAt")
	require.Equal(t, 2, got.Strategy)
	require.Zero(t, got.Stage)
	require.Equal(t, "timeout", got.LastError)
	require.Equal(t, string(engine.ClassTransient), got.LastErrorCode)
	require.Empty(t, got.LockedBy)
	require.Nil(t, got.LeaseExpiresAt)
	require.Equal(t, 1, got.Attempts)

	got = e.item(claimed[1].ID)
	require.Equal(t, engine.ItemPending, got.Status)
	require.Equal(t, 1, got.Stage)
	requireTime(t, next.RunAt, got.RunAt, "RunAt")
	requireJSON(t, next.Result, got.Result, "stage result")

	// Only the next-stage item is due now.
	again := e.claim("w2", 10)
	require.Len(t, again, 1)
	require.Equal(t, claimed[1].ID, again[0].ID)
	require.Equal(t, 1, again[0].Stage)
	require.Equal(t, 1, again[0].Attempts, "a new stage starts its own attempt count")

	e.advance(29 * time.Second)
	require.Empty(t, e.claim("w2", 10), "retry not due before its RunAt")
	e.advance(time.Second)
	again = e.claim("w2", 10)
	require.Len(t, again, 1, "retry due at its RunAt")
	require.Equal(t, claimed[0].ID, again[0].ID)
	require.Equal(t, 2, again[0].Strategy)
	require.Equal(t, 2, again[0].Attempts)
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 2})
}

// testCompleteDoneClearsError: DONE after a failed attempt clears the error.
func testCompleteDoneClearsError(t *testing.T, e *env) {
	j := e.queuedJob(1)
	it := e.claim("w1", 1)[0]
	o := e.outcome(it, engine.ItemPending)
	o.RunAt = e.now()
	e.complete("w1", o)
	require.Equal(t, "timeout", e.item(it.ID).LastError)

	it = e.claim("w1", 1)[0]
	require.Equal(t, 2, it.Attempts)
	res := e.complete("w1", e.outcome(it, engine.ItemDone))
	require.Equal(t, 1, res.Applied)
	got := e.item(it.ID)
	require.Equal(t, engine.ItemDone, got.Status)
	require.Empty(t, got.LastError)
	require.Empty(t, got.LastErrorCode)
	e.requireCounts(j.ID, engine.ItemCounts{Done: 1})
}

// testCompleteNilResult: an outcome without a Result keeps the stored one;
// an outcome with one replaces it.
func testCompleteNilResult(t *testing.T, e *env) {
	e.queuedJob(1)
	it := e.claim("w1", 1)[0]
	stage0 := e.outcome(it, engine.ItemPending)
	stage0.ErrorClass, stage0.Error = "", ""
	stage0.RunAt = e.now()
	stage0.NextStage = 1
	stage0.Result = []byte(`{"sku":"A1","stage0":"ok"}`)
	e.complete("w1", stage0)

	it = e.claim("w1", 1)[0]
	failed := e.outcome(it, engine.ItemError)
	failed.Result = nil
	e.complete("w1", failed)
	got := e.item(it.ID)
	require.Equal(t, engine.ItemError, got.Status)
	requireJSON(t, stage0.Result, got.Result, "a nil Result keeps the stored result")
}

// requireUntouched checks that a claimed item is still PROCESSING under its
// lease.
func (e *env) requireUntouched(claimed *engine.Item) {
	e.t.Helper()
	got := e.item(claimed.ID)
	require.Equal(e.t, engine.ItemProcessing, got.Status)
	require.Equal(e.t, claimed.LockedBy, got.LockedBy)
	require.Equal(e.t, claimed.Attempts, got.Attempts)
	require.Empty(e.t, got.Result)
}

// testCompleteStaleWrongWorker: another worker's outcome is dropped.
func testCompleteStaleWrongWorker(t *testing.T, e *env) {
	j := e.queuedJob(2)
	claimed := e.claim("w1", 2)
	require.Len(t, claimed, 2)

	res := e.complete("w2", e.outcome(claimed[0], engine.ItemDone), e.outcome(claimed[1], engine.ItemDone))
	require.Zero(t, res.Applied)
	require.ElementsMatch(t, itemIDs(claimed), res.Stale)
	require.Empty(t, res.Finished)
	e.requireUntouched(claimed[0])
	e.requireUntouched(claimed[1])
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 2})
	attempts, err := e.s.ListAttempts(e.ctx, claimed[0].ID)
	require.NoError(t, err)
	require.Empty(t, attempts, "no attempt recorded for a stale outcome")

	// A mixed call applies the good outcome only.
	wrong := e.outcome(claimed[1], engine.ItemError)
	wrong.Attempt++
	res, err = e.s.CompleteItems(e.ctx, &engine.CompleteItemsParams{
		WorkerID: "w1",
		Outcomes: []engine.Outcome{e.outcome(claimed[0], engine.ItemDone), wrong},
		Now:      e.now(),
	})
	require.NoError(t, err)
	require.Equal(t, 1, res.Applied)
	require.Equal(t, []int64{claimed[1].ID}, res.Stale)
	e.requireUntouched(claimed[1])
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 1, Done: 1})
}

// testCompleteStaleWrongAttempt: an outcome for another attempt is dropped.
func testCompleteStaleWrongAttempt(t *testing.T, e *env) {
	j := e.queuedJob(2)
	claimed := e.claim("w1", 2)
	require.Len(t, claimed, 2)

	old := e.outcome(claimed[0], engine.ItemDone)
	old.Attempt = claimed[0].Attempts - 1
	future := e.outcome(claimed[1], engine.ItemDone)
	future.Attempt = claimed[1].Attempts + 1
	good := e.outcome(claimed[1], engine.ItemDone)

	res := e.complete("w1", old, future)
	require.Zero(t, res.Applied)
	require.ElementsMatch(t, itemIDs(claimed), res.Stale)
	e.requireUntouched(claimed[0])
	e.requireUntouched(claimed[1])
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 2})

	res = e.complete("w1", good)
	require.Equal(t, 1, res.Applied)
	require.Empty(t, res.Stale)
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 1, Done: 1})
}

// testCompleteStaleNotProcessing: an outcome for an item that was already
// completed is dropped, even from the same worker and attempt.
func testCompleteStaleNotProcessing(t *testing.T, e *env) {
	j := e.queuedJob(2)
	claimed := e.claim("w1", 2)
	first := e.outcome(claimed[0], engine.ItemDone)
	res := e.complete("w1", first)
	require.Equal(t, 1, res.Applied)

	e.advance(time.Second)
	again := e.outcome(claimed[0], engine.ItemError)
	res = e.complete("w1", again)
	require.Zero(t, res.Applied)
	require.Equal(t, []int64{claimed[0].ID}, res.Stale)
	got := e.item(claimed[0].ID)
	require.Equal(t, engine.ItemDone, got.Status)
	requireJSON(t, resultJSON(claimed[0].Seq), got.Result, "Result unchanged")
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 1, Done: 1})

	attempts, err := e.s.ListAttempts(e.ctx, claimed[0].ID)
	require.NoError(t, err)
	require.Len(t, attempts, 1, "only the applied outcome is recorded")
}

// testCompleteFinishesJob: the call that completes the last item finishes
// the job.
func testCompleteFinishesJob(t *testing.T, e *env) {
	j := e.queuedJob(2)
	claimed := e.claim("w1", 2)
	require.Len(t, claimed, 2)

	e.advance(time.Second)
	res := e.complete("w1", e.outcome(claimed[0], engine.ItemDone))
	require.Empty(t, res.Finished)
	require.Equal(t, engine.JobRunning, e.job(j.ID).State)
	require.Nil(t, e.job(j.ID).FinishedAt)

	e.advance(time.Second)
	res = e.complete("w1", e.outcome(claimed[1], engine.ItemError))
	require.Equal(t, []int64{j.ID}, res.Finished)
	got := e.job(j.ID)
	require.Equal(t, engine.JobDone, got.State)
	requireTimePtr(t, e.now(), got.FinishedAt, "FinishedAt")
	require.Equal(t, engine.ItemCounts{Done: 1, Error: 1}, got.Counts)
	require.Equal(t, int64(2), got.TotalItems)
}

// testCompleteFinishesJobInOneCall: completing every item of a job in one
// call finishes it; a pending retry keeps it open.
func testCompleteFinishesJobInOneCall(t *testing.T, e *env) {
	j := e.queuedJob(3)
	claimed := e.claim("w1", 3)
	require.Len(t, claimed, 3)
	res := e.complete("w1",
		e.outcome(claimed[0], engine.ItemDone),
		e.outcome(claimed[1], engine.ItemNotFound),
		e.outcome(claimed[2], engine.ItemPending))
	require.Equal(t, 3, res.Applied)
	require.Empty(t, res.Finished, "a retry is still pending")
	require.Equal(t, engine.JobRunning, e.job(j.ID).State)

	e.advance(time.Minute)
	it := e.claim("w1", 3)
	require.Len(t, it, 1)
	res = e.complete("w1", e.outcome(it[0], engine.ItemDone))
	require.Equal(t, []int64{j.ID}, res.Finished)
	require.Equal(t, engine.JobDone, e.job(j.ID).State)
	e.requireCounts(j.ID, engine.ItemCounts{Done: 2, NotFound: 1})
}

// testCompletePausedJob: outcomes of a paused job's items still apply, but
// the job stays PAUSED.
func testCompletePausedJob(t *testing.T, e *env) {
	j := e.queuedJob(2)
	claimed := e.claim("w1", 2)
	require.Len(t, claimed, 2)
	_, err := e.s.SetJobState(e.ctx, &engine.SetJobStateParams{
		JobID: j.ID, From: []engine.JobState{engine.JobQueued, engine.JobRunning}, To: engine.JobPaused, Now: e.now(),
	})
	require.NoError(t, err)

	res := e.completeAll("w1", claimed, engine.ItemDone)
	require.Empty(t, res.Finished)
	got := e.job(j.ID)
	require.Equal(t, engine.JobPaused, got.State)
	require.Equal(t, engine.ItemCounts{Done: 2}, got.Counts)
}

// testCompleteManyJobs: one call applies outcomes across several jobs with
// exact counters and finishes each job.
func testCompleteManyJobs(t *testing.T, e *env) {
	var jobs []*engine.Job
	for range 3 {
		jobs = append(jobs, e.queuedJob(4))
	}
	claimed := e.claimAll("w1")
	require.Len(t, claimed, 12)

	statuses := []engine.ItemStatus{engine.ItemDone, engine.ItemError, engine.ItemNotFound, engine.ItemSkipped}
	var outs []engine.Outcome
	for _, it := range claimed {
		outs = append(outs, e.outcome(it, statuses[(it.Seq-1)%4]))
	}
	e.advance(time.Second)
	res := e.complete("w1", outs...)
	require.Equal(t, 12, res.Applied)
	require.Empty(t, res.Stale)
	require.ElementsMatch(t, jobIDs(jobs), res.Finished)
	for _, j := range jobs {
		got := e.job(j.ID)
		require.Equal(t, engine.JobDone, got.State)
		requireTimePtr(t, e.now(), got.FinishedAt, "FinishedAt")
		require.Equal(t, engine.ItemCounts{Done: 1, Error: 1, NotFound: 1, Skipped: 1}, got.Counts)
	}
}

// testCompleteAttempts: every applied outcome leaves an attempt record,
// listed oldest first.
func testCompleteAttempts(t *testing.T, e *env) {
	e.queuedJob(1)
	it := e.claim("w1", 1)[0]
	e.advance(time.Second)
	first := e.outcome(it, engine.ItemPending)
	first.RunAt = e.now()
	first.Detail = []byte(`{"http":503}`)
	e.complete("w1", first)

	e.advance(time.Second)
	it = e.claim("w2", 1)[0]
	e.advance(time.Second)
	second := e.outcome(it, engine.ItemNotFound)
	e.complete("w2", second)

	attempts, err := e.s.ListAttempts(e.ctx, it.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 2)

	a := attempts[0]
	require.Equal(t, it.ID, a.ItemID)
	require.Equal(t, it.JobID, a.JobID)
	require.Equal(t, 1, a.AttemptNo)
	require.Equal(t, engine.ItemPending, a.Outcome)
	require.Equal(t, engine.ClassTransient, a.ErrorClass)
	require.Equal(t, "timeout", a.Error)
	require.Equal(t, "w1", a.WorkerID)

	b := attempts[1]
	require.Equal(t, 2, b.AttemptNo)
	require.Equal(t, engine.ItemNotFound, b.Outcome)
	require.Equal(t, engine.ClassNotFound, b.ErrorClass)
	require.Equal(t, second.Error, b.Error)
	require.Equal(t, "w2", b.WorkerID)

	none, err := e.s.ListAttempts(e.ctx, it.ID+1000)
	if err == nil {
		require.Empty(t, none, "an unknown item has no attempts")
	}
}
