package engine_test

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// finishedJobs records the ids OnJobFinished reports.
type finishedJobs struct {
	mu  sync.Mutex
	ids []int64
}

func (f *finishedJobs) add(id int64) {
	f.mu.Lock()
	f.ids = append(f.ids, id)
	f.mu.Unlock()
}

func (f *finishedJobs) list() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.ids...)
}

func attempts(t *testing.T, s engine.Store, itemID int64) []*engine.Attempt {
	t.Helper()
	list, err := s.ListAttempts(t.Context(), itemID)
	require.NoError(t, err)
	return list
}

func TestRunnerDrainsNoopJob(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	g := newIngester(t, s, nil)
	job := enqueue(t, g, engine.DefaultPipeline, 500)
	var fin finishedJobs
	sum := drain(t, s, engine.RunnerConfig{Concurrency: 4, OnJobFinished: fin.add})

	require.Equal(t, int64(500), sum.Claimed)
	require.Equal(t, int64(500), sum.Completed)
	require.Equal(t, map[string]int64{"DONE": 500}, sum.ByStatus)
	require.Zero(t, sum.Retried)
	require.Less(t, sum.Commits, int64(500), "outcomes are group-committed")
	require.Equal(t, []int64{job.ID}, fin.list())

	got := getJob(t, s, job.ID)
	require.Equal(t, engine.JobDone, got.State)
	require.Equal(t, engine.ItemCounts{Done: 500}, got.Counts)
	require.NotNil(t, got.StartedAt)
	require.NotNil(t, got.FinishedAt)
	items := scanItems(t, s, job.ID)
	require.Len(t, items, 500)
	for _, it := range items {
		require.Equal(t, engine.ItemDone, it.Status, "seq %d", it.Seq)
		require.Equal(t, 1, it.Attempts)
		require.Empty(t, it.LockedBy)
		require.JSONEq(t, string(it.Normalized), string(it.Result), "seq %d", it.Seq)
	}
	a := attempts(t, s, items[499].ID)
	require.Len(t, a, 1)
	require.Equal(t, engine.ItemDone, a[0].Outcome)
	require.Equal(t, "test-"+t.Name(), a[0].WorkerID)
	requireNoProcessing(t, s)
}

func TestRunnerRetriesTransientFailures(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	putPipeline(t, s, noopPipeline("flaky", `{"failEvery":5}`))
	job := enqueue(t, newIngester(t, s, nil), "flaky", 100)
	sum := drain(t, s, engine.RunnerConfig{Concurrency: 4})
	require.Equal(t, int64(20), sum.Retried)
	require.Equal(t, int64(120), sum.Claimed)

	got := getJob(t, s, job.ID)
	require.Equal(t, engine.JobDone, got.State)
	require.Equal(t, engine.ItemCounts{Done: 100}, got.Counts)
	for _, it := range scanItems(t, s, job.ID) {
		require.Equal(t, engine.ItemDone, it.Status, "seq %d", it.Seq)
		require.JSONEq(t, string(it.Normalized), string(it.Result))
		a := attempts(t, s, it.ID)
		if it.Seq%5 != 0 {
			require.Equal(t, 1, it.Attempts, "seq %d", it.Seq)
			require.Len(t, a, 1)
			continue
		}
		require.Equal(t, 2, it.Attempts, "seq %d", it.Seq)
		require.Len(t, a, 2, "seq %d", it.Seq)
		require.Equal(t, 1, a[0].AttemptNo)
		require.Equal(t, engine.ItemPending, a[0].Outcome)
		require.Equal(t, engine.ClassTransient, a[0].ErrorClass)
		require.Contains(t, a[0].Error, "injected transient failure")
		require.Equal(t, 2, a[1].AttemptNo)
		require.Equal(t, engine.ItemDone, a[1].Outcome)
		require.Empty(t, a[1].ErrorClass)
	}
}

func TestRunnerTransientBudgetEndsInError(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	p := &engine.Pipeline{Name: "down", Stages: []engine.Stage{{Processor: "alwaysTransient"}}, Retry: fastRetry()}
	p.Retry.Transient.MaxAttempts = 3
	putPipeline(t, s, p)
	job := enqueue(t, newIngester(t, s, nil), "down", 5)
	drain(t, s, engine.RunnerConfig{Registry: testRegistry()})

	got := getJob(t, s, job.ID)
	require.Equal(t, engine.JobDone, got.State)
	require.Equal(t, engine.ItemCounts{Error: 5}, got.Counts)
	for _, it := range scanItems(t, s, job.ID) {
		require.Equal(t, engine.ItemError, it.Status)
		require.Equal(t, 3, it.Attempts)
		require.Equal(t, string(engine.ClassTransient), it.LastErrorCode)
		require.Equal(t, "upstream is down", it.LastError)
		require.Len(t, attempts(t, s, it.ID), 3)
	}
}

