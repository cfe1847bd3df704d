package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/engine/adapt"
)

// RunnerConfig configures a Runner. Zero values take the defaults.
type RunnerConfig struct {
	Store    Store
	Registry *Registry
	Notifier *Notifier
	Clock    Clock
	Logger   *slog.Logger
	// WorkerID names this runner in leases and attempts; default host:pid.
	WorkerID string
	// Concurrency is the number of items processed at once; default 8.
	Concurrency int
	Claim       adapt.ClaimConfig
	Lease       adapt.LeaseConfig
	// PollInterval is the fallback poll that notices work written by
	// other processes; default 250ms.
	PollInterval time.Duration
	// ReapInterval is how often expired leases are reclaimed; default 5s.
	ReapInterval time.Duration
	// StaleIngestAfter fails INGESTING jobs without a heartbeat for this
	// long (their ingest process died); default 2m.
	StaleIngestAfter time.Duration
	// CompleteBatch caps the outcomes written in one transaction; default 4096.
	CompleteBatch int
	// MaxJobsPerClaim spreads a claim over this many jobs; default 8.
	MaxJobsPerClaim int
	// ShutdownGrace is how long in-flight items may run after Run's
	// context ends before their contexts are canceled; default 10s.
	ShutdownGrace time.Duration
	// LookAhead bounds the work a worker holds beyond what it is running:
	// a claim takes at most LookAhead of work (at the observed item time,
	// never fewer items than Concurrency), and the next claim comes when
	// about that much is left. It keeps a job submitted now from waiting
	// behind long local queues of another; default 500ms.
	LookAhead time.Duration
	// Drain makes Run return once nothing is left to do or to wait for.
	Drain bool
	// Seed seeds the jitter of retry delays; 0 = random.
	Seed uint64
	// OnJobFinished, when set, is called after a job became DONE.
	OnJobFinished func(jobID int64)
}

// Runner claims items, processes them with bounded concurrency and writes
// their outcomes in group commits. One goroutine (the producer) owns
// claiming; workers only process; one completer owns writing outcomes.
type Runner struct {
	cfg     RunnerConfig
	store   Store
	reg     *Registry
	clock   Clock
	log     *slog.Logger
	claim   *adapt.Claim
	rnd     *rand.Rand
	rndMu   sync.Mutex
	slotCh  chan struct{}
	pipes   pipelineCache
	stats   runStats
	started atomic.Int64 // unix ns when Run started

	// mu guards inflight: every claimed item until its outcome is durable.
	// The producer adds, the completer removes, the renewer reads.
	mu       sync.Mutex
	inflight map[int64]*inflightItem
}

type inflightItem struct {
	leaseUntil time.Time
}

type runStats struct {
	claimed    atomic.Int64
	claims     atomic.Int64 // claim transactions that returned items
	commits    atomic.Int64 // outcome transactions
	completed  atomic.Int64
	stale      atomic.Int64
	reaped     atomic.Int64
	retried    atomic.Int64
	byStatus   [6]atomic.Int64
	firstClaim atomic.Int64 // unix ns
	lastDone   atomic.Int64 // unix ns
}

