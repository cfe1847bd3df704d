package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// stageTests cover the claim's stage rules: earlier stages first within a
// job, and the stages' in-flight limits across every worker and job.
var stageTests = []subtest{
	{"EarlierStagesFirst", testStagesEarlierFirst},
	{"EarlierStagesFirstWhenNotDue", testStagesEarlierNotDue},
	{"InFlightLimit", testStagesInFlightLimit},
	{"InFlightLimitStageZero", testStagesInFlightLimitStageZero},
}

// toStage completes claimed items at the current time so that each is
// PENDING at stage, due now.
func (e *env) toStage(worker string, stage int, items ...*engine.Item) {
	e.t.Helper()
	var os []engine.Outcome
	for _, it := range items {
		o := e.outcome(it, engine.ItemPending)
		o.ErrorClass, o.Error = "", ""
		o.RunAt = e.now()
		o.NextStage = stage
		os = append(os, o)
	}
	require.Equal(e.t, len(items), e.complete(worker, os...).Applied)
}

// claimWith claims with stage limits.
func (e *env) claimWith(worker string, limit int, limits ...engine.StageLimit) []*engine.Item {
	e.t.Helper()
	items, err := e.s.ClaimItems(e.ctx, &engine.ClaimItemsParams{WorkerID: worker, Limit: limit, LeaseFor: defaultLease,
		Now: e.now(), StageLimits: limits})
	require.NoError(e.t, err, "ClaimItems")
	return items
}

func stagesOf(items []*engine.Item) []int {
	out := make([]int, len(items))
	for i, it := range items {
		out[i] = it.Stage
	}
	return out
}

// testStagesEarlierFirst: items of a later stage that have been due longer
// still wait for every due item of an earlier stage of their job.
func testStagesEarlierFirst(t *testing.T, e *env) {
	e.queuedJob(6)
	c := e.claim("w1", 6)
	require.Len(t, c, 6)
	// Due longest: two at stage 2, then two at stage 1, then two retries
	// at stage 0.
	e.advance(time.Second)
	e.toStage("w1", 2, c[0], c[1])
	e.advance(time.Second)
	e.toStage("w1", 1, c[2], c[3])
	e.advance(time.Second)
	e.toStage("w1", 0, c[4], c[5])
	e.advance(time.Second)

	var got []int
	for range 6 {
		one := e.claim("w2", 1)
		require.Len(t, one, 1)
		got = append(got, one[0].Stage)
	}
	require.Equal(t, []int{0, 0, 1, 1, 2, 2}, got, "one item per claim")
	require.Empty(t, e.claim("w2", 10))

	// In one claim too, in stage order.
	e.advance(time.Second)
	for _, it := range e.claimAll("w2") {
		require.Fail(t, "nothing left", "item %d", it.ID)
	}
}

// testStagesEarlierNotDue: an earlier stage whose items are not due yet
// does not hold later stages back, and a claim takes what it can of each
// stage in order.
func testStagesEarlierNotDue(t *testing.T, e *env) {
	e.queuedJob(5)
	c := e.claim("w1", 5)
	require.Len(t, c, 5)
	e.advance(time.Second)
	retry := e.outcome(c[0], engine.ItemPending) // stage 0, due in 30 s
	e.complete("w1", retry)
	e.toStage("w1", 3, c[1])
	e.toStage("w1", 1, c[2], c[3])
	e.toStage("w1", 0, c[4])
	e.advance(time.Second)

	got := e.claim("w2", 10)
	require.Equal(t, []int{0, 1, 1, 3}, stagesOf(got))
	require.Equal(t, c[4].ID, got[0].ID)
	e.advance(30 * time.Second)
	got = e.claim("w2", 10)
	require.Len(t, got, 1)
	require.Equal(t, c[0].ID, got[0].ID, "the retry once due")
}

// testStagesInFlightLimit: a stage's limit counts its PROCESSING items of
// every job of the pipeline and every worker; the other stages go on.
func testStagesInFlightLimit(t *testing.T, e *env) {
	a := e.queuedJob(4)
	b := e.queuedJob(4)
	c := e.claim("w1", 8)
	require.Len(t, c, 8)
	e.advance(time.Second)
	e.toStage("w1", 1, c...)
	e.advance(time.Second)

	limit := engine.StageLimit{Pipeline: a.Pipeline, Stage: 1, Max: 3}
	first := e.claimWith("w1", 10, limit)
	require.Len(t, first, 3, "the limit spans jobs")
	require.Empty(t, e.claimWith("w2", 10, limit), "another worker sees the same limit")
	other := engine.StageLimit{Pipeline: "another", Stage: 1, Max: 1}
	require.Empty(t, e.claimWith("w2", 10, limit, other))

	// One finishes: one more may go.
	e.advance(time.Second)
	e.complete("w1", e.outcome(first[0], engine.ItemDone))
	again := e.claimWith("w2", 10, limit)
	require.Len(t, again, 1)
	require.Equal(t, 1, again[0].Stage)

	// Without the limit the rest is claimable.
	rest := e.claim("w2", 10)
	require.Len(t, rest, 4)
	ca, cb := e.job(a.ID).Counts, e.job(b.ID).Counts
	require.Equal(t, engine.ItemCounts{Processing: 7, Done: 1}, engine.ItemCounts{Processing: ca.Processing + cb.Processing,
		Done: ca.Done + cb.Done})
}

// testStagesInFlightLimitStageZero: a limit on stage 0 holds a single-stage
// job's claims too.
func testStagesInFlightLimitStageZero(t *testing.T, e *env) {
	j := e.queuedJob(5)
	limit := engine.StageLimit{Pipeline: j.Pipeline, Stage: 0, Max: 2}
	require.Len(t, e.claimWith("w1", 10, limit), 2)
	require.Empty(t, e.claimWith("w1", 10, limit))
	require.Len(t, e.claim("w1", 10), 3)
}