func TestRunnerNotFoundWithoutVariants(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	putPipeline(t, s, noopPipeline("sparse", `{"notFoundEvery":7}`))
	job := enqueue(t, newIngester(t, s, nil), "sparse", 50)
	sum := drain(t, s, engine.RunnerConfig{})
	require.Equal(t, map[string]int64{"DONE": 43, "NOT_FOUND": 7}, sum.ByStatus)

	got := getJob(t, s, job.ID)
	require.Equal(t, engine.JobDone, got.State, "a job whose items all ended is DONE, failures included")
	require.Equal(t, engine.ItemCounts{Done: 43, NotFound: 7}, got.Counts)
	for _, it := range scanItems(t, s, job.ID) {
		require.Equal(t, 1, it.Attempts, "seq %d", it.Seq)
		if it.Seq%7 == 0 {
			require.Equal(t, engine.ItemNotFound, it.Status)
			require.Equal(t, string(engine.ClassNotFound), it.LastErrorCode)
			require.Contains(t, it.LastError, "injected not found")
		} else {
			require.Equal(t, engine.ItemDone, it.Status)
		}
	}
}

func TestRunnerNotFoundRotatesVariants(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	putPipeline(t, s, &engine.Pipeline{Name: "lookup", Retry: fastRetry(),
		Stages: []engine.Stage{{Processor: "variants", Config: json.RawMessage(`{"variants":3,"succeedAt":2}`)}}})
	putPipeline(t, s, &engine.Pipeline{Name: "never", Retry: fastRetry(),
		Stages: []engine.Stage{{Processor: "variants", Config: json.RawMessage(`{"variants":3,"succeedAt":-1}`)}}})
	g := newIngester(t, s, nil)
	found := enqueue(t, g, "lookup", 3)
	missing := enqueue(t, g, "never", 3)
	drain(t, s, engine.RunnerConfig{Registry: testRegistry()})

	for _, it := range scanItems(t, s, found.ID) {
		require.Equal(t, engine.ItemDone, it.Status)
		require.Equal(t, 3, it.Attempts)
		require.JSONEq(t, `{"foundWith":2}`, string(it.Result))
	}
	for _, it := range scanItems(t, s, missing.ID) {
		require.Equal(t, engine.ItemNotFound, it.Status)
		require.Equal(t, 3, it.Attempts, "one attempt per variant")
		require.Equal(t, 2, it.Strategy)
	}
}

func TestRunnerPermanentFailures(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	putPipeline(t, s, noopPipeline("strict", `{"permanentEvery":4}`))
	job := enqueue(t, newIngester(t, s, nil), "strict", 40)
	drain(t, s, engine.RunnerConfig{})

	got := getJob(t, s, job.ID)
	require.Equal(t, engine.JobDone, got.State)
	require.Equal(t, engine.ItemCounts{Done: 30, Error: 10}, got.Counts)
	for _, it := range scanItems(t, s, job.ID) {
		require.Equal(t, 1, it.Attempts, "permanent failures are never retried (seq %d)", it.Seq)
		if it.Seq%4 != 0 {
			require.Equal(t, engine.ItemDone, it.Status)
			continue
		}
		require.Equal(t, engine.ItemError, it.Status)
		require.Equal(t, string(engine.ClassPermanent), it.LastErrorCode)
		require.Contains(t, it.LastError, "injected permanent failure")
		require.Nil(t, it.Result)
	}
}

// TestRunnerProcessorPanicFailsOnlyItsItem: a panicking processor fails its
// item permanently; the worker and the other items carry on.
func TestRunnerProcessorPanicFailsOnlyItsItem(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	putPipeline(t, s, &engine.Pipeline{Name: "panics", Stages: []engine.Stage{{Processor: "panicOnOdd"}}})
	job := enqueue(t, newIngester(t, s, nil), "panics", 10)
	drain(t, s, engine.RunnerConfig{Registry: testRegistry()})
	got := getJob(t, s, job.ID)
	require.Equal(t, engine.JobDone, got.State)
	require.Equal(t, engine.ItemCounts{Done: 5, Error: 5}, got.Counts)
	for _, it := range scanItems(t, s, job.ID) {
		if it.Seq%2 == 1 {
			require.Equal(t, string(engine.ClassPermanent), it.LastErrorCode)
			require.Contains(t, it.LastError, "processor panicked: bug on seq")
		}
	}
}

// TestRunnerSpendingCapPausesJob: a pipeline's maxRequestsPerJob pauses its
// job after exactly that many attempts, with the reason.
func TestRunnerSpendingCapPausesJob(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	putPipeline(t, s, &engine.Pipeline{Name: "capped", MaxRequestsPerJob: 5, Stages: []engine.Stage{{Processor: "noop"}}})
	job := enqueue(t, newIngester(t, s, nil), "capped", 20)
	drain(t, s, engine.RunnerConfig{})
	got := getJob(t, s, job.ID)
	require.Equal(t, engine.JobPaused, got.State)
	require.Equal(t, engine.ItemCounts{Done: 5, Pending: 15}, got.Counts)
	require.Equal(t, int64(5), got.Requests)
	require.Contains(t, got.LastError, "spending cap reached")
}
