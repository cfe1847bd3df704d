package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/storage/sqlite"
)

// schedClock is a clock only the test moves.
type schedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *schedClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *schedClock) set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

func nyTimes(t *testing.T, expr string, from time.Time, n int) []string {
	t.Helper()
	s, err := engine.ParseSchedule(expr, "America/New_York")
	require.NoError(t, err)
	var out []string
	x := from
	for range n {
		x = s.Next(x)
		out = append(out, x.In(s.Location()).Format("01-02 15:04 MST"))
	}
	return out
}

// DST in America/New_York, as documented on Schedule.Next.
func TestScheduleDSTNewYork(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	spring := time.Date(2026, 3, 7, 12, 0, 0, 0, ny) // DST starts 2026-03-08 02:00 EST → 03:00 EDT
	fall := time.Date(2026, 10, 31, 12, 0, 0, 0, ny) // DST ends 2026-11-01 02:00 EDT → 01:00 EST

	// Spring forward: 02:30 does not exist on 03-08, so that day has no run.
	require.Equal(t, []string{"03-08 01:30 EST", "03-09 01:30 EDT"}, nyTimes(t, "30 1 * * *", spring, 2))
	require.Equal(t, []string{"03-09 02:30 EDT", "03-10 02:30 EDT"}, nyTimes(t, "30 2 * * *", spring, 2))
	require.Equal(t, []string{"03-08 03:30 EDT"}, nyTimes(t, "30 3 * * *", spring, 1))
	// Fall back: 01:30 occurs twice; a named hour fires once, at the first.
	require.Equal(t, []string{"11-01 01:30 EDT", "11-02 01:30 EST"}, nyTimes(t, "30 1 * * *", fall, 2))
	require.Equal(t, []string{"11-01 02:30 EST", "11-02 02:30 EST"}, nyTimes(t, "30 2 * * *", fall, 2))
	// Every hour keeps firing every real hour, both 01:00s included.
	from := time.Date(2026, 11, 1, 0, 30, 0, 0, ny)
	require.Equal(t, []string{"11-01 01:00 EDT", "11-01 01:00 EST", "11-01 02:00 EST"}, nyTimes(t, "0 * * * *", from, 3))
	// @every counts elapsed time across the change.
	s, err := engine.ParseSchedule("@every 1h", "America/New_York")
	require.NoError(t, err)
	start := time.Date(2026, 11, 1, 0, 30, 0, 0, ny)
	require.Equal(t, time.Hour, s.Next(start).Sub(start))
}

func TestScheduleValidation(t *testing.T) {
	t.Parallel()
	_, err := engine.ParseSchedule("61 * * * *", "UTC")
	require.Equal(t, "cron", engine.ErrorField(err))
	_, err = engine.ParseSchedule("* * * * *", "Mars/Olympus")
	require.Equal(t, "tz", engine.ErrorField(err))
	_, err = engine.ParseSchedule("* * * * *", "")
	require.Equal(t, "tz", engine.ErrorField(err))
}

type schedEnv struct {
	s     engine.Store
	clock *schedClock
}

func newSchedEnv(t *testing.T, at time.Time) *schedEnv {
	t.Helper()
	return &schedEnv{s: newStore(t), clock: &schedClock{now: at}}
}

func (e *schedEnv) automation(id string) *engine.Automation {
	return engine.NewAutomation(engine.AutomationConfig{Store: e.s, Clock: e.clock, ID: id, Notifier: engine.NewNotifier()})
}

func (e *schedEnv) jobs(t *testing.T) []*engine.Job {
	t.Helper()
	js, err := e.s.ListJobs(t.Context(), &engine.ListJobsParams{Limit: 100})
	require.NoError(t, err)
	return js
}

func (e *schedEnv) finishAll(t *testing.T) {
	t.Helper()
	for _, j := range e.jobs(t) {
		if !j.State.Terminal() {
			_, err := e.s.SetJobState(t.Context(), &engine.SetJobStateParams{JobID: j.ID, From: engine.JobControls["cancel"].From,
				To: engine.JobCanceled, Now: e.clock.Now()})
			require.NoError(t, err)
		}
	}
}

func (e *schedEnv) addSchedule(t *testing.T, tr engine.Trigger) *engine.Trigger {
	t.Helper()
	tr.Kind = engine.TriggerSchedule
	if tr.Pipeline == "" && tr.Definition == "" {
		tr.Pipeline = engine.DefaultPipeline
	}
	got, err := engine.AddTrigger(t.Context(), e.s, &tr, e.clock.Now())
	require.NoError(t, err)
	return got
}

