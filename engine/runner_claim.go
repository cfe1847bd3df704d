package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/engine/adapt"
)

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

// claimWindow tells whether the producer may claim size more items, and
// how many items are in flight in all. It may while at most one claim's
// worth is ahead of the workers: in flight, less the items already
// processed whose outcome awaits its group commit (Runner.awaiting), less
// those parked on a bounded stage (runner_stages.go) up to one claim's
// worth (the producer keeps claiming for the other stages while a bounded
// stage has a backlog, without hoarding more of it); and while at most two
// claims' worth is in flight in all.
func (r *Runner) claimWindow(size int) (open bool, all int) {
	r.mu.Lock()
	all = len(r.inflight)
	r.mu.Unlock()
	if all == 0 {
		return true, 0
	}
	ahead := all - int(min(max(r.awaiting.Load(), 0), int64(all)))
	ahead = max(ahead-min(r.gates.parkedCount(), size), 0)
	return ahead <= size && all <= 2*size, all
}

// produce is the claim loop. It claims only while at most one claim's worth
// of items is ahead of the workers (claimed and not yet processed), so
// claims never run far ahead of them, and while at most two claims' worth
// is in flight in all: processed items whose outcomes wait for their group
// commit do not hold the next claim back (the one write connection then
// always has a claim or a commit to run). It gives back queued items when
// the item time rose far (runner_shed.go).
func (r *Runner) produce(ctx context.Context, work chan *Item) error {
	var wake <-chan struct{}
	if r.cfg.Notifier != nil {
		ch, unsub := r.cfg.Notifier.Subscribe()
		defer unsub()
		wake = ch
		defer r.cfg.Notifier.addDirect(r)()
	}
	poll := time.NewTicker(r.cfg.PollInterval)
	defer poll.Stop()
	lastChange, _ := r.store.ChangeCounter(ctx)
	lastAttempt := time.Now()
	var errBackoff time.Duration
	claimNow := true
	var nextDue *time.Time
	var shed shedState
	for {
		if ctx.Err() != nil {
			return nil
		}
		shed.shed(r, work)
		size := r.lookAhead(r.claim.Size())
		open, all := r.claimWindow(size)
		if claimNow && open {
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
			r.direct.setIdle(len(items) == 0)
			if len(items) > 0 {
				for _, it := range items {
					work <- it
				}
				continue
			}
			if all == 0 {
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
		WorkerID: r.cfg.WorkerID, Limit: size, MaxJobs: r.cfg.MaxJobsPerClaim, LeaseFor: lease, Now: now, JobID: r.cfg.JobID,
		MaxInFlightPerJob: r.cfg.MaxInFlightPerJob, MaxInFlightPerUser: r.cfg.MaxInFlightPerUser,
		StageLimits: r.bounds.get(ctx, now),
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
