package engine

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// SchedulerLease is the name of the lease the scheduler holds.
const SchedulerLease = "scheduler"

// AutomationConfig configures an Automation. Zero values take defaults.
type AutomationConfig struct {
	Store    Store
	Notifier *Notifier
	Events   *Events
	Clock    Clock
	Logger   *slog.Logger
	// ID names this process as scheduler lease holder and worker (the
	// runner's WorkerID: host:pid:boot).
	ID      string
	Host    string
	PID     int
	Version string
	// Running reports the items this process has in process (heartbeats).
	Running func() int
	// LeaseFor is the scheduler lease; renewed at a third of it. 15s.
	LeaseFor time.Duration
	// Reload is how often triggers are re-read (changes by other
	// processes); 2s.
	Reload time.Duration
	// MissedGrace: a tick found later than this after its due time counts
	// as missed and follows the trigger's policy; 1 min.
	MissedGrace time.Duration
	// Beat is the heartbeat interval; 5s. A worker not seen for
	// StaleAfter (3 beats) is stale: its leases are reclaimed.
	Beat       time.Duration
	StaleAfter time.Duration
	// EventPoll is how often the leader looks at the event outbox when
	// nothing woke it (events appended by other processes on SQLite, a
	// lost NOTIFY); 100ms. EventsKeep is how long handled events stay in
	// the outbox; 1h.
	EventPoll, EventsKeep time.Duration
	// NoScheduler, NoEvents, NoHeartbeat turn parts off. With NoScheduler
	// the process takes no lease, so it fires no event triggers either
	// (its events still go to the outbox, for the leader).
	NoScheduler, NoEvents, NoHeartbeat bool
}

// Automation runs the scheduler (when this process holds the lease), the
// event triggers of this process and the worker heartbeat.
type Automation struct {
	cfg AutomationConfig
	log *slog.Logger
	// leader is whether this process held the scheduler lease at its last
	// try; written by the scheduler goroutine, read by the heartbeat.
	leader atomic.Bool
	// fired counts jobs created by triggers (tests, benchmarks).
	fired atomic.Int64
	// cat keeps pipelines, definitions and the default user for Reload.
	cat *catalog
	// listening is closed when this process's events go to the outbox.
	listening chan struct{}
	// eventWake wakes the event dispatcher (an outbox append here or,
	// through the store, elsewhere; leadership won).
	eventWake *Notifier
	once      sync.Once
}

// NewAutomation fills defaults and returns the service.
func NewAutomation(c AutomationConfig) *Automation {
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.LeaseFor <= 0 {
		c.LeaseFor = 15 * time.Second
	}
	if c.Reload <= 0 {
		c.Reload = 2 * time.Second
	}
	if c.MissedGrace <= 0 {
		c.MissedGrace = time.Minute
	}
	if c.Beat <= 0 {
		c.Beat = 5 * time.Second
	}
	if c.StaleAfter <= 0 {
		c.StaleAfter = 3 * c.Beat
	}
	if c.EventPoll <= 0 {
		c.EventPoll = 100 * time.Millisecond
	}
	if c.EventsKeep <= 0 {
		c.EventsKeep = time.Hour
	}
	if c.Running == nil {
		c.Running = func() int { return 0 }
	}
	return &Automation{cfg: c, log: c.Logger.WithGroup("automation"), listening: make(chan struct{}),
		cat: &catalog{store: c.Store, ttl: c.Reload}, eventWake: NewNotifier()}
}

// Leader reports whether this process runs the scheduler.
func (a *Automation) Leader() bool { return a.leader.Load() }

// Fired is the number of jobs triggers created in this process.
func (a *Automation) Fired() int64 { return a.fired.Load() }

// Listening is closed once this process's events are subscribed to (they
// go to the outbox from then on).
func (a *Automation) Listening() <-chan struct{} { return a.listening }

// EventWake is the notifier that wakes the event dispatcher; a store that
// hears of other processes' events (PostgreSQL's WakeEventsOn) pokes it.
func (a *Automation) EventWake() *Notifier { return a.eventWake }

// Run runs until ctx ends, then gives up the lease and removes the
// worker's heartbeat row.
func (a *Automation) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if !a.cfg.NoScheduler {
		wg.Go(func() { a.schedule(ctx) })
	}
	if !a.cfg.NoEvents && a.cfg.Events != nil {
		wg.Go(func() { a.outbox(ctx) })
	} else {
		a.once.Do(func() { close(a.listening) })
	}
	if !a.cfg.NoEvents && !a.cfg.NoScheduler {
		wg.Go(func() { a.dispatch(ctx) })
	}
	if !a.cfg.NoHeartbeat {
		wg.Go(func() { a.heartbeat(ctx) })
	}
	wg.Wait()
}

func (a *Automation) now() time.Time { return a.cfg.Clock.Now() }

// schedState is what the scheduler loop keeps between passes.
type schedState struct {
	lease             *LeadershipParams
	renewAt, reloadAt time.Time
	triggers          []*Trigger
	scheds            map[string]*Schedule
}

func (a *Automation) newSchedState() *schedState {
	return &schedState{lease: &LeadershipParams{Name: SchedulerLease, Holder: a.cfg.ID, For: a.cfg.LeaseFor},
		scheds: map[string]*Schedule{}}
}

