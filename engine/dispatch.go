package engine

import (
	"context"
	"os"
	"time"
)

// eventBatch bounds the outbox events handled in one FireTriggers.
const eventBatch = 256

// outbox writes every event published in this process to the store's
// outbox, in batches (whatever has arrived while the last append ran), and
// wakes this process's dispatcher. The events of every process meet there,
// so the scheduler leader fires the triggers of events raised anywhere.
func (a *Automation) outbox(ctx context.Context) {
	events, unsubscribe := a.cfg.Events.Subscribe(4096)
	defer unsubscribe()
	a.once.Do(func() { close(a.listening) })
	var batch []Event
	for {
		select {
		case <-ctx.Done():
			// Events published before the stop are still kept.
			for {
				select {
				case ev := <-events:
					batch = append(batch, ev)
					continue
				default:
				}
				break
			}
			a.appendEvents(context.WithoutCancel(ctx), batch)
			return
		case ev := <-events:
			batch = append(batch[:0], ev)
		}
	drain:
		for len(batch) < eventBatch {
			select {
			case ev := <-events:
				batch = append(batch, ev)
			default:
				break drain
			}
		}
		for !a.appendEvents(ctx, batch) {
			select {
			case <-ctx.Done():
				a.appendEvents(context.WithoutCancel(ctx), batch)
				return
			case <-time.After(time.Second):
			}
		}
		a.eventWake.Notify()
	}
}

// appendEvents writes a batch to the outbox and reports success.
func (a *Automation) appendEvents(ctx context.Context, batch []Event) bool {
	if len(batch) == 0 {
		return true
	}
	err := a.cfg.Store.AppendEvents(ctx, &AppendEventsParams{Events: batch, Origin: a.cfg.ID, Now: a.now()})
	if err != nil {
		a.log.Warn("append events to the outbox", "events", len(batch), "err", err)
		return false
	}
	return true
}

// dispatch runs the event triggers while this process is the scheduler
// leader: it takes the outbox's pending events in order, fires the enabled
// triggers of each (re-read every Reload) and marks the events done in the
// same transaction. It wakes when this process appends an event, when the
// store says another process did (PostgreSQL NOTIFY, through EventWake),
// when leadership is won, and every EventPoll (SQLite files written by
// other processes; a lost notification).
func (a *Automation) dispatch(ctx context.Context) {
	wake, unsubscribe := a.eventWake.Subscribe()
	defer unsubscribe()
	poll := time.NewTicker(a.cfg.EventPoll)
	defer poll.Stop()
	d := &eventTriggers{}
	var prunedAt time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-poll.C:
		}
		if !a.leader.Load() {
			continue
		}
		for ctx.Err() == nil {
			evs, err := a.cfg.Store.PendingEvents(ctx, &PendingEventsParams{Limit: eventBatch})
			if err != nil {
				if ctx.Err() == nil {
					a.log.Warn("read the event outbox", "err", err)
				}
				break
			}
			if len(evs) == 0 || !a.handleEvents(ctx, d, evs) || len(evs) < eventBatch {
				break
			}
		}
		if now := a.now(); now.Sub(prunedAt) > time.Minute {
			prunedAt = now
			if _, err := a.cfg.Store.PruneEvents(ctx, &PruneEventsParams{Before: now.Add(-a.cfg.EventsKeep)}); err != nil && ctx.Err() == nil {
				a.log.Warn("prune the event outbox", "err", err)
			}
		}
	}
}

// eventTriggers are the enabled event triggers by event, as last read.
type eventTriggers struct {
	byEvent  map[string][]*Trigger
	loadedAt time.Time
}

func (a *Automation) loadEventTriggers(ctx context.Context, d *eventTriggers) error {
	if d.byEvent != nil && time.Since(d.loadedAt) < a.cfg.Reload {
		return nil
	}
	ts, err := a.cfg.Store.ListTriggers(ctx, &ListTriggersParams{Kind: TriggerEvent})
	if err != nil {
		return err
	}
	d.byEvent = map[string][]*Trigger{}
	for _, t := range ts {
		if t.Enabled {
			d.byEvent[t.Event] = append(d.byEvent[t.Event], t)
		}
	}
	d.loadedAt = time.Now()
	return nil
}