// NewRunner validates the configuration and returns a runner.
func NewRunner(c RunnerConfig) (*Runner, error) {
	if c.Store == nil {
		return nil, errors.New("runner: no store")
	}
	if c.Registry == nil {
		c.Registry = NewRegistry()
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if c.Concurrency < 0 {
		return nil, Errorf(EINVALID, "concurrency must be ≥ 1 (got %d)", c.Concurrency)
	}
	c.Concurrency = max(c.Concurrency, 0)
	if c.Concurrency == 0 {
		c.Concurrency = 8
	}
	c.Claim.Concurrency = c.Concurrency
	c.Claim = c.Claim.WithDefaults()
	c.Lease = c.Lease.WithDefaults()
	if err := errors.Join(c.Claim.Validate(), c.Lease.Validate()); err != nil {
		return nil, Errorf(EINVALID, "%v", err)
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 250 * time.Millisecond
	}
	if c.ReapInterval <= 0 {
		c.ReapInterval = 5 * time.Second
	}
	if c.StaleIngestAfter <= 0 {
		c.StaleIngestAfter = 2 * time.Minute
	}
	if c.CompleteBatch <= 0 {
		c.CompleteBatch = 4096
	}
	if c.MaxJobsPerClaim <= 0 {
		c.MaxJobsPerClaim = 8
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 10 * time.Second
	}
	if c.LookAhead <= 0 {
		c.LookAhead = 500 * time.Millisecond
	}
	seed := c.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	r := &Runner{
		cfg: c, store: c.Store, reg: c.Registry, clock: c.Clock,
		log:      c.Logger.WithGroup("worker").With("worker_id", c.WorkerID),
		claim:    adapt.NewClaim(c.Claim),
		rnd:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		slotCh:   make(chan struct{}, 1),
		inflight: map[int64]*inflightItem{},
	}
	r.pipes = pipelineCache{store: c.Store, reg: c.Registry, clock: c.Clock, entries: map[string]*compiledPipeline{}}
	return r, nil
}

// WorkerID returns the id this runner claims under.
func (r *Runner) WorkerID() string { return r.cfg.WorkerID }

// ClaimController exposes the claim-size controller (for stats).
func (r *Runner) ClaimController() *adapt.Claim { return r.claim }

// RunSummary reports what a Run did.
type RunSummary struct {
	WorkerID  string           `json:"workerId"`
	Claimed   int64            `json:"claimed"`
	Completed int64            `json:"completed"`
	ByStatus  map[string]int64 `json:"byStatus"`
	Retried   int64            `json:"retried"`
	Stale     int64            `json:"stale"`
	Reaped    int64            `json:"reaped"`
	// Claims and Commits count the transactions that claimed items and
	// wrote outcomes: items per transaction is what group commit buys.
	Claims  int64 `json:"claims"`
	Commits int64 `json:"commits"`
	// Busy is the time from the first claim to the last durable outcome.
	Busy        time.Duration `json:"busyNs"`
	ItemsPerSec float64       `json:"itemsPerSec"`
	Elapsed     time.Duration `json:"elapsedNs"`
}

// Summary returns the counters so far.
func (r *Runner) Summary() *RunSummary {
	s := &RunSummary{
		WorkerID: r.cfg.WorkerID, Claimed: r.stats.claimed.Load(), Completed: r.stats.completed.Load(),
		Retried: r.stats.retried.Load(), Stale: r.stats.stale.Load(), Reaped: r.stats.reaped.Load(),
		Claims: r.stats.claims.Load(), Commits: r.stats.commits.Load(),
		ByStatus: map[string]int64{},
	}
	for i, st := range ItemStatuses {
		if n := r.stats.byStatus[i].Load(); n > 0 {
			s.ByStatus[string(st)] = n
		}
	}
	if f, l := r.stats.firstClaim.Load(), r.stats.lastDone.Load(); f > 0 && l > f {
		s.Busy = time.Duration(l - f)
		s.ItemsPerSec = float64(s.Completed) / s.Busy.Seconds()
	}
	if st := r.started.Load(); st != 0 {
		s.Elapsed = time.Since(time.Unix(0, st))
	}
	return s
}

// Run processes items until ctx ends (then it stops claiming, lets
// in-flight items finish within ShutdownGrace and writes their outcomes)
// or, with Drain, until nothing is left to do.
func (r *Runner) Run(ctx context.Context) (*RunSummary, error) {
	r.started.Store(time.Now().UnixNano())
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	work := make(chan *Item, 2*r.cfg.Claim.Max+1)
	outcomes := make(chan Outcome, 2*r.cfg.Claim.Max+1)

	var workers sync.WaitGroup
	for range r.cfg.Concurrency {
		workers.Go(func() {
			for it := range work {
				outcomes <- r.process(workCtx, it)
			}
		})
	}
	completerDone := make(chan struct{})
	go func() {
		defer close(completerDone)
		r.complete(outcomes)
	}()
	bgCtx, stopBg := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Go(func() { r.renewLoop(bgCtx) })
	bg.Go(func() { r.reapLoop(bgCtx) })

	err := r.produce(ctx, work)

	// Shutdown: no more claims; finish what is in hand.
	close(work)
	waited := make(chan struct{})
	go func() { workers.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(r.cfg.ShutdownGrace):
		r.log.Warn("in-flight items did not finish in time; canceling them", "grace", r.cfg.ShutdownGrace)
		cancelWork()
		<-waited
	}
	close(outcomes)
	<-completerDone
	stopBg()
	bg.Wait()
	return r.Summary(), err
}

// lookAhead caps a claim of size items to LookAhead of work: with items of
// avgItem spread over Concurrency workers, LookAhead × Concurrency / avgItem
// items, at least Concurrency. Items too fast to measure are not capped.
func (r *Runner) lookAhead(size int) int {
	avg := r.claim.AvgItem()
	if avg <= 0 {
		return size
	}
	n := int(int64(r.cfg.LookAhead) * int64(r.cfg.Concurrency) / int64(avg))
	return min(size, max(n, r.cfg.Concurrency))
}

func (r *Runner) inflightCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.inflight)
}

