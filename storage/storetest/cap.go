package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// capTests cover the per-job spending cap (CreateJobParams.RequestCap).
var capTests = []subtest{
	{"PausesAtTheCap", testCapPausesAtTheCap},
}

// testCapPausesAtTheCap: claims never exceed the remaining budget, the job
// is PAUSED with the reason once the cap's requests ran, and resuming grants
// another cap.
func testCapPausesAtTheCap(t *testing.T, e *env) {
	j := e.queuedJob(10, func(p *engine.CreateJobParams) { p.RequestCap = 3 })
	require.Equal(t, int64(3), e.job(j.ID).RequestLimit)

	claimed := e.claim("w1", 100)
	require.Len(t, claimed, 3, "no more items than the budget")
	require.Empty(t, e.claim("w2", 100), "the budget is spoken for while they run")
	e.completeAll("w1", claimed, engine.ItemDone)

	got := e.job(j.ID)
	require.Equal(t, engine.JobPaused, got.State)
	require.Contains(t, got.LastError, "spending cap reached: 3 requests")
	require.Equal(t, int64(3), got.Requests)
	require.Empty(t, e.claim("w1", 100), "a paused job hands out nothing")

	resumed, err := e.s.SetJobState(e.ctx, &engine.SetJobStateParams{JobID: j.ID, From: []engine.JobState{engine.JobPaused},
		To: engine.JobQueued, Now: e.now()})
	require.NoError(t, err)
	require.Equal(t, engine.JobQueued, resumed.State)
	require.Equal(t, int64(6), resumed.RequestLimit, "resuming grants another cap")
	require.Empty(t, resumed.LastError)
	require.Len(t, e.claim("w1", 100), 3)
}
