package engine_test

import (
	"context"
	"strings"
	"sync/atomic"
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

func TestRunnerSmallJobOvertakesLargeJob(t *testing.T) {
	t.Parallel()
	const big = 20000
	s := newStore(t)
	g := newIngester(t, s, nil)
	res, err := g.IngestCSV(t.Context(), engine.IngestRequest{Name: "big", Input: strings.NewReader(csvRows(big))})
	require.NoError(t, err)
	large := res.Job
	small := enqueue(t, g, engine.DefaultPipeline, 10)

	smallDone := make(chan struct{})
	var largeDone atomic.Bool
	r := newRunner(t, s, engine.RunnerConfig{OnJobFinished: func(id int64) {
		switch id {
		case small.ID:
			close(smallDone)
		case large.ID:
			largeDone.Store(true)
		}
	}})
	stop := runInBackground(t, r)
	select {
	case <-smallDone:
	case <-time.After(20 * time.Second):
		t.Fatal("the small job did not finish")
	}
	require.False(t, largeDone.Load(), "the small job waited for the large one")
	got := getJob(t, s, large.ID)
	require.Positive(t, got.Counts.Pending, "the large job should still have work left: %+v", got.Counts)
	stop(10 * time.Second)
	require.Equal(t, engine.ItemCounts{Done: 10}, getJob(t, s, small.ID).Counts)
	requireNoProcessing(t, s)
}

func TestRunnerLateSmallJobOvertakesBusyLargeJob(t *testing.T) {
	t.Parallel()
	const big = 20000
	s := newStore(t)
	n := engine.NewNotifier()
	g := newIngester(t, s, n)
	res, err := g.IngestCSV(t.Context(), engine.IngestRequest{Name: "big", Input: strings.NewReader(csvRows(big))})
	require.NoError(t, err)
	large := res.Job

	smallID := make(chan int64, 1)
	smallDone := make(chan struct{})
	r := newRunner(t, s, engine.RunnerConfig{Notifier: n, OnJobFinished: func(id int64) {
		select {
		case want := <-smallID:
			if id == want {
				close(smallDone)
				return
			}
			smallID <- want
		default:
		}
	}})
	stop := runInBackground(t, r)
	require.Eventually(t, func() bool { return getJob(t, s, large.ID).Counts.Done > 0 }, 20*time.Second, time.Millisecond)
	small := enqueue(t, g, engine.DefaultPipeline, 10)
	smallID <- small.ID
	select {
	case <-smallDone:
	case <-time.After(20 * time.Second):
		t.Fatal("the small job did not finish")
	}
	got := getJob(t, s, large.ID)
	require.Positive(t, got.Counts.Pending, "the small job waited for the large one: %+v", got.Counts)
	stop(10 * time.Second)
	requireNoProcessing(t, s)
}

func TestRunnerStopsPromptlyAndFinishesInFlightItems(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	putPipeline(t, s, noopPipeline("slow", `{"delayMs":20}`))
	job := enqueue(t, newIngester(t, s, nil), "slow", 400)
	r := newRunner(t, s, engine.RunnerConfig{Concurrency: 4, Claim: adapt.ClaimConfig{Max: 8}})
	stop := runInBackground(t, r)
	require.Eventually(t, func() bool { return r.Summary().Completed >= 8 }, 10*time.Second, 5*time.Millisecond)

	start := time.Now()
	sum := stop(2 * time.Second)
	require.Less(t, time.Since(start), 2*time.Second)
	require.Equal(t, sum.Claimed, sum.Completed, "every claimed item got its outcome written")
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
	r := newRunner(t, s, engine.RunnerConfig{Concurrency: 3, ShutdownGrace: 50 * time.Millisecond})
	stop := runInBackground(t, r)
	require.Eventually(t, func() bool { return r.Summary().Claimed == 3 }, 10*time.Second, 5*time.Millisecond)

	start := time.Now()
	sum := stop(5 * time.Second)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, int64(3), sum.Completed)
	require.Equal(t, int64(3), sum.Retried, "an interrupted attempt is retried later")
	requireNoProcessing(t, s)
	for _, it := range scanItems(t, s, job.ID) {
		require.Equal(t, engine.ItemPending, it.Status)
		require.Equal(t, 1, it.Attempts)
		require.Equal(t, string(engine.ClassTransient), it.LastErrorCode)
		require.Contains(t, it.LastError, "context canceled")
		require.True(t, it.RunAt.After(start), "retry scheduled later")
	}
}

// claimSignal wraps a Store and signals each claim that found nothing.
type claimSignal struct {
	engine.Store
	empty chan struct{}
}

func (c *claimSignal) ClaimItems(ctx context.Context, p *engine.ClaimItemsParams) ([]*engine.Item, error) {
	items, err := c.Store.ClaimItems(ctx, p)
	if err == nil && len(items) == 0 {
		select {
		case c.empty <- struct{}{}:
		default:
		}
	}
	return items, err
}

func TestRunnerNotifierWakesIdleRunner(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	n := engine.NewNotifier()
	g := newIngester(t, s, n)
	wrapped := &claimSignal{Store: s, empty: make(chan struct{}, 1)}
	finished := make(chan int64, 1)
	r := newRunner(t, wrapped, engine.RunnerConfig{Notifier: n, PollInterval: 10 * time.Second,
		OnJobFinished: func(id int64) { finished <- id }})
	runInBackground(t, r)
	select {
	case <-wrapped.empty: // the runner found nothing and goes idle
	case <-time.After(10 * time.Second):
		t.Fatal("the runner never claimed")
	}

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