// produce is the claim loop. It claims only while at most one claim's worth
// of items is in flight, so claims never run far ahead of the workers.
func (r *Runner) produce(ctx context.Context, work chan<- *Item) error {
	var wake <-chan struct{}
	if r.cfg.Notifier != nil {
		ch, unsub := r.cfg.Notifier.Subscribe()
		defer unsub()
		wake = ch
	}
	poll := time.NewTicker(r.cfg.PollInterval)
	defer poll.Stop()
	lastChange, _ := r.store.ChangeCounter(ctx)
	lastAttempt := time.Now()
	var errBackoff time.Duration
	claimNow := true
	var nextDue *time.Time
	for {
		if ctx.Err() != nil {
			return nil
		}
		size := r.lookAhead(r.claim.Size())
		n := r.inflightCount()
		if claimNow && n <= size {
			lastAttempt = time.Now()
			items, err := r.claimBatch(ctx, size)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				errBackoff = min(max(2*errBackoff, 50*time.Millisecond), 5*time.Second)
				r.log.Error("claim failed; retrying", "err", err, "retry_in", errBackoff)
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(errBackoff):
				}
				continue
			}
			errBackoff = 0
			if len(items) > 0 {
				for _, it := range items {
					work <- it
				}
				continue
			}
			if n == 0 {
				// Nothing due: find out when something will be, so that a
				// retry due soon is not left to the once-a-second look.
				q, err := r.store.QueueSummary(ctx, r.clock.Now())
				if err != nil {
					if r.cfg.Drain {
						return fmt.Errorf("drain: %w", err)
					}
				} else {
					if r.cfg.Drain && q.Idle() {
						return nil
					}
					if q.Due > 0 {
						continue
					}
					nextDue = nil
					if q.NextRunAt != nil {
						t := *q.NextRunAt
						nextDue = &t
					}
				}
			}
		}
		var dueC <-chan time.Time
		var dueTimer *time.Timer
		if nextDue != nil {
			if wait := max(nextDue.Sub(r.clock.Now()), time.Millisecond); wait < time.Second {
				dueTimer = time.NewTimer(wait)
				dueC = dueTimer.C
			}
		}
		claimNow = true
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-r.slotCh:
		case <-dueC:
			nextDue = nil
		case <-poll.C:
			// Another process may have written (data_version moved), or
			// retries may have come due: look again, but claim on a quiet
			// store no more than once a second.
			cur, err := r.store.ChangeCounter(ctx)
			if err == nil && cur == lastChange && time.Since(lastAttempt) < time.Second {
				claimNow = false
			}
			lastChange = cur
		}
		if dueTimer != nil {
			dueTimer.Stop()
		}
	}
}

func (r *Runner) claimBatch(ctx context.Context, size int) ([]*Item, error) {
	lease := adapt.Lease(r.cfg.Lease, r.claim.AvgItem(), size, r.cfg.Concurrency)
	now := r.clock.Now()
	items, err := r.store.ClaimItems(ctx, &ClaimItemsParams{
		WorkerID: r.cfg.WorkerID, Limit: size, MaxJobs: r.cfg.MaxJobsPerClaim, LeaseFor: lease, Now: now,
	})
	if err != nil || len(items) == 0 {
		return nil, err
	}
	r.stats.firstClaim.CompareAndSwap(0, time.Now().UnixNano())
	r.stats.claimed.Add(int64(len(items)))
	r.stats.claims.Add(1)
	until := now.Add(lease)
	r.mu.Lock()
	for _, it := range items {
		r.inflight[it.ID] = &inflightItem{leaseUntil: until}
	}
	r.mu.Unlock()
	if r.log.Enabled(ctx, slog.LevelDebug) {
		for _, it := range items {
			r.log.Debug("item claimed", "job_id", it.JobID, "item_id", it.ID, "attempt", it.Attempts, "stage", it.Stage)
		}
	}
	return items, nil
}

// complete writes outcomes in group commits: it takes everything that
// arrived while the previous commit ran, up to CompleteBatch.
func (r *Runner) complete(outcomes <-chan Outcome) {
	batch := make([]Outcome, 0, r.cfg.CompleteBatch)
	for o := range outcomes {
		batch = append(batch[:0], o)
	more:
		for len(batch) < r.cfg.CompleteBatch {
			select {
			case o, ok := <-outcomes:
				if !ok {
					break more
				}
				batch = append(batch, o)
			default:
				break more
			}
		}
		r.flush(batch)
	}
}

