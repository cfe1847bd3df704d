package engine

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine/adapt"
)

// Hand-off: when a stage of an item succeeds and its next stage is
// unbounded, the worker keeps the item. The completer writes the stage's
// result, its attempt record and the item's move to the next stage with a
// new lease (still PROCESSING, attempt 1 of the next stage) in one write
// (Outcome.HandOff), and once that is durable the item goes to the
// continuation queue, which workers serve before the claimed items. A
// stage then costs one write instead of a claim and a write, and each
// stage's result is still durable before the next stage starts.
//
// Bounded stages (Stage.MaxConcurrency, Share, MaxInFlight) are never
// entered by a hand-off: their items go back to PENDING and are claimed,
// so the claim's stage order and bounds decide. Neither are stages of a
// pipeline with a spending cap, whose claims count the budget.

// contQueue holds items handed off to their next stage, waiting for a
// worker. The completer adds, workers take.
type contQueue struct {
	mu     sync.Mutex
	items  []*Item
	signal chan struct{} // one slot: "the queue may have items"
}

func (q *contQueue) init() { q.signal = make(chan struct{}, 1) }

func (q *contQueue) push(items ...*Item) {
	q.mu.Lock()
	q.items = append(q.items, items...)
	q.mu.Unlock()
	q.poke()
}

func (q *contQueue) poke() {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// pop returns the oldest item, or nil; it passes the signal on while
// items are left, so that every idle worker gets to look.
func (q *contQueue) pop() *Item {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return nil
	}
	it := q.items[0]
	q.items[0] = nil
	q.items = q.items[1:]
	if len(q.items) > 0 {
		q.poke()
	}
	return it
}

// drain removes and returns every item (at shutdown).
func (q *contQueue) drain() []*Item {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}

// next returns a worker's next item: a handed-off one first (it holds a
// lease and an item already begun), else one from the claims. It returns
// false once work is closed.
func (r *Runner) next(work <-chan *Item) (*Item, bool) {
	for {
		if it := r.cont.pop(); it != nil {
			return it, true
		}
		select {
		case it, ok := <-work:
			return it, ok
		case <-r.cont.signal:
		}
	}
}

// mayHandOff reports whether an item of cp entering stage next may be kept
// by this runner (see above).
func (r *Runner) mayHandOff(cp *compiledPipeline, next int) bool {
	if r.cfg.NoHandOff || r.stopping.Load() || cp.p == nil || next >= len(cp.p.Stages) || cp.p.MaxRequestsPerJob > 0 {
		return false
	}
	if cp.limits != nil && cp.limits[next] > 0 {
		return false
	}
	return cp.p.Stages[next].MaxInFlight == 0
}

// lease is the lease a claim of the current size would take.
func (r *Runner) lease() time.Duration {
	return adapt.Lease(r.cfg.Lease, r.claim.AvgItem(), r.claim.Size(), r.cfg.Concurrency)
}

// handedOff applies a granted hand-off to the runner's copy of the item
// and queues it for its next stage.
func (r *Runner) handedOff(batch []Outcome, ids []int64) {
	if len(ids) == 0 {
		return
	}
	granted := make(map[int64]bool, len(ids))
	for _, id := range ids {
		granted[id] = true
	}
	items := make([]*Item, 0, len(ids))
	for i := range batch {
		o := &batch[i]
		if !granted[o.ItemID] || o.item == nil {
			continue
		}
		it := o.item
		it.Stage, it.Attempts, it.Strategy = o.NextStage, 1, 0
		if o.Result != nil {
			it.Result = o.Result
		}
		until := o.LeaseUntil
		it.LeaseExpiresAt = &until
		items = append(items, it)
	}
	r.stats.handedOff.Add(int64(len(items)))
	r.cont.push(items...)
}

// stageBoundsCache keeps the stages' global in-flight limits
// (Stage.MaxInFlight) of every pipeline for the claims, read again every
// few seconds so that `sluice pipeline apply` reaches running workers.
type stageBoundsCache struct {
	store  Store
	mu     sync.Mutex
	limits []StageLimit
	loaded time.Time
}

// get returns the limits; on a read error it keeps the last ones it had.
func (c *stageBoundsCache) get(ctx context.Context, now time.Time) []StageLimit {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.loaded.IsZero() && now.Sub(c.loaded) < pipelineTTL {
		return c.limits
	}
	ps, err := c.store.ListPipelines(ctx)
	if err != nil {
		return c.limits
	}
	c.loaded = now
	c.limits = c.limits[:0]
	for _, p := range ps {
		for i, st := range p.Stages {
			if st.MaxInFlight > 0 {
				c.limits = append(c.limits, StageLimit{Pipeline: p.Name, Stage: i, Max: st.MaxInFlight})
			}
		}
	}
	return c.limits
}