// A restart between two ticks never fires the first tick again, and a
// second scheduler (another process) never fires what the first did.
func TestSchedulerRestartDoesNotFireTwice(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2031, 5, 6, 7, 8, 30, 0, time.UTC)
	e := newSchedEnv(t, t0)
	tr := e.addSchedule(t, engine.Trigger{Name: "minutely", Cron: "* * * * *", TZ: "UTC",
		Payload: json.RawMessage(`{"at":"{{.fire.time}}"}`)})
	require.Equal(t, t0.Add(30*time.Second), *tr.NextFireAt)

	first := e.automation("host:1:a")
	e.clock.set(t0.Add(30*time.Second + 200*time.Millisecond))
	first.TickScheduler(t.Context())
	require.Len(t, e.jobs(t), 1)
	require.True(t, first.Leader())
	// Another process at the same moment: not the leader, fires nothing.
	other := e.automation("host:2:b")
	other.TickScheduler(t.Context())
	require.False(t, other.Leader())
	require.Len(t, e.jobs(t), 1)

	// The first process dies (no release); its replacement comes up before
	// the next tick, after the old lease ran out, and finds nothing due.
	e.finishAll(t)
	e.clock.set(t0.Add(50 * time.Second))
	restarted := e.automation("host:3:c")
	restarted.TickScheduler(t.Context())
	require.True(t, restarted.Leader())
	require.Len(t, e.jobs(t), 1, "the restart did not fire the first tick again")

	e.clock.set(t0.Add(90*time.Second + 100*time.Millisecond))
	restarted.TickScheduler(t.Context())
	restarted.TickScheduler(t.Context())
	js := e.jobs(t)
	require.Len(t, js, 2, "the second tick fired once")
	require.Equal(t, engine.SourceSchedule, js[0].Source)
	require.Equal(t, "trigger:minutely", js[0].SourceRef)
	it, err := e.s.ListItems(t.Context(), &engine.ListItemsParams{JobID: js[0].ID, Limit: 1, WithInput: true})
	require.NoError(t, err)
	require.JSONEq(t, `{"at":"2031-05-06T07:10:00Z"}`, string(it.Items[0].Input))
}

func TestSchedulerMissedPolicies(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2031, 5, 6, 7, 0, 0, 0, time.UTC)
	e := newSchedEnv(t, t0)
	e.addSchedule(t, engine.Trigger{Name: "skipper", Cron: "*/5 * * * *", TZ: "UTC", Missed: engine.MissedSkip})
	e.addSchedule(t, engine.Trigger{Name: "catchup", Cron: "*/5 * * * *", TZ: "UTC", Missed: engine.MissedOnce})
	// Nothing ran for an hour: twelve ticks were missed.
	e.clock.set(t0.Add(time.Hour + 2*time.Minute))
	e.automation("a").TickScheduler(t.Context())
	js := e.jobs(t)
	require.Len(t, js, 1, "skip runs none, once runs one")
	require.Equal(t, "catchup", js[0].Name)
	ts, err := e.s.ListTriggers(t.Context(), &engine.ListTriggersParams{})
	require.NoError(t, err)
	for _, tr := range ts {
		require.Equal(t, t0.Add(time.Hour+5*time.Minute), *tr.NextFireAt, "%s goes on from now", tr.Name)
	}
	require.Equal(t, "job", ts[0].LastResult)
	require.Equal(t, "skipped", ts[1].LastResult)
}

// A trigger's job is deduped while its last one is unfinished and within
// its window after that.
func TestSchedulerDedupeWindow(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2031, 5, 6, 7, 0, 0, 0, time.UTC)
	e := newSchedEnv(t, t0)
	e.addSchedule(t, engine.Trigger{Name: "every", Cron: "@every 1m", TZ: "UTC", DedupeWindow: engine.Duration(150 * time.Second)})
	a := e.automation("a")
	tick := func(at time.Duration) {
		e.clock.set(t0.Add(at))
		a.TickScheduler(t.Context())
	}
	tick(time.Minute) // job 1
	tick(2 * time.Minute)
	require.Len(t, e.jobs(t), 1, "job 1 is still queued")
	e.finishAll(t)
	tick(3 * time.Minute)
	require.Len(t, e.jobs(t), 1, "job 1 finished but is within the 150 s window")
	tick(4 * time.Minute)
	require.Len(t, e.jobs(t), 2, "past the window")
}

