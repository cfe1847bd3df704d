package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/adapt"
)

// runInBackground starts r.Run and returns a function that cancels it and
// waits for it to return (failing if it takes longer than within).
func runInBackground(t *testing.T, r *engine.Runner) (stop func(within time.Duration) *engine.RunSummary) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	type result struct {
		sum *engine.RunSummary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := r.Run(ctx)
		done <- result{sum, err}
	}()
	stopped := false
	stop = func(within time.Duration) *engine.RunSummary {
		t.Helper()
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case res := <-done:
			require.NoError(t, res.err)
			return res.sum
		case <-time.After(within):
			t.Fatalf("Run did not return within %s of its context being canceled", within)
			return nil
		}
	}
	t.Cleanup(func() { stop(30 * time.Second) })
	return stop
}

func TestRunnerDrainLeavesPausedJobs(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	g := newIngester(t, s, nil)
	paused := enqueue(t, g, engine.DefaultPipeline, 10)
	_, err := s.SetJobState(t.Context(), &engine.SetJobStateParams{JobID: paused.ID,
		From: []engine.JobState{engine.JobQueued, engine.JobRunning}, To: engine.JobPaused, Now: time.Now()})
	require.NoError(t, err)
	other := enqueue(t, g, engine.DefaultPipeline, 5)

	sum := drain(t, s, engine.RunnerConfig{})
	require.Equal(t, int64(5), sum.Completed)
	require.Equal(t, engine.JobDone, getJob(t, s, other.ID).State)
	got := getJob(t, s, paused.ID)
	require.Equal(t, engine.JobPaused, got.State)
	require.Equal(t, engine.ItemCounts{Pending: 10}, got.Counts, "a paused job's items are not claimed")
	q, err := s.QueueSummary(t.Context(), time.Now())
	require.NoError(t, err)
	require.True(t, q.Idle(), "a paused job leaves nothing to do for a drain: %+v", q)

	_, err = s.SetJobState(t.Context(), &engine.SetJobStateParams{JobID: paused.ID,
		From: []engine.JobState{engine.JobPaused}, To: engine.JobQueued, Now: time.Now()})
	require.NoError(t, err)
	sum = drain(t, s, engine.RunnerConfig{})
	require.Equal(t, int64(10), sum.Completed)
	got = getJob(t, s, paused.ID)
	require.Equal(t, engine.JobDone, got.State)
	require.Equal(t, engine.ItemCounts{Done: 10}, got.Counts)
}

func TestRunnerStopsPromptlyAndFinishesInFlightItems(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	putPipeline(t, s, noopPipeline("slow", `{"delayMs":20}`))
	job := enqueue(t, newIngester(t, s, nil), "slow", 400)
	w := watch(s)
	r := newRunner(t, w, engine.RunnerConfig{Concurrency: 4, Claim: adapt.ClaimConfig{Max: 8}})
	stop := runInBackground(t, r)
	w.waitFor(t, func() bool { return w.completed.Load() >= 8 })

	start := time.Now()
	sum := stop(2 * time.Second)
	require.Less(t, time.Since(start), 2*time.Second)
	require.Equal(t, sum.Claimed, sum.Completed+sum.Released, "every claimed item got its outcome written or was released")
	require.Less(t, sum.Completed, int64(400), "the runner stopped early")
	requireNoProcessing(t, s)
	got := getJob(t, s, job.ID)
	require.Equal(t, engine.ItemCounts{Pending: 400 - sum.Completed, Done: sum.Completed}, got.Counts)
	require.Equal(t, engine.JobRunning, got.State)
}

func TestRunnerShutdownGraceCancelsStuckItems(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	putPipeline(t, s, noopPipeline("stuck", `{"delayMs":60000}`))
	job := enqueue(t, newIngester(t, s, nil), "stuck", 3)
	w := watch(s)
	r := newRunner(t, w, engine.RunnerConfig{Concurrency: 3, ShutdownGrace: 50 * time.Millisecond})
	stop := runInBackground(t, r)
	w.waitFor(t, func() bool { return w.claimed.Load() == 3 })

	start := time.Now()
	sum := stop(5 * time.Second)
	require.Less(t, time.Since(start), 5*time.Second)
	// Items that had started are interrupted at the end of the grace and
	// retried later; any still queued when the stop came were released.
	require.Equal(t, int64(3), sum.Completed+sum.Released)
	require.Equal(t, sum.Completed, sum.Retried, "an interrupted attempt is retried later")
	requireNoProcessing(t, s)
	for _, it := range scanItems(t, s, job.ID) {
		require.Equal(t, engine.ItemPending, it.Status)
		if it.Attempts == 1 {
			require.Equal(t, string(engine.ClassTransient), it.LastErrorCode)
			require.Contains(t, it.LastError, "context canceled")
			require.True(t, it.RunAt.After(start), "retry scheduled later")
		} else {
			require.Zero(t, it.Attempts, "a released item was not charged")
		}
	}
}

