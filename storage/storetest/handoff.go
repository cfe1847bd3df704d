package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// handOffTests cover Outcome.HandOff: a stage's completion that keeps the
// item for its next stage in the same write.
var handOffTests = []subtest{
	{"KeepsItem", testHandOffKeepsItem},
	{"NotRunnableJobAdvances", testHandOffNotRunnable},
	{"OnlyWhenAdvancingNow", testHandOffOnlyAdvancing},
	{"ReleaseAndReap", testHandOffReleaseAndReap},
}

// handOff returns an outcome that advances it to its next stage, due now,
// asking to keep it under a lease of d.
func (e *env) handOff(it *engine.Item, d time.Duration) engine.Outcome {
	o := e.outcome(it, engine.ItemPending)
	o.ErrorClass, o.Error = "", ""
	o.RunAt = e.now()
	o.NextStage = it.Stage + 1
	o.Result = []byte(`{"stage":"` + sku(it.Seq) + `"}`)
	o.HandOff = true
	o.LeaseUntil = e.now().Add(d)
	return o
}

// testHandOffKeepsItem: the item stays PROCESSING under the same worker at
// its next stage (attempt 1, new lease, the stage result stored), the
// attempt of the finished stage is recorded, the counters do not move, no
// claim sees the item, and the next stage's outcome completes it.
func testHandOffKeepsItem(t *testing.T, e *env) {
	j := e.queuedJob(2)
	claimed := e.claim("w1", 2)
	require.Len(t, claimed, 2)
	e.advance(time.Second)

	ho := e.handOff(claimed[0], time.Minute)
	res := e.complete("w1", ho)
	require.Equal(t, 1, res.Applied)
	require.Equal(t, []int64{claimed[0].ID}, res.HandedOff)
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 2})
	require.Equal(t, int64(1), e.job(j.ID).Requests, "the finished stage's attempt counts as a request")

	got := e.item(claimed[0].ID)
	require.Equal(t, engine.ItemProcessing, got.Status)
	require.Equal(t, 1, got.Stage)
	require.Equal(t, 1, got.Attempts, "the next stage's first attempt is begun")
	require.Equal(t, "w1", got.LockedBy)
	requireTimePtr(t, ho.LeaseUntil, got.LeaseExpiresAt, "lease")
	requireJSON(t, ho.Result, got.Result, "stage result")
	require.Empty(t, e.claim("w2", 10), "a handed-off item is not claimable")

	// The same worker finishes the next stage under the handed-off attempt.
	next := *got
	e.advance(time.Second)
	done := e.outcome(&next, engine.ItemDone)
	res = e.complete("w1", done)
	require.Equal(t, 1, res.Applied)
	require.Empty(t, res.Stale)
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 1, Done: 1})

	atts, err := e.s.ListAttempts(e.ctx, claimed[0].ID)
	require.NoError(t, err)
	require.Len(t, atts, 2, "one attempt record per stage")
	require.Equal(t, 0, atts[0].Stage)
	require.Equal(t, engine.ItemPending, atts[0].Outcome)
	require.Equal(t, 1, atts[1].Stage)
	require.Equal(t, 1, atts[1].AttemptNo)
	require.Equal(t, engine.ItemDone, atts[1].Outcome)

	// A hand-off under another worker's name is stale.
	stale := e.handOff(claimed[1], time.Minute)
	res = e.complete("w2", stale)
	require.Equal(t, []int64{claimed[1].ID}, res.Stale)
	require.Empty(t, res.HandedOff)
}

// testHandOffNotRunnable: once the job is paused, a hand-off is refused and
// the outcome advances the item to PENDING at its next stage as usual.
func testHandOffNotRunnable(t *testing.T, e *env) {
	j := e.queuedJob(2)
	claimed := e.claim("w1", 2)
	require.Len(t, claimed, 2)
	_, err := e.s.SetJobState(e.ctx, &engine.SetJobStateParams{JobID: j.ID, From: []engine.JobState{engine.JobRunning},
		To: engine.JobPaused, Now: e.now()})
	require.NoError(t, err)
	e.advance(time.Second)

	res := e.complete("w1", e.handOff(claimed[0], time.Minute))
	require.Equal(t, 1, res.Applied)
	require.Empty(t, res.HandedOff)
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 1, Pending: 1})
	got := e.item(claimed[0].ID)
	require.Equal(t, engine.ItemPending, got.Status)
	require.Equal(t, 1, got.Stage)
	require.Zero(t, got.Attempts)
	require.Empty(t, got.LockedBy)
	require.Nil(t, got.LeaseExpiresAt)
}

// testHandOffOnlyAdvancing: HandOff on a retry, a final status or an
// advance due later is ignored.
func testHandOffOnlyAdvancing(t *testing.T, e *env) {
	j := e.queuedJob(3)
	claimed := e.claim("w1", 3)
	require.Len(t, claimed, 3)
	e.advance(time.Second)

	retry := e.outcome(claimed[0], engine.ItemPending)
	retry.HandOff, retry.LeaseUntil = true, e.now().Add(time.Minute)
	done := e.outcome(claimed[1], engine.ItemDone)
	done.HandOff, done.LeaseUntil = true, e.now().Add(time.Minute)
	later := e.handOff(claimed[2], time.Minute)
	later.RunAt = e.now().Add(10 * time.Second)
	res := e.complete("w1", retry, done, later)
	require.Equal(t, 3, res.Applied)
	require.Empty(t, res.HandedOff)
	e.requireCounts(j.ID, engine.ItemCounts{Pending: 2, Done: 1})
	require.Equal(t, 0, e.item(claimed[0].ID).Stage)
	require.Equal(t, 1, e.item(claimed[2].ID).Stage)
	require.Equal(t, engine.ItemPending, e.item(claimed[2].ID).Status)
}

// testHandOffReleaseAndReap: a handed-off item given back unstarted is
// PENDING at its next stage with no attempt charged; one whose lease
// expired is reaped like a claimed one.
func testHandOffReleaseAndReap(t *testing.T, e *env) {
	j := e.queuedJob(2)
	claimed := e.claim("w1", 2)
	require.Len(t, claimed, 2)
	e.advance(time.Second)
	res := e.complete("w1", e.handOff(claimed[0], time.Minute), e.handOff(claimed[1], 5*time.Second))
	require.Len(t, res.HandedOff, 2)

	kept := e.item(claimed[0].ID)
	n, err := e.s.ReleaseItems(e.ctx, &engine.ReleaseItemsParams{WorkerID: "w1", Items: []*engine.Item{kept}, Now: e.now()})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got := e.item(kept.ID)
	require.Equal(t, engine.ItemPending, got.Status)
	require.Equal(t, 1, got.Stage)
	require.Zero(t, got.Attempts)
	e.requireCounts(j.ID, engine.ItemCounts{Processing: 1, Pending: 1})

	e.advance(10 * time.Second)
	_, err = e.s.ReapExpiredLeases(e.ctx, &engine.ReapParams{Now: e.now(), Limit: 1000})
	require.NoError(t, err)
	got = e.item(claimed[1].ID)
	require.Equal(t, engine.ItemPending, got.Status)
	require.Equal(t, 1, got.Stage, "reaped at the stage it was handed off to")
	e.requireCounts(j.ID, engine.ItemCounts{Pending: 2})
	again := e.claimAll("w2")
	require.Len(t, again, 2)
	for _, it := range again {
		require.Equal(t, 1, it.Stage)
	}
}
