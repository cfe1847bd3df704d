package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// countingProc records how often each item was started and, while gate is
// set, holds every item until the gate is closed.
type countingProc struct {
	mu      sync.Mutex
	runs    map[int64]int
	started chan int64
	gate    chan struct{}
}

func newCountingProc(gated bool) *countingProc {
	p := &countingProc{runs: map[int64]int{}, started: make(chan int64, 1024)}
	if gated {
		p.gate = make(chan struct{})
	}
	return p
}

func (p *countingProc) Process(ctx context.Context, t *engine.Task) (json.RawMessage, error) {
	p.mu.Lock()
	p.runs[t.Item.ID]++
	p.mu.Unlock()
	p.started <- t.Item.ID
	if p.gate != nil {
		select {
		case <-p.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return t.Input, nil
}

func (p *countingProc) runsOf(id int64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runs[id]
}

// directSetup is a store with a pipeline "counted" of one countingProc
// stage, an ingester and a runner sharing one notifier; the runner is
// watched, so tests see its claims.
type directSetup struct {
	s    engine.Store
	w    *watchedStore
	n    *engine.Notifier
	g    *engine.Ingester
	proc *countingProc
	reg  *engine.Registry
}

func newDirectSetup(t *testing.T, gated bool) *directSetup {
	t.Helper()
	s := newStore(t)
	d := &directSetup{s: s, w: watch(s), n: engine.NewNotifier(), proc: newCountingProc(gated), reg: testRegistry()}
	d.reg.Register("counted", func(json.RawMessage) (engine.Processor, error) { return d.proc, nil })
	_, err := s.PutPipeline(t.Context(), &engine.PutPipelineParams{Pipeline: &engine.Pipeline{Name: "counted",
		Stages: []engine.Stage{{Processor: "counted"}}}, Now: time.Now()})
	require.NoError(t, err)
	d.g = newIngester(t, s, d.n)
	return d
}

// runner starts an idle runner (it has found nothing to claim) and
// returns its stop function.
func (d *directSetup) runner(t *testing.T, cfg engine.RunnerConfig) func(time.Duration) *engine.RunSummary {
	t.Helper()
	cfg.Notifier, cfg.Registry = d.n, d.reg
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 10 * time.Second // only the hand-off or a wake-up can start an item
	}
	stop := runInBackground(t, newRunner(t, d.w, cfg))
	d.w.waitFor(t, func() bool { return d.w.emptyClaims.Load() > 0 })
	return stop
}

func (d *directSetup) enqueue(t *testing.T, row string) *engine.Job {
	t.Helper()
	job, err := d.g.Enqueue(t.Context(), engine.EnqueueRequest{Pipeline: "counted", Rows: []json.RawMessage{json.RawMessage(row)}})
	require.NoError(t, err)
	return job
}

func waitStarted(t *testing.T, p *countingProc) int64 {
	t.Helper()
	select {
	case id := <-p.started:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("no item started")
		return 0
	}
}

// An item enqueued while a runner of this process is idle is written as
// claimed by it in the enqueue transaction and handed over: it starts
// without a claim, its row and job look as a claim would leave them, and
// it finishes once with exact counters.
func TestEnqueueHandsItemToIdleRunner(t *testing.T) {
	t.Parallel()
	d := newDirectSetup(t, true)
	stop := d.runner(t, engine.RunnerConfig{WorkerID: "w1"})
	claimedBefore := d.w.claimed.Load()

	job := d.enqueue(t, `{"a":" x "}`)
	// The enqueue's own transaction left the job running its item.
	require.Equal(t, engine.JobRunning, job.State)
	require.Equal(t, engine.ItemCounts{Processing: 1}, job.Counts)
	require.EqualValues(t, 1, job.TotalItems)
	require.NotNil(t, job.StartedAt)

	id := waitStarted(t, d.proc)
	it := scanItems(t, d.s, job.ID)[0]
	require.Equal(t, id, it.ID)
	require.Equal(t, engine.ItemProcessing, it.Status)
	require.Equal(t, 1, it.Attempts)
	require.Equal(t, "w1", it.LockedBy)
	require.NotNil(t, it.LeaseExpiresAt)
	require.Equal(t, claimedBefore, d.w.claimed.Load(), "no claim took the item")

	close(d.proc.gate)
	d.w.waitFor(t, func() bool { return getJob(t, d.s, job.ID).State == engine.JobDone })
	sum := stop(5 * time.Second)
	require.EqualValues(t, 1, sum.Direct)
	require.EqualValues(t, 1, sum.Completed)
	require.Equal(t, claimedBefore, d.w.claimed.Load(), "no claim took the item")
	got := getJob(t, d.s, job.ID)
	require.Equal(t, engine.ItemCounts{Done: 1}, got.Counts)
	it = scanItems(t, d.s, job.ID)[0]
	require.Equal(t, engine.ItemDone, it.Status)
	require.Equal(t, 1, it.Attempts)
	require.JSONEq(t, `{"a":"x"}`, string(it.Result))
	require.Equal(t, 1, d.proc.runsOf(id))
	requireNoProcessing(t, d.s)
}

// A runner whose every worker is busy takes no hand-off: the item is left
// PENDING by its enqueue and claimed normally once a worker is free.
func TestEnqueueLeavesItemPendingWhenRunnerBusy(t *testing.T) {
	t.Parallel()
	d := newDirectSetup(t, true)
	stop := d.runner(t, engine.RunnerConfig{Concurrency: 1})
	first := d.enqueue(t, `{"n":"1"}`)
	require.Equal(t, engine.JobRunning, first.State, "the idle runner took the first item")
	waitStarted(t, d.proc)

	second := d.enqueue(t, `{"n":"2"}`)
	require.Equal(t, engine.JobQueued, second.State, "the busy runner took no hand-off")
	require.Equal(t, engine.ItemCounts{Pending: 1}, second.Counts)

	close(d.proc.gate)
	d.w.waitFor(t, func() bool { return getJob(t, d.s, second.ID).State == engine.JobDone })
	sum := stop(5 * time.Second)
	require.EqualValues(t, 1, sum.Direct)
	require.EqualValues(t, 2, sum.Completed)
	require.GreaterOrEqual(t, d.w.claimed.Load(), int64(1), "the second item was claimed")
	for _, j := range []*engine.Job{first, second} {
		require.Equal(t, engine.ItemCounts{Done: 1}, getJob(t, d.s, j.ID).Counts)
		it := scanItems(t, d.s, j.ID)[0]
		require.Equal(t, 1, it.Attempts)
		require.Equal(t, 1, d.proc.runsOf(it.ID))
	}
	requireNoProcessing(t, d.s)
}

// A process that dies after its enqueue committed an item claimed for one
// of its runners, before the hand-off (simulated: the claim is written for
// a worker that never runs it), leaves a durable, leased item: the reaper
// of another process returns it once the lease expires and it runs once.
func TestEnqueueClaimedItemOfDeadProcessIsReaped(t *testing.T) {
	t.Parallel()
	d := newDirectSetup(t, false)
	ec, ok := d.s.(engine.EnqueueClaimer)
	require.True(t, ok, "the SQLite store claims in the enqueue")
	now := time.Now()
	job, it, err := ec.EnqueueJobClaimed(t.Context(), &engine.EnqueueJobParams{
		Job:   engine.CreateJobParams{Pipeline: "counted", Name: "orphan", Now: now, UserID: defaultUser(t, d.s)},
		Items: []engine.NewItem{{Seq: 1, Input: json.RawMessage(`{"a":1}`), Normalized: json.RawMessage(`{"a":1}`)}},
	}, &engine.EnqueueClaim{WorkerID: "dead:1", LeaseFor: 20 * time.Millisecond})
	require.NoError(t, err)
	require.NotNil(t, it)
	require.Equal(t, engine.ItemCounts{Processing: 1}, job.Counts)

	sum := drain(t, d.w, engine.RunnerConfig{Registry: d.reg, ReapInterval: 10 * time.Millisecond})
	require.EqualValues(t, 1, sum.Reaped)
	require.EqualValues(t, 1, sum.Completed)
	require.Zero(t, sum.Direct)
	require.Equal(t, engine.ItemCounts{Done: 1}, getJob(t, d.s, job.ID).Counts)
	got := scanItems(t, d.s, job.ID)[0]
	require.Equal(t, engine.ItemDone, got.Status)
	require.Equal(t, 1, d.proc.runsOf(it.ID), "run once, by the process that reaped it")
	requireNoProcessing(t, d.s)
}

// Many one-item jobs enqueued from several goroutines while the runner
// takes hand-offs, and while it is stopped in the middle: every item runs
// exactly once (a second runner finishes what the first gave back) and the
// counters match the rows.
func TestEnqueueHandOffNeverLosesOrRepeatsItems(t *testing.T) {
	t.Parallel()
	d := newDirectSetup(t, false)
	stop := d.runner(t, engine.RunnerConfig{Concurrency: 4})
	const writers, each = 4, 25
	var wg sync.WaitGroup
	jobs := make(chan int64, writers*each)
	progress := make(chan struct{}, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				job, err := d.g.Enqueue(context.Background(), engine.EnqueueRequest{Pipeline: "counted",
					Rows: []json.RawMessage{json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))}})
				if err != nil {
					t.Error(err)
					return
				}
				jobs <- job.ID
				progress <- struct{}{}
			}
		})
	}
	// The runner ends while the others go on enqueueing.
	for range writers * each / 3 {
		<-progress
	}
	first := stop(10 * time.Second)
	wg.Wait()
	close(jobs)
	second := drain(t, d.s, engine.RunnerConfig{Registry: d.reg, Notifier: d.n})
	require.Positive(t, first.Direct, "the idle runner took hand-offs")
	require.EqualValues(t, writers*each, first.Completed+second.Completed)
	n := 0
	for id := range jobs {
		n++
		require.Equal(t, engine.ItemCounts{Done: 1}, getJob(t, d.s, id).Counts, "job %d", id)
		it := scanItems(t, d.s, id)[0]
		require.Equal(t, engine.ItemDone, it.Status)
		require.Equal(t, 1, d.proc.runsOf(it.ID), "item %d ran once", it.ID)
	}
	require.Equal(t, writers*each, n)
	requireNoProcessing(t, d.s)
}

func defaultUser(t *testing.T, s engine.Store) int64 {
	t.Helper()
	u, err := s.DefaultUser(t.Context())
	require.NoError(t, err)
	return u.ID
}