func (r *Runner) flush(batch []Outcome) {
	ctx := context.Background()
	var res *CompleteItemsResult
	var err error
	for try := 0; ; try++ {
		res, err = r.store.CompleteItems(ctx, &CompleteItemsParams{WorkerID: r.cfg.WorkerID, Outcomes: batch, Now: r.clock.Now()})
		if err == nil {
			r.stats.commits.Add(1)
			break
		}
		if try >= 8 {
			// The leases will expire and the reaper will hand the items
			// out again: nothing is lost, only time.
			r.log.Error("could not write outcomes; leaving them to the reaper", "err", err, "items", len(batch))
			break
		}
		d := time.Duration(50<<try) * time.Millisecond
		r.log.Warn("writing outcomes failed; retrying", "err", err, "items", len(batch), "retry_in", d)
		time.Sleep(d)
	}
	r.mu.Lock()
	for i := range batch {
		delete(r.inflight, batch[i].ItemID)
	}
	r.mu.Unlock()
	select {
	case r.slotCh <- struct{}{}:
	default:
	}
	if err != nil {
		return
	}
	stale := map[int64]bool{}
	for _, id := range res.Stale {
		stale[id] = true
		r.log.Warn("outcome dropped: lease lost", "item_id", id)
	}
	r.stats.stale.Add(int64(len(res.Stale)))
	r.stats.completed.Add(int64(res.Applied))
	for i := range batch {
		o := &batch[i]
		if stale[o.ItemID] {
			continue
		}
		if o.Status == ItemPending {
			r.stats.retried.Add(1)
		}
		for k, st := range ItemStatuses {
			if st == o.Status {
				r.stats.byStatus[k].Add(1)
			}
		}
	}
	r.stats.lastDone.Store(time.Now().UnixNano())
	for _, id := range res.Finished {
		r.log.Info("job finished", "job_id", id)
		if r.cfg.OnJobFinished != nil {
			r.cfg.OnJobFinished(id)
		}
	}
}

// renewLoop extends the leases of items still in hand (running or waiting
// in the local queue) before they expire.
func (r *Runner) renewLoop(ctx context.Context) {
	every := max(r.cfg.Lease.Floor/4, 100*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lease := adapt.Lease(r.cfg.Lease, r.claim.AvgItem(), r.claim.Size(), r.cfg.Concurrency)
		now := r.clock.Now()
		var ids []int64
		r.mu.Lock()
		for id, in := range r.inflight {
			if in.leaseUntil.Sub(now) < adapt.RenewAfter(lease) {
				ids = append(ids, id)
			}
		}
		r.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		n, err := r.store.RenewLeases(ctx, &RenewLeasesParams{WorkerID: r.cfg.WorkerID, ItemIDs: ids, LeaseFor: lease, Now: now})
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("renewing leases failed", "err", err, "items", len(ids))
			}
			continue
		}
		until := now.Add(lease)
		r.mu.Lock()
		for _, id := range ids {
			if in := r.inflight[id]; in != nil {
				in.leaseUntil = until
			}
		}
		r.mu.Unlock()
		r.log.Debug("leases renewed", "items", n, "lease", lease)
	}
}

// reapLoop hands out again the items of workers that died, and fails jobs
// whose ingest died.
func (r *Runner) reapLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.ReapInterval)
	defer t.Stop()
	for {
		r.reapOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *Runner) reapOnce(ctx context.Context) {
	now := r.clock.Now()
	n, err := r.store.ReapExpiredLeases(ctx, &ReapParams{Now: now})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("reaping expired leases failed", "err", err)
		}
		return
	}
	if n > 0 {
		r.stats.reaped.Add(int64(n))
		r.log.Info("expired leases reclaimed", "items", n)
		r.cfg.Notifier.Notify()
		select {
		case r.slotCh <- struct{}{}:
		default:
		}
	}
	jobs, err := r.store.FailStaleIngests(ctx, &FailStaleIngestsParams{
		Before: now.Add(-r.cfg.StaleIngestAfter), Now: now,
		Reason: fmt.Sprintf("ingest interrupted: no progress for %s (the ingesting process stopped)", r.cfg.StaleIngestAfter),
	})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("failing stale ingests failed", "err", err)
		}
		return
	}
	for _, j := range jobs {
		r.log.Warn("job failed: ingest interrupted", "job_id", j.ID, "rows", j.Counts.Total())
	}
}