// An event trigger enqueues its job from the event, with the payload
// rendered from the event's data.
func TestEventTriggerEnqueues(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	events := engine.NewEvents()
	_, err := engine.ApplyDefinition(t.Context(), s, &engine.Definition{Key: "hello", Executable: "/bin/echo",
		Args: []string{"{{.job}}"}, ArgSchema: json.RawMessage(`{"type":"object","required":["job"]}`)}, time.Now())
	require.NoError(t, err)
	_, err = engine.AddTrigger(t.Context(), s, &engine.Trigger{Name: "after", Kind: engine.TriggerEvent, Event: engine.EventJobFinished,
		Definition: "hello", Payload: json.RawMessage(`{"job":"done {{.event.jobId}} {{.event.name}}"}`)}, time.Now())
	require.NoError(t, err)
	a := engine.NewAutomation(engine.AutomationConfig{Store: s, Events: events, Notifier: engine.NewNotifier(), ID: "x",
		NoHeartbeat: true})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go a.Run(ctx)
	<-a.Listening()
	events.Publish(engine.Event{Name: engine.EventJobFinished, Subject: "job:41", Data: map[string]any{"jobId": 41}})
	events.Publish(engine.Event{Name: engine.EventJobFinished, Subject: "job:41", Data: map[string]any{"jobId": 41}})
	events.Publish(engine.Event{Name: engine.EventItemDead, Subject: "item:1"})
	// A job an event trigger started does not fire job triggers (no loops).
	events.Publish(engine.Event{Name: engine.EventJobFinished, Subject: "job:42", Data: map[string]any{"jobId": 42, "source": "event"}})
	// Events are handled in order: once this last one has fired, every
	// earlier one has been handled.
	events.Publish(engine.Event{Name: engine.EventJobFinished, Subject: "job:43", Data: map[string]any{"jobId": 43, "source": "manual"}})
	require.Eventually(t, func() bool { return a.Fired() >= 2 }, 10*time.Second, 5*time.Millisecond)
	js, err := s.ListJobs(t.Context(), &engine.ListJobsParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, js, 2, "the repeated event is deduped; item.dead has no trigger; an event job's own event fires nothing")
	require.Equal(t, int64(2), a.Fired())
	js = js[1:] // oldest first below
	require.Equal(t, engine.SourceEvent, js[0].Source)
	require.Equal(t, "command.hello", js[0].Pipeline)
	it, err := s.ListItems(t.Context(), &engine.ListItemsParams{JobID: js[0].ID, Limit: 1, WithInput: true})
	require.NoError(t, err)
	require.JSONEq(t, `{"job":"done 41 job.finished"}`, string(it.Items[0].Input))
}

// An event raised in another process (another store handle on the same
// database, with its own Automation that does not lead) reaches the
// outbox and fires the trigger in the leader, once; the outbox is left
// with nothing pending.
func TestEventFromAnotherProcessFiresInLeader(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.db")
	open := func() *sqlite.Store {
		s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close()) })
		return s
	}
	leaderStore, otherStore := open(), open()
	_, err := engine.AddTrigger(t.Context(), leaderStore, &engine.Trigger{Name: "on-dead", Kind: engine.TriggerEvent,
		Event: engine.EventItemDead, Pipeline: engine.DefaultPipeline,
		Payload: json.RawMessage(`{"item":"{{.event.itemId}}","from":"{{.event.subject}}"}`)}, time.Now())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	leader := engine.NewAutomation(engine.AutomationConfig{Store: leaderStore, Events: engine.NewEvents(),
		Notifier: engine.NewNotifier(), ID: "leader:1:a", NoHeartbeat: true})
	go leader.Run(ctx)
	require.Eventually(t, leader.Leader, 10*time.Second, 5*time.Millisecond)
	otherEvents := engine.NewEvents()
	other := engine.NewAutomation(engine.AutomationConfig{Store: otherStore, Events: otherEvents,
		Notifier: engine.NewNotifier(), ID: "other:2:b", NoHeartbeat: true})
	go other.Run(ctx)
	<-other.Listening()
	otherEvents.Publish(engine.Event{Name: engine.EventItemDead, Subject: "item:7", Data: map[string]any{"itemId": 7}})
	require.Eventually(t, func() bool { return leader.Fired() == 1 }, 10*time.Second, 5*time.Millisecond,
		"the leader fires the trigger of an event raised elsewhere")
	require.False(t, other.Leader())
	require.Zero(t, other.Fired())
	js, err := leaderStore.ListJobs(t.Context(), &engine.ListJobsParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, js, 1)
	require.Equal(t, engine.SourceEvent, js[0].Source)
	it, err := leaderStore.ListItems(t.Context(), &engine.ListItemsParams{JobID: js[0].ID, Limit: 1, WithInput: true})
	require.NoError(t, err)
	require.JSONEq(t, `{"item":"7","from":"item:7"}`, string(it.Items[0].Input))
	require.Eventually(t, func() bool {
		evs, err := leaderStore.PendingEvents(t.Context(), &engine.PendingEventsParams{Limit: 10})
		require.NoError(t, err)
		return len(evs) == 0
	}, 5*time.Second, 5*time.Millisecond, "the event is marked done")
	require.Equal(t, int64(1), leader.Fired(), "handled once")
}