func TestRunnerNotifierWakesIdleRunner(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	n := engine.NewNotifier()
	wrapped := watch(s)
	// The wrapped store does not claim in the enqueue (no
	// engine.EnqueueClaimer): the wake-up path.
	g := newIngester(t, wrapped, n)
	finished := make(chan int64, 1)
	r := newRunner(t, wrapped, engine.RunnerConfig{Notifier: n, PollInterval: 10 * time.Second,
		OnJobFinished: func(id int64) { finished <- id }})
	runInBackground(t, r)
	// The runner found nothing and goes idle.
	wrapped.waitFor(t, func() bool { return wrapped.emptyClaims.Load() > 0 })

	start := time.Now()
	job := enqueue(t, g, engine.DefaultPipeline, 1)
	select {
	case id := <-finished:
		require.Equal(t, job.ID, id)
	case <-time.After(2 * time.Second):
		t.Fatal("the enqueued job was not processed: the notifier did not wake the runner")
	}
	require.Less(t, time.Since(start), 2*time.Second)
	require.Equal(t, engine.JobDone, getJob(t, s, job.ID).State)
}

// An idle runner with nothing changed in the store claims about once a
// second, not on every poll tick. (Before the fix the `continue` meant to
// skip the claim only restarted the loop, which claimed: a write
// transaction every PollInterval.)
func TestRunnerIdlePollDoesNotClaimEveryTick(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	w := watch(s)
	r := newRunner(t, w, engine.RunnerConfig{PollInterval: 5 * time.Millisecond})
	stop := runInBackground(t, r)
	w.waitFor(t, func() bool { return w.emptyClaims.Load() > 0 })
	time.Sleep(300 * time.Millisecond) // observing that nothing happens needs time to pass
	stop(5 * time.Second)
	require.LessOrEqual(t, w.emptyClaims.Load(), int64(3),
		"an idle runner with nothing changed should not claim on every 5ms poll")
}

// Summary may be called while Run runs (before the fix, Run wrote the start
// time that Summary read without synchronisation: the race detector caught
// it).
func TestRunnerSummaryWhileRunning(t *testing.T) {
	// Not parallel: a race report fails every test running at the time.
	s := newStore(t)
	enqueue(t, newIngester(t, s, nil), engine.DefaultPipeline, 5)
	r := newRunner(t, s, engine.RunnerConfig{})
	stop := runInBackground(t, r)
	deadline := time.Now().Add(10 * time.Second)
	for r.Summary().Completed < 5 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	sum := stop(5 * time.Second)
	require.Equal(t, int64(5), sum.Completed)
	require.Positive(t, sum.Elapsed)
}

// TestRunnerReleasesUnstartedItemsOnStop: items claimed but still waiting
// in the local queue when the runner stops go back to PENDING at once, with
// no attempt charged and no attempt record.
func TestRunnerReleasesUnstartedItemsOnStop(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	putPipeline(t, s, noopPipeline("slow", `{"delayMs":100}`))
	job := enqueue(t, newIngester(t, s, nil), "slow", 50)
	w := watch(s)
	// One worker and claims of up to 10: most claimed items wait.
	r := newRunner(t, w, engine.RunnerConfig{Concurrency: 1, Claim: adapt.ClaimConfig{Max: 10}})
	stop := runInBackground(t, r)
	w.waitFor(t, func() bool { return w.claimed.Load() >= 2 })
	sum := stop(5 * time.Second)
	require.Positive(t, sum.Released, "some claimed items had not started")
	require.Equal(t, sum.Claimed, sum.Completed+sum.Released)
	requireNoProcessing(t, s)
	got := getJob(t, s, job.ID)
	require.Equal(t, engine.ItemCounts{Pending: 50 - sum.Completed, Done: sum.Completed}, got.Counts)
	for _, it := range scanItems(t, s, job.ID) {
		if it.Status == engine.ItemPending {
			require.Zero(t, it.Attempts, "item %d: a released claim is not an attempt", it.Seq)
		}
	}
}

// TestRunnerRenewsLeasesOfLongItems: an item that runs several times longer
// than its lease keeps it (the runner renews it), so the reaper never hands
// it out again: one attempt, no stale outcome.
func TestRunnerRenewsLeasesOfLongItems(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	// The item runs about four leases long. The lease is long enough that a
	// loaded machine (CI runs every package at once) still renews in time.
	putPipeline(t, s, noopPipeline("long", `{"delayMs":3000}`))
	job := enqueue(t, newIngester(t, s, nil), "long", 1)
	sum := drain(t, s, engine.RunnerConfig{
		Concurrency:  1,
		Lease:        adapt.LeaseConfig{Floor: 800 * time.Millisecond, Cap: 800 * time.Millisecond},
		ReapInterval: 50 * time.Millisecond,
	})
	require.Zero(t, sum.Stale, "no outcome lost its lease")
	require.Zero(t, sum.Reaped, "the reaper took nothing")
	it := scanItems(t, s, job.ID)[0]
	require.Equal(t, engine.ItemDone, it.Status)
	require.Equal(t, 1, it.Attempts)
}
