package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/engine/adapt"
)

// renewLoop extends the leases of items still in hand (running or waiting
// in the local queue) before they expire.
func (r *Runner) renewLoop(ctx context.Context) {
	every := max(r.cfg.Lease.Floor/4, 50*time.Millisecond)
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
	if r.cfg.Reaper != nil {
		lead, err := r.cfg.Reaper.TryLead(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("reaper election failed", "err", err)
		}
		if !lead {
			return // another process reaps
		}
	}
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
