package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"
)

// Direct hand-off on enqueue: when a runner of this process is idle (its
// last claim found nothing due) and may take a new one-item job's item (its
// pipeline's first stage is unbounded, no spending cap, no per-user limit),
// the enqueue transaction writes the item as already claimed by that
// runner, exactly as a claim would leave it (PROCESSING, locked_by, lease,
// attempts 1, the job RUNNING with its counters), and after the commit the
// item goes straight to the runner's continuation queue. The item then
// starts without a second write transaction and without a wake-up: one
// commit from the enqueue call to the processor.
//
// Crash safety is the claim's: the row is durable and leased before the
// processor starts, and if the process dies the reaper returns it.
//
// The runner's side is a reservation: Ingester.Enqueue reserves a slot
// before its transaction and either delivers the claimed item or releases
// the slot (the store did not claim, or the transaction failed). A runner
// that is ending waits for its reservations to settle before it gives
// back its unstarted items, so a delivered item is either run or released
// to PENDING, never lost and never run twice.

// EnqueueClaimer is a Store that can write a one-item job's item as
// claimed in the enqueue transaction itself (direct hand-off). Stores
// without it take the plain path: EnqueueJob, then a wake-up and a claim.
type EnqueueClaimer interface {
	// EnqueueJobClaimed is EnqueueJob, except that when the job has
	// exactly one item and it is PENDING, the item is written as a claim
	// by c.WorkerID would leave it: PROCESSING, locked_by = c.WorkerID,
	// locked_at = p.Job.Now, lease_expires_at = p.Job.Now + c.LeaseFor,
	// attempts 1; the job RUNNING with processing_items 1, pending_items
	// 0, started_at = p.Job.Now, and moved to the back of the claim line.
	// It returns the claimed item as ClaimItems would, or nil (and the
	// job as EnqueueJob leaves it) when nothing was claimed.
	EnqueueJobClaimed(ctx context.Context, p *EnqueueJobParams, c *EnqueueClaim) (*Job, *Item, error)
}

// EnqueueClaim names the claimer of EnqueueJobClaimed.
type EnqueueClaim struct {
	WorkerID string
	LeaseFor time.Duration
}

// directSlot is one reserved place in an idle runner for an item claimed
// by an enqueue. Exactly one of deliver or release must be called.
type directSlot struct {
	r     *Runner
	lease time.Duration
}

// directIntake is a runner's side of the hand-off. The producer opens it
// while idle and closes it when it claims work; Run closes it for good
// when it ends and waits for the reservations (settle).
type directIntake struct {
	mu       sync.Mutex
	idle     bool // the producer's last claim found nothing
	ended    bool // Run is ending: no more reservations
	reserved int
	settled  *sync.Cond
}

func (d *directIntake) init() { d.settled = sync.NewCond(&d.mu) }

// setIdle records whether the producer's last claim found nothing.
func (d *directIntake) setIdle(idle bool) {
	d.mu.Lock()
	d.idle = idle
	d.mu.Unlock()
}

// end refuses further reservations and waits until every one made is
// delivered or released.
func (d *directIntake) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ended = true
	for d.reserved > 0 {
		d.settled.Wait()
	}
}

func (d *directIntake) settle() {
	d.mu.Lock()
	d.reserved--
	if d.reserved == 0 {
		d.settled.Broadcast()
	}
	d.mu.Unlock()
}