// handleEvents fires the triggers of a batch of outbox events in one
// transaction that also marks them done; events no trigger takes are
// marked done on their own. It reports whether the batch was handled.
func (a *Automation) handleEvents(ctx context.Context, d *eventTriggers, evs []*StoredEvent) bool {
	if err := a.loadEventTriggers(ctx, d); err != nil {
		if ctx.Err() == nil {
			a.log.Warn("list event triggers", "err", err)
		}
		return false
	}
	now := a.now()
	var fires []Fire
	var owners []*Trigger
	var unfired []int64
	for _, ev := range evs {
		fs, ts := a.eventFires(ctx, ev, d.byEvent[ev.Name], now)
		if len(fs) == 0 {
			unfired = append(unfired, ev.ID)
			continue
		}
		fires, owners = append(fires, fs...), append(owners, ts...)
	}
	if len(fires) > 0 {
		res, err := a.cfg.Store.FireTriggers(ctx, fires, now)
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("fire event triggers", "events", len(evs), "err", err)
			}
			return false
		}
		a.record(res, owners)
	}
	if err := a.cfg.Store.MarkEventsDone(ctx, &MarkEventsDoneParams{IDs: unfired, Now: now}); err != nil {
		if ctx.Err() == nil {
			a.log.Warn("mark events done", "err", err)
		}
		return false
	}
	return true
}

// eventFires are the fires of one event, each naming the event. Events
// about a job that an event trigger started fire nothing: a trigger on
// job.finished would otherwise start itself again for ever (and two
// triggers could feed each other).
func (a *Automation) eventFires(ctx context.Context, ev *StoredEvent, triggers []*Trigger, now time.Time) ([]Fire, []*Trigger) {
	if len(triggers) == 0 || ev.Data["source"] == SourceEvent && ev.Data["jobId"] != nil {
		return nil, nil
	}
	evData := map[string]any{}
	for k, v := range ev.Data {
		evData[k] = v
	}
	evData["name"], evData["subject"], evData["at"] = ev.Name, ev.Subject, ev.At.UTC().Format(time.RFC3339Nano)
	var fires []Fire
	var owners []*Trigger
	for _, t := range triggers {
		p, err := a.jobFor(ctx, t, map[string]any{"trigger": t.Name, "event": evData}, SourceEvent,
			"trigger:"+t.Name+":"+ev.Subject, now)
		if err != nil {
			a.log.Warn("trigger cannot make its job", "trigger", t.Name, "event", ev.Name, "err", err)
			continue
		}
		p.Job.SourceRef = "trigger:" + t.Name + " " + ev.Name + " " + ev.Subject
		fires = append(fires, Fire{Trigger: t.Name, Job: p, EventID: ev.ID})
		owners = append(owners, t)
	}
	return fires, owners
}

// heartbeat writes this process's worker row every Beat and reclaims, at
// once, the leases of workers that stopped beating: their items are
// handed out again without waiting for the leases to run out.
func (a *Automation) heartbeat(ctx context.Context) {
	started := a.now()
	w := &Worker{ID: a.cfg.ID, Host: a.cfg.Host, PID: a.cfg.PID, Version: a.cfg.Version, StartedAt: started}
	if w.Host == "" {
		w.Host, _ = os.Hostname()
	}
	if w.PID == 0 {
		w.PID = os.Getpid()
	}
	defer func() {
		if err := a.cfg.Store.RemoveWorker(context.WithoutCancel(ctx), w.ID); err != nil {
			a.log.Warn("remove worker row", "err", err)
		}
	}()
	for {
		a.beatOnce(ctx, w)
		select {
		case <-ctx.Done():
			return
		case <-time.After(a.cfg.Beat):
		}
	}
}

// beatOnce writes one heartbeat and reclaims dead workers' leases.
func (a *Automation) beatOnce(ctx context.Context, w *Worker) {
	now := a.now()
	w.Running, w.Scheduler = a.cfg.Running(), a.leader.Load()
	if err := a.cfg.Store.HeartbeatWorker(ctx, w, now); err != nil {
		if ctx.Err() == nil {
			a.log.Warn("heartbeat", "err", err)
		}
		return
	}
	n, err := a.cfg.Store.ReclaimDeadWorkers(ctx, &ReclaimParams{StaleBefore: now.Add(-a.cfg.StaleAfter),
		ForgetBefore: now.Add(-24 * time.Hour), Now: now})
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("reclaim dead workers", "err", err)
		}
		return
	}
	if n == 0 {
		return
	}
	back, err := a.cfg.Store.ReapExpiredLeases(ctx, &ReapParams{Now: now, Limit: 10000})
	if err != nil {
		a.log.Warn("reap reclaimed leases", "err", err)
		return
	}
	a.log.Info("reclaimed the leases of stale workers", "leases", n, "items_back", back)
	a.cfg.Notifier.Notify()
}

// WorkerStale reports whether a worker's last beat is older than staleAfter
// at now (the Workers page and `sluice workers` warn about it).
func WorkerStale(w *Worker, now time.Time, staleAfter time.Duration) bool {
	return now.Sub(w.LastSeen) > staleAfter
}
