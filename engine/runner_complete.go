package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

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
	// Items handed off to their next stage stay in flight, under the new
	// lease; every other item's outcome is durable.
	var kept map[int64]bool
	if err == nil && len(res.HandedOff) > 0 {
		kept = make(map[int64]bool, len(res.HandedOff))
		for _, id := range res.HandedOff {
			kept[id] = true
		}
	}
	r.mu.Lock()
	for i := range batch {
		o := &batch[i]
		if kept[o.ItemID] {
			if f := r.inflight[o.ItemID]; f != nil {
				f.leaseUntil = o.LeaseUntil
			}
			continue
		}
		delete(r.inflight, o.ItemID)
	}
	r.mu.Unlock()
	r.awaiting.Add(-int64(len(batch)))
	if err == nil {
		r.handedOff(batch, res.HandedOff)
	}
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
		if o.Status == ItemPending && o.NextStage == o.Stage {
			r.stats.retried.Add(1)
		}
		if o.ErrorClass != "" {
			c, _ := r.stats.byClass.LoadOrStore(o.ErrorClass, new(atomic.Int64))
			c.(*atomic.Int64).Add(1)
		}
		if o.Status == ItemError && r.cfg.Events.Active() {
			r.cfg.Events.Publish(Event{Name: EventItemDead, Subject: fmt.Sprintf("item:%d", o.ItemID), At: r.clock.Now(),
				Data: map[string]any{"itemId": o.ItemID, "jobId": o.JobID, "error": o.Error, "errorClass": string(o.ErrorClass)}})
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
		if r.cfg.Events.Active() {
			r.publishFinished(ctx, id)
		}
	}
}

// publishFinished publishes job.finished for a job that became DONE, and
// job.failed as well when some of its items failed.
func (r *Runner) publishFinished(ctx context.Context, id int64) {
	j, err := r.store.GetJob(ctx, id)
	if err != nil {
		r.log.Warn("job finished: read job for its event", "job_id", id, "err", err)
		return
	}
	r.cfg.Events.Publish(JobEvent(EventJobFinished, j, r.clock.Now()))
	if j.Counts.Failed() > 0 {
		r.cfg.Events.Publish(JobEvent(EventJobFailed, j, r.clock.Now()))
	}
}

// releaseUnstarted gives back claimed items that were never started, so
// that they do not wait for their lease to expire and are not charged an
// attempt.
func (r *Runner) releaseUnstarted(items []*Item) {
	if len(items) == 0 {
		return
	}
	n, err := r.store.ReleaseItems(context.Background(), &ReleaseItemsParams{WorkerID: r.cfg.WorkerID, Items: items, Now: r.clock.Now()})
	r.mu.Lock()
	for _, it := range items {
		delete(r.inflight, it.ID)
	}
	r.mu.Unlock()
	if err != nil {
		r.log.Warn("releasing unstarted items failed; their leases will expire", "err", err, "items", len(items))
		return
	}
	r.stats.released.Add(int64(n))
	r.log.Info("unstarted items released", "items", n)
}
