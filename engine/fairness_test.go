package engine_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/adapt"
)

// TestRunnerSmallJobsOvertakeLargeJob: claims are fair across jobs, so a
// small job enqueued with (or after) a large one finishes long before it.
func TestRunnerSmallJobsOvertakeLargeJob(t *testing.T) {
	t.Parallel()
	const big = 20000
	s := newStore(t)
	n := engine.NewNotifier()
	g := newIngester(t, s, n)
	res, err := g.IngestCSV(t.Context(), engine.IngestRequest{Name: "big", Input: strings.NewReader(csvRows(big))})
	require.NoError(t, err)
	large := res.Job
	early := enqueue(t, g, engine.DefaultPipeline, 10)

	finished := make(chan int64, 4)
	// Claims of at most 200 items keep the shutdown short; fairness is the
	// same at any size.
	r := newRunner(t, s, engine.RunnerConfig{Notifier: n, Claim: adapt.ClaimConfig{Max: 200},
		OnJobFinished: func(id int64) { finished <- id }})
	waitFinished := func(want int64) {
		t.Helper()
		select {
		case id := <-finished:
			require.Equal(t, want, id, "job %d finished first", id)
		case <-time.After(20 * time.Second):
			t.Fatalf("job %d did not finish", want)
		}
	}
	stop := runInBackground(t, r)
	waitFinished(early.ID)
	require.Positive(t, getJob(t, s, large.ID).Counts.Pending)

	// A job that arrives while the runner is busy with the large one.
	late := enqueue(t, g, engine.DefaultPipeline, 10)
	waitFinished(late.ID)
	got := getJob(t, s, large.ID)
	require.Positive(t, got.Counts.Pending, "the late job waited for the large one: %+v", got.Counts)
	require.Positive(t, got.Counts.Done)
	stop(10 * time.Second)
	requireNoProcessing(t, s)
	require.Equal(t, engine.ItemCounts{Done: 10}, getJob(t, s, early.ID).Counts)
	require.Equal(t, engine.ItemCounts{Done: 10}, getJob(t, s, late.ID).Counts)
}

// A job whose items are due is claimed even when higher-priority jobs, at
// least MaxJobsPerClaim of them, have only retries waiting. Before the fix
// those jobs took every slot of the claim (priority first), claimed
// nothing, and the due job waited for their retries (a minute here) while
// the workers sat idle.
func TestRunnerDueJobNotStarvedByRetryingHigherPriorityJobs(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	hi := noopPipeline("hi", `{"failEvery":1}`)
	hi.Priority = 10
	hi.Retry.Transient.Delays = []engine.Duration{engine.Duration(time.Minute)}
	putPipeline(t, s, hi)
	g := newIngester(t, s, nil)
	for range 2 {
		enqueue(t, g, "hi", 1)
	}
	w := watch(s)
	finished := make(chan int64, 1)
	r := newRunner(t, w, engine.RunnerConfig{MaxJobsPerClaim: 2, OnJobFinished: func(id int64) { finished <- id }})
	runInBackground(t, r)
	// Both high-priority items failed once and wait a minute for a retry.
	w.waitFor(t, func() bool { return w.completed.Load() >= 2 })

	low := enqueue(t, g, engine.DefaultPipeline, 5)
	select {
	case id := <-finished:
		require.Equal(t, low.ID, id)
	case <-time.After(5 * time.Second):
		t.Fatalf("a job with 5 due items was not processed in 5s while the only other work was 2 retries due in a minute "+
			"(claims that found nothing: %d)", w.emptyClaims.Load())
	}
}

// TestRunnerSmallJobNotQueuedBehindSlowItems: with slow items, the runner
// holds only about LookAhead of work beyond what it runs, so a job
// submitted while a large one is busy waits for at most a few hundred of
// the large job's items, not for whole claims of a thousand.
func TestRunnerSmallJobNotQueuedBehindSlowItems(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	n := engine.NewNotifier()
	g := newIngester(t, s, n)
	putPipeline(t, s, &engine.Pipeline{Name: "slow", Stages: []engine.Stage{{Processor: "noop", Config: json.RawMessage(`{"delayMs":20}`)}}})
	large := enqueue(t, g, "slow", 5000)
	finished := make(chan int64, 4)
	r := newRunner(t, s, engine.RunnerConfig{Notifier: n, Concurrency: 8, OnJobFinished: func(id int64) { finished <- id }})
	stop := runInBackground(t, r)
	// Let the claim controller learn the item time.
	require.Eventually(t, func() bool { return getJob(t, s, large.ID).Counts.Done >= 200 }, 20*time.Second, 10*time.Millisecond)

	before := getJob(t, s, large.ID).Counts.Done
	small := enqueue(t, g, "slow", 8)
	select {
	case id := <-finished:
		require.Equal(t, small.ID, id)
	case <-time.After(20 * time.Second):
		t.Fatal("the small job did not finish")
	}
	after := getJob(t, s, large.ID).Counts.Done
	stop(10 * time.Second)
	// LookAhead 500ms × 8 workers / 20ms = 200 items per claim, at most two
	// claims in hand, plus what completes while the small job runs.
	require.Less(t, after-before, int64(600), "the small job waited for %d items of the large one", after-before)
}