// reserveDirect reserves a slot for an item of pipeline pl claimed in its
// enqueue, or returns nil when this runner should not take it: it is busy
// or ending, it holds claimed items not yet started, every worker would be
// taken, or the pipeline's first stage must go through a claim (bounds,
// spending cap, per-user limit, a runner restricted to one job).
func (r *Runner) reserveDirect(ctx context.Context, pl string) *directSlot {
	if r.cfg.JobID != 0 || r.cfg.MaxInFlightPerUser > 0 {
		return nil
	}
	d := &r.direct
	d.mu.Lock()
	ok := d.idle && !d.ended && r.queued() == 0 && r.InFlight()+d.reserved < r.cfg.Concurrency
	d.mu.Unlock()
	if !ok {
		return nil
	}
	cp := r.pipes.get(ctx, pl)
	if cp.err != nil || !r.mayHandOff(cp, 0) {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.idle || d.ended || r.InFlight()+d.reserved >= r.cfg.Concurrency {
		return nil
	}
	d.reserved++
	return &directSlot{r: r, lease: r.lease()}
}

// deliver hands the item claimed by the enqueue to the runner: it is in
// flight (its lease renewed like a claimed one's) and workers take it
// before claimed items.
func (s *directSlot) deliver(it *Item) {
	r := s.r
	until := time.Now().Add(s.lease)
	if it.LeaseExpiresAt != nil {
		until = *it.LeaseExpiresAt
	}
	r.mu.Lock()
	r.inflight[it.ID] = &inflightItem{leaseUntil: until}
	r.mu.Unlock()
	r.stats.firstClaim.CompareAndSwap(0, time.Now().UnixNano())
	r.stats.claimed.Add(1)
	r.stats.direct.Add(1)
	r.log.Debug("item claimed in its enqueue", "job_id", it.JobID, "item_id", it.ID, "attempt", it.Attempts, "stage", it.Stage)
	r.cont.push(it)
	r.direct.settle()
}

// release gives the slot back unused.
func (s *directSlot) release() { s.r.direct.settle() }

// directRunners is the Notifier's list of runners that take items claimed
// by enqueues (registered while their producer runs).
type directRunners struct {
	mu      sync.Mutex
	runners []*Runner
}

// addDirect registers r for direct hand-offs; the returned function
// removes it.
func (n *Notifier) addDirect(r *Runner) func() {
	n.direct.mu.Lock()
	n.direct.runners = append(n.direct.runners, r)
	n.direct.mu.Unlock()
	return func() {
		n.direct.mu.Lock()
		defer n.direct.mu.Unlock()
		for i, x := range n.direct.runners {
			if x == r {
				n.direct.runners = append(n.direct.runners[:i], n.direct.runners[i+1:]...)
				return
			}
		}
	}
}

// reserveDirect reserves a slot in the first registered runner that takes
// an item of pipeline pl now, or returns nil.
func (n *Notifier) reserveDirect(ctx context.Context, pl string) *directSlot {
	if n == nil {
		return nil
	}
	n.direct.mu.Lock()
	runners := append([]*Runner(nil), n.direct.runners...)
	n.direct.mu.Unlock()
	for _, r := range runners {
		if s := r.reserveDirect(ctx, pl); s != nil {
			return s
		}
	}
	return nil
}

// enqueueDirect stores a one-item job with its item claimed by an idle
// runner of this process and hands the item over. It reports false (and
// stores nothing) when no runner takes it or the store cannot claim in an
// enqueue: the caller then takes the plain path.
func (g *Ingester) enqueueDirect(ctx context.Context, p *EnqueueJobParams) (*Job, bool, error) {
	ec, ok := g.store.(EnqueueClaimer)
	if !ok || len(p.Items) != 1 {
		return nil, false, nil
	}
	slot := g.notifier.reserveDirect(ctx, p.Job.Pipeline)
	if slot == nil {
		return nil, false, nil
	}
	job, it, err := ec.EnqueueJobClaimed(ctx, p, &EnqueueClaim{WorkerID: slot.r.cfg.WorkerID, LeaseFor: slot.lease})
	if err != nil || it == nil {
		slot.release()
		if err == nil {
			g.notifier.Notify()
		}
		return job, err == nil, err
	}
	slot.deliver(it)
	if g.log.Enabled(ctx, slog.LevelDebug) {
		g.log.Debug("job enqueued with its item handed to an idle worker", "job_id", job.ID, "item_id", it.ID)
	}
	return job, true, nil
}

// queued is the number of claimed items waiting for a worker.
func (r *Runner) queued() int { return len(r.work) }

// OneClaimable reports whether EnqueueJobClaimed claims the job's item:
// the job has exactly one item, PENDING (no error) with a valid seq.
func (p *EnqueueJobParams) OneClaimable() bool {
	if len(p.Items) != 1 {
		return false
	}
	it := &p.Items[0]
	return (it.Status == "" || it.Status == ItemPending) && it.LastError == "" && it.Seq > 0
}

// ClaimedItem is the item EnqueueJobClaimed returns for the one item of p,
// stored as itemID of job jobID: as ClaimItems would return it.
func (p *EnqueueJobParams) ClaimedItem(c *EnqueueClaim, jobID, itemID int64) *Item {
	ni := &p.Items[0]
	// Stores keep milliseconds.
	at := time.UnixMilli(p.Job.Now.UnixMilli()).UTC()
	until := time.UnixMilli(p.Job.Now.Add(c.LeaseFor).UnixMilli()).UTC()
	// As the claim reads it: COALESCE(normalized_json, input_json).
	norm := ni.Normalized
	if norm == nil {
		norm = ni.Input
	}
	return &Item{ID: itemID, JobID: jobID, UserID: p.Job.UserID, Pipeline: p.Job.Pipeline, Seq: ni.Seq,
		Status: ItemProcessing, Attempts: 1, LockedBy: c.WorkerID, LockedAt: &at, LeaseExpiresAt: &until,
		UpdatedAt: at, RunAt: at, Normalized: append(json.RawMessage(nil), norm...)}
}