// schedule is the scheduler loop: hold the lease, fire what is due, sleep
// until the next due time (or the next reload).
func (a *Automation) schedule(ctx context.Context) {
	st := a.newSchedState()
	defer func() {
		if a.leader.Load() {
			st.lease.Now = a.now()
			if err := a.cfg.Store.ReleaseLeadership(context.WithoutCancel(ctx), st.lease); err != nil {
				a.log.Warn("release scheduler lease", "err", err)
			}
		}
	}()
	for {
		wake := a.pass(ctx, st)
		d := max(wake.Sub(a.now()), 5*time.Millisecond)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// TickScheduler runs one scheduler pass at the clock's time, as a freshly
// started process would (the lease taken or renewed, triggers read from
// the store), and returns when the next pass is due. Tests and benchmarks
// drive the scheduler with it.
func (a *Automation) TickScheduler(ctx context.Context) time.Time {
	return a.pass(ctx, a.newSchedState())
}

// pass is one scheduler pass; it returns when the next one is due.
func (a *Automation) pass(ctx context.Context, st *schedState) time.Time {
	now := a.now()
	if !now.Before(st.renewAt) {
		st.lease.Now = now
		held, err := a.cfg.Store.AcquireLeadership(ctx, st.lease)
		if err != nil && ctx.Err() == nil {
			a.log.Warn("scheduler lease", "err", err)
		}
		if held != a.leader.Load() {
			a.log.Info("scheduler lease", "held", held)
		}
		if a.leader.Swap(held) != held && held {
			a.eventWake.Notify()
		}
		st.renewAt = now.Add(a.cfg.LeaseFor / 3)
	}
	wake := st.renewAt
	if !a.leader.Load() {
		return wake
	}
	if !now.Before(st.reloadAt) {
		ts, err := a.cfg.Store.ListTriggers(ctx, &ListTriggersParams{Kind: TriggerSchedule})
		if err != nil && ctx.Err() == nil {
			a.log.Warn("list schedule triggers", "err", err)
		} else if err == nil {
			st.triggers = ts
		}
		st.reloadAt = now.Add(a.cfg.Reload)
	}
	next := a.fireDue(ctx, st.triggers, st.scheds, now)
	wake = minTime(wake, st.reloadAt)
	if !next.IsZero() {
		wake = minTime(wake, next)
	}
	return wake
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// fireBatch bounds the fires written in one transaction. Deduped fires cost
// the store one statement for the whole batch, so a tick of a thousand
// triggers is one transaction (one fsync).
const fireBatch = 1024

// fireDue fires the due triggers and returns the earliest next due time.
// It updates the triggers' NextFireAt in place.
func (a *Automation) fireDue(ctx context.Context, triggers []*Trigger, scheds map[string]*Schedule, now time.Time) time.Time {
	var next time.Time
	var fires []Fire
	var owners []*Trigger
	for _, t := range triggers {
		if !t.Enabled || t.NextFireAt == nil {
			continue
		}
		key := t.Cron + "\x00" + t.TZ
		s := scheds[key]
		if s == nil {
			var err error
			if s, err = ParseSchedule(t.Cron, t.TZ); err != nil {
				a.log.Warn("trigger has a bad schedule", "trigger", t.Name, "err", err)
				continue
			}
			scheds[key] = s
		}
		due := *t.NextFireAt
		if due.After(now) {
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		f := Fire{Trigger: t.Name, Due: due, Next: s.Next(now)}
		missed := now.Sub(due) > a.cfg.MissedGrace
		if !missed || t.Missed == MissedOnce {
			// The job is built only when the store finds its key free:
			// most fires of a frequent schedule are deduped.
			key, loc := "trigger:"+t.Name, s.Location()
			f.DedupeKey, f.DedupeWindow = key, t.DedupeWindow.D()
			f.Build = func() (*EnqueueJobParams, error) {
				return a.jobFor(ctx, t, map[string]any{"trigger": t.Name, "fire": fireContext(due, loc)},
					SourceSchedule, key, now)
			}
		}
		if missed {
			a.log.Info("schedule missed ticks", "trigger", t.Name, "due", due, "policy", t.Missed)
		}
		fires = append(fires, f)
		owners = append(owners, t)
		nx := f.Next
		t.NextFireAt = &nx
		if next.IsZero() || nx.Before(next) {
			next = nx
		}
	}
	for i := 0; i < len(fires); i += fireBatch {
		end := min(i+fireBatch, len(fires))
		res, err := a.cfg.Store.FireTriggers(ctx, fires[i:end], now)
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("fire triggers", "err", err)
			}
			return now.Add(time.Second)
		}
		a.record(res, owners[i:end])
	}
	return next
}

func (a *Automation) record(res []FireResult, owners []*Trigger) {
	created := false
	for k, r := range res {
		switch {
		case r.Job != nil:
			created = true
			a.fired.Add(1)
			a.log.Info("trigger fired", "trigger", owners[k].Name, "job_id", r.Job.ID)
		case r.Deduped:
			a.log.Debug("trigger deduped", "trigger", owners[k].Name)
		case r.Err != nil:
			a.log.Warn("trigger cannot make its job", "trigger", owners[k].Name, "err", r.Err)
		}
	}
	if created {
		a.cfg.Notifier.Notify()
	}
}

// fireContext is what schedule payload templates see as .fire.
func fireContext(due time.Time, loc *time.Location) map[string]any {
	local := due.In(loc)
	return map[string]any{"time": local.Format(time.RFC3339), "date": local.Format(time.DateOnly),
		"unix": due.Unix(), "utc": due.UTC().Format(time.RFC3339)}
}

// jobFor builds the job of a trigger from its rendered payload.
func (a *Automation) jobFor(ctx context.Context, t *Trigger, data map[string]any, source, dedupe string, now time.Time) (*EnqueueJobParams, error) {
	payload, err := a.cat.render(t, data)
	if err != nil {
		return nil, err
	}
	return a.cat.jobParams(ctx, JobRequest{Definition: t.Definition, Pipeline: t.Pipeline, Payload: payload,
		Name: t.Name, Source: source, SourceRef: "trigger:" + t.Name, Priority: t.Priority,
		DedupeKey: dedupe, DedupeWindow: t.DedupeWindow.D(), Now: now})
}
