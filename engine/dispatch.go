package engine

import (
	"context"
	"os"
	"time"
)

// dispatch runs the event triggers of this process: every event published
// here is matched against the enabled event triggers (re-read every
// Reload) and each match enqueues its job at once. Event triggers need no
// leader: an event happens in exactly one process.
func (a *Automation) dispatch(ctx context.Context) {
	events, unsubscribe := a.cfg.Events.Subscribe(1024)
	defer unsubscribe()
	a.once.Do(func() { close(a.listening) })
	var byEvent map[string][]*Trigger
	var loadedAt time.Time
	load := func() {
		ts, err := a.cfg.Store.ListTriggers(ctx, &ListTriggersParams{Kind: TriggerEvent})
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("list event triggers", "err", err)
			}
			return
		}
		byEvent = map[string][]*Trigger{}
		for _, t := range ts {
			if t.Enabled {
				byEvent[t.Event] = append(byEvent[t.Event], t)
			}
		}
		loadedAt = time.Now()
	}
	load()
	tick := time.NewTicker(a.cfg.Reload)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			load()
		case ev := <-events:
			if time.Since(loadedAt) > a.cfg.Reload {
				load()
			}
			a.handle(ctx, ev, byEvent[ev.Name])
		}
	}
}

// handle fires the triggers of one event. Events about a job that an event
// trigger started fire nothing: a trigger on job.finished would otherwise
// start itself again for ever (and two triggers could feed each other).
func (a *Automation) handle(ctx context.Context, ev Event, triggers []*Trigger) {
	if len(triggers) == 0 || ev.Data["source"] == SourceEvent && ev.Data["jobId"] != nil {
		return
	}
	evData := map[string]any{}
	for k, v := range ev.Data {
		evData[k] = v
	}
	evData["name"], evData["subject"], evData["at"] = ev.Name, ev.Subject, ev.At.UTC().Format(time.RFC3339Nano)
	now := a.now()
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
		fires = append(fires, Fire{Trigger: t.Name, Job: p})
		owners = append(owners, t)
	}
	if len(fires) == 0 {
		return
	}
	res, err := a.cfg.Store.FireTriggers(ctx, fires, now)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("fire event triggers", "event", ev.Name, "err", err)
		}
		return
	}
	a.record(res, owners)
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
