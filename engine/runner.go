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
	// Reaper, when set, is asked before each reap: only the process it
	// elects reaps. Default: the store's "reaper" election when the store
	// is an ElectingStore, else every runner reaps.
	Reaper Elector
	// StaleIngestAfter fails INGESTING jobs without a heartbeat for this
	// long (their ingest process died); default 2m.
	StaleIngestAfter time.Duration
	// AbandonedBlobAfter removes blobs whose write began this long ago
	// and never finished (BlobStore.PruneBlobs); default 24h.
	AbandonedBlobAfter time.Duration
	// CompleteBatch caps the outcomes written in one transaction; default 4096.
	CompleteBatch int
	// MaxJobsPerClaim spreads a claim over this many jobs; default 8.
	MaxJobsPerClaim int
	// MaxInFlightPerJob and MaxInFlightPerUser cap the PROCESSING items of
	// one job, and of one user's jobs together, across every worker
	// (ClaimItemsParams); 0 = no limit.
	MaxInFlightPerJob  int
	MaxInFlightPerUser int
	// Pressure, when set, shrinks claims while the process's CPU or memory
	// is high (runner_pressure.go); nil = never.
	Pressure *PressureConfig
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
	// JobID, when set, restricts the runner to one job's items (a kickoff
	// slice).
	JobID int64
	// NoHandOff turns off keeping an item for its next stage (hand-off,
	// runner_handoff.go): every stage is then claimed anew. For comparison
	// runs.
	NoHandOff bool
	// Seed seeds the jitter of retry delays; 0 = random.
	Seed uint64
	// OnJobFinished, when set, is called after a job became DONE.
	OnJobFinished func(jobID int64)
	// Events, when set, receives job.finished, job.failed and item.dead.
	Events *Events
}

// Runner claims items, processes them with bounded concurrency and writes
// their outcomes in group commits. One goroutine (the producer) owns
// claiming; workers only process; one completer owns writing outcomes.
type Runner struct {
	cfg    RunnerConfig
	store  Store
	reg    *Registry
	clock  Clock
	log    *slog.Logger
	claim  *adapt.Claim
	rnd    *rand.Rand
	rndMu  sync.Mutex
	slotCh chan struct{}
	pipes  pipelineCache
	gates  stageGates
	cont   contQueue
	direct directIntake
	work   chan *Item // the claimed items not yet taken by a worker (set by Run)
	bounds stageBoundsCache
	stats  runStats
	// stopping is set once Run's context ended: nothing new starts.
	stopping atomic.Bool
	started  atomic.Int64 // unix ns when Run started

	// mu guards inflight: every claimed item until its outcome is durable.
	// The producer adds, the completer removes, the renewer reads.
	mu       sync.Mutex
	inflight map[int64]*inflightItem
	// awaiting counts the outcomes handed to the completer and not yet
	// written: their items are in flight but no longer ahead of the
	// workers (claimWindow).
	awaiting atomic.Int64
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
	released   atomic.Int64
	handedOff  atomic.Int64
	direct     atomic.Int64
	retried    atomic.Int64
	byStatus   [6]atomic.Int64
	byClass    sync.Map     // ErrorClass → *atomic.Int64: failed attempts by class
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
	if c.Reaper == nil {
		if es, ok := c.Store.(ElectingStore); ok {
			c.Reaper = es.Elector("reaper")
		}
	}
	if c.ReapInterval <= 0 {
		c.ReapInterval = 5 * time.Second
	}
	if c.StaleIngestAfter <= 0 {
		c.StaleIngestAfter = 2 * time.Minute
	}
	if c.AbandonedBlobAfter <= 0 {
		c.AbandonedBlobAfter = 24 * time.Hour
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
	r.cont.init()
	r.direct.init()
	r.bounds.store = c.Store
	r.pipes = pipelineCache{store: c.Store, reg: c.Registry, clock: c.Clock, concurrency: c.Concurrency,
		entries: map[string]*compiledPipeline{}}
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
	// ByClass counts failed attempts (retried or not) by error class.
	ByClass map[string]int64 `json:"byClass"`
	Retried int64            `json:"retried"`
	Stale   int64            `json:"stale"`
	Reaped  int64            `json:"reaped"`
	// Released counts claimed items given back unstarted: at shutdown, or
	// because the item time rose far and they would have waited too long
	// in the local queue (runner_shed.go).
	Released int64 `json:"released"`
	// Claims and Commits count the transactions that claimed items and
	// wrote outcomes: items per transaction is what group commit buys.
	Claims  int64 `json:"claims"`
	Commits int64 `json:"commits"`
	// HandedOff counts stages begun without a claim: the item was kept
	// for its next stage in the write of the stage before.
	HandedOff int64 `json:"handedOff"`
	// Direct counts items claimed in their enqueue transaction and handed
	// to this runner without a claim (enqueue_direct.go).
	Direct int64 `json:"direct"`
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
		Claims: r.stats.claims.Load(), Commits: r.stats.commits.Load(), Released: r.stats.released.Load(),
		HandedOff: r.stats.handedOff.Load(), Direct: r.stats.direct.Load(),
		ByStatus: map[string]int64{}, ByClass: map[string]int64{},
	}
	r.stats.byClass.Range(func(k, v any) bool {
		s.ByClass[string(k.(ErrorClass))] = v.(*atomic.Int64).Load()
		return true
	})
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
	r.work = work
	outcomes := make(chan Outcome, 2*r.cfg.Claim.Max+1)

	// Once Run's context ends, items still waiting in the local queue are
	// not started: they are released (see releaseUnstarted).
	stopping := &r.stopping
	var unstartedMu sync.Mutex
	var unstarted []*Item
	addUnstarted := func(it *Item) {
		unstartedMu.Lock()
		unstarted = append(unstarted, it)
		unstartedMu.Unlock()
	}
	var workers sync.WaitGroup
	for range r.cfg.Concurrency {
		workers.Go(func() {
			for {
				it, ok := r.next(work)
				if !ok {
					return
				}
				if stopping.Load() {
					addUnstarted(it)
					continue
				}
				r.runItem(workCtx, it, outcomes, stopping.Load, addUnstarted)
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
	if r.cfg.Pressure != nil {
		bg.Go(func() { r.pressureLoop(bgCtx) })
	}

	err := r.produce(ctx, work)
	// Items claimed by enqueues for this runner are delivered (or their
	// slots released) before the shutdown below gives back what never
	// started.
	r.direct.end()

	// Shutdown: no more claims; finish what is running, give back what
	// never started.
	if ctx.Err() != nil {
		stopping.Store(true)
	}
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
	// Items parked on a stage gate are handed on by the worker holding
	// the slot; any left when the workers stopped never started.
	unstarted = append(unstarted, r.gates.drainParked()...)
	// Items handed off after the workers stopped never started either.
	unstarted = append(unstarted, r.cont.drain()...)
	r.releaseUnstarted(unstarted)
	stopBg()
	bg.Wait()
	return r.Summary(), err
}

// InFlight is the number of items this runner holds (claimed, running or
// waiting for their outcome to be written).
func (r *Runner) InFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.inflight)
}