// A disabled schedule fires nothing; enabled again, it fires from its
// next tick after now (the ticks it missed are not run); a changed cron
// moves the next fire time; a bad edit is refused naming the field and
// changes nothing.
func TestEditTriggerDisableEnable(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	clock := &schedClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	_, err := engine.AddTrigger(t.Context(), s, &engine.Trigger{Name: "min", Kind: engine.TriggerSchedule, Cron: "* * * * *",
		TZ: "UTC", Pipeline: engine.DefaultPipeline}, clock.Now())
	require.NoError(t, err)
	a := engine.NewAutomation(engine.AutomationConfig{Store: s, Notifier: engine.NewNotifier(), ID: "x", Clock: clock,
		NoEvents: true, NoHeartbeat: true})
	off, on := false, true
	tr, err := engine.EditTrigger(t.Context(), s, "min", &engine.TriggerPatch{Enabled: &off}, clock.Now())
	require.NoError(t, err)
	require.False(t, tr.Enabled)
	clock.set(clock.Now().Add(5 * time.Minute))
	a.TickScheduler(t.Context())
	require.Zero(t, a.Fired(), "disabled: no fire")
	tr, err = engine.EditTrigger(t.Context(), s, "min", &engine.TriggerPatch{Enabled: &on}, clock.Now())
	require.NoError(t, err)
	require.True(t, tr.Enabled)
	require.Equal(t, clock.Now().Add(time.Minute), *tr.NextFireAt, "the next tick after now, not the missed ones")
	clock.set(clock.Now().Add(time.Minute))
	a.TickScheduler(t.Context())
	require.Equal(t, int64(1), a.Fired())
	hourly := "0 * * * *"
	tr, err = engine.EditTrigger(t.Context(), s, "min", &engine.TriggerPatch{Cron: &hourly}, clock.Now())
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC), *tr.NextFireAt)
	bad := "Mars/Olympus"
	_, err = engine.EditTrigger(t.Context(), s, "min", &engine.TriggerPatch{TZ: &bad}, clock.Now())
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
	require.Contains(t, err.Error(), "tz")
	_, err = engine.EditTrigger(t.Context(), s, "nope", &engine.TriggerPatch{Enabled: &on}, clock.Now())
	require.Equal(t, engine.ENOTFOUND, engine.ErrorCode(err))
	ts, err := s.ListTriggers(t.Context(), &engine.ListTriggersParams{})
	require.NoError(t, err)
	require.Equal(t, "UTC", ts[0].TZ, "a refused edit changes nothing")
	require.Equal(t, hourly, ts[0].Cron)
}

func TestStartJobRefusesUnknownAndInvalid(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	_, err := engine.StartJob(t.Context(), s, nil, engine.JobRequest{Definition: "nope", Now: time.Now()})
	require.Equal(t, engine.ENOTFOUND, engine.ErrorCode(err))
	require.Contains(t, engine.ErrorMessage(err), "refused")
	_, err = engine.ApplyDefinition(t.Context(), s, &engine.Definition{Key: "hello", Executable: "/bin/echo",
		ArgSchema: json.RawMessage(`{"type":"object","required":["name"]}`)}, time.Now())
	require.NoError(t, err)
	_, err = engine.StartJob(t.Context(), s, nil, engine.JobRequest{Definition: "hello", Payload: json.RawMessage(`{}`), Now: time.Now()})
	require.Equal(t, "payload.name", engine.ErrorField(err))
	js, err := s.ListJobs(t.Context(), &engine.ListJobsParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, js, "nothing was enqueued")
}
