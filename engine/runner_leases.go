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
	var blobsPruned time.Time
	for {
		if r.reapOnce(ctx) {
			r.pruneBlobs(ctx, &blobsPruned)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reapOnce reclaims expired leases and fails stale ingests when this
// process is the reaper, and reports whether it is.
func (r *Runner) reapOnce(ctx context.Context) bool {
	if r.cfg.Reaper != nil {
		lead, err := r.cfg.Reaper.TryLead(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("reaper election failed", "err", err)
		}
		if !lead {
			return false // another process reaps
		}
	}
	now := r.clock.Now()
	n, err := r.store.ReapExpiredLeases(ctx, &ReapParams{Now: now})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("reaping expired leases failed", "err", err)
		}
		return true
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
		return true
	}
	for _, j := range jobs {
		r.log.Warn("job failed: ingest interrupted", "job_id", j.ID, "rows", j.Counts.Total())
	}
	return true
}

// blobPruneEvery is how often the reaper looks for abandoned blobs.
const blobPruneEvery = 10 * time.Minute

// pruneBlobs removes, at most every blobPruneEvery, the blobs whose writer
// began more than AbandonedBlobAfter ago and never finished (a process
// killed while it stored an image or an upload): they are invisible, but
// they hold their chunks' space until removed.
func (r *Runner) pruneBlobs(ctx context.Context, last *time.Time) {
	now := r.clock.Now()
	if now.Sub(*last) < blobPruneEvery {
		return
	}
	*last = now
	n, err := r.store.PruneBlobs(ctx, &PruneBlobsParams{Before: now.Add(-r.cfg.AbandonedBlobAfter)})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("pruning abandoned blobs failed", "err", err)
		}
		return
	}
	if n > 0 {
		r.log.Info("abandoned half-written blobs removed", "blobs", n)
	}
}
