package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// automationTests cover AutomationStore and the dedupe keys of EnqueueJob.
var automationTests = []subtest{
	{"Definitions", testDefinitions},
	{"TriggersCRUD", testTriggersCRUD},
	{"FireOncePerDue", testFireOncePerDue},
	{"DedupeActive", testDedupeActive},
	{"DedupeWindow", testDedupeWindow},
	{"FireBuildsLazily", testFireBuildsLazily},
	{"Leadership", testLeadership},
	{"WorkersReclaim", testWorkersReclaim},
}

func testDefinitions(t *testing.T, e *env) {
	_, err := e.s.GetDefinition(e.ctx, "hello")
	require.True(t, engine.IsNotFound(err))
	d := &engine.Definition{Key: "hello", Executable: "/bin/echo", Args: []string{"{{.name}}"},
		ArgSchema: json.RawMessage(`{"type":"object"}`), TimeoutSeconds: 10}
	got, err := e.s.PutDefinition(e.ctx, d, e.now())
	require.NoError(t, err)
	require.Equal(t, 1, got.Version)
	off := false
	d.Active = &off
	got, err = e.s.PutDefinition(e.ctx, d, e.advance(time.Second))
	require.NoError(t, err)
	require.Equal(t, 2, got.Version)
	back, err := e.s.GetDefinition(e.ctx, "hello")
	require.NoError(t, err)
	require.False(t, back.IsActive())
	require.Equal(t, []string{"{{.name}}"}, back.Args)
	requireTime(t, e.now(), back.UpdatedAt)
	_, err = e.s.PutDefinition(e.ctx, &engine.Definition{Key: "a", Executable: "/bin/true"}, e.now())
	require.NoError(t, err)
	list, err := e.s.ListDefinitions(e.ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "a", list[0].Key, "ordered by key")
}

func (e *env) scheduleTrigger(name string, next time.Time) *engine.Trigger {
	e.t.Helper()
	tr, err := e.s.CreateTrigger(e.ctx, &engine.Trigger{Name: name, Kind: engine.TriggerSchedule, Cron: "@every 1m", TZ: "UTC",
		Pipeline: engine.DefaultPipeline, Payload: json.RawMessage(`{"a":"{{.trigger}}"}`), Enabled: true,
		DedupeWindow: engine.Duration(time.Minute), Missed: engine.MissedOnce, NextFireAt: &next}, e.now())
	require.NoError(e.t, err)
	return tr
}

func testTriggersCRUD(t *testing.T, e *env) {
	next := e.now().Add(time.Minute)
	tr := e.scheduleTrigger("nightly", next)
	require.Equal(t, engine.TriggerSchedule, tr.Kind)
	requireTime(t, next, *tr.NextFireAt)
	require.Equal(t, engine.MissedOnce, tr.Missed)
	require.Equal(t, time.Minute, tr.DedupeWindow.D())
	require.JSONEq(t, `{"a":"{{.trigger}}"}`, string(tr.Payload))
	_, err := e.s.CreateTrigger(e.ctx, &engine.Trigger{Name: "nightly", Kind: engine.TriggerEvent, Event: "job.finished",
		Pipeline: engine.DefaultPipeline}, e.now())
	require.Equal(t, engine.ECONFLICT, engine.ErrorCode(err), "a name is taken once")
	_, err = e.s.CreateTrigger(e.ctx, &engine.Trigger{Name: "on-done", Kind: engine.TriggerEvent, Event: "job.finished",
		Definition: "hello", Enabled: true}, e.now())
	require.NoError(t, err)
	all, err := e.s.ListTriggers(e.ctx, &engine.ListTriggersParams{})
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, "nightly", all[0].Name)
	ev, err := e.s.ListTriggers(e.ctx, &engine.ListTriggersParams{Event: "job.finished"})
	require.NoError(t, err)
	require.Len(t, ev, 1)
	require.Equal(t, "hello", ev[0].Definition)
	require.Nil(t, ev[0].NextFireAt)
	sch, err := e.s.ListTriggers(e.ctx, &engine.ListTriggersParams{Kind: engine.TriggerSchedule})
	require.NoError(t, err)
	require.Len(t, sch, 1)
	upd := *all[0]
	upd.Cron, upd.TZ, upd.Enabled, upd.Priority = "0 3 * * *", "Europe/Paris", false, 7
	upd.DedupeWindow, upd.Payload = engine.Duration(2*time.Minute), json.RawMessage(`{"b":"x"}`)
	moved := next.Add(time.Hour)
	upd.NextFireAt = &moved
	got, err := e.s.UpdateTrigger(e.ctx, &upd, e.advance(time.Second))
	require.NoError(t, err)
	require.Equal(t, "0 3 * * *", got.Cron)
	require.Equal(t, "Europe/Paris", got.TZ)
	require.False(t, got.Enabled)
	require.Equal(t, 7, got.Priority)
	require.Equal(t, 2*time.Minute, got.DedupeWindow.D())
	require.JSONEq(t, `{"b":"x"}`, string(got.Payload))
	requireTime(t, moved, *got.NextFireAt)
	requireTime(t, e.now(), got.UpdatedAt)
	requireTime(t, tr.CreatedAt, got.CreatedAt)
	back, err := e.s.ListTriggers(e.ctx, &engine.ListTriggersParams{Kind: engine.TriggerSchedule})
	require.NoError(t, err)
	require.False(t, back[0].Enabled, "the update is stored")
	_, err = e.s.UpdateTrigger(e.ctx, &engine.Trigger{Name: "nope", Kind: engine.TriggerSchedule, Cron: "@daily", TZ: "UTC",
		Pipeline: engine.DefaultPipeline}, e.now())
	require.True(t, engine.IsNotFound(err), "%v", err)
	require.NoError(t, e.s.DeleteTrigger(e.ctx, "nightly"))
	require.True(t, engine.IsNotFound(e.s.DeleteTrigger(e.ctx, "nightly")))
}

func (e *env) triggerJob(key string, window time.Duration) *engine.EnqueueJobParams {
	return &engine.EnqueueJobParams{
		Job: engine.CreateJobParams{UserID: e.user.ID, Pipeline: engine.DefaultPipeline, Source: engine.SourceSchedule,
			SourceRef: "trigger:x", DedupeKey: key, DedupeWindow: window, Now: e.now()},
		Items: rows(1, 1),
	}
}

// A due time is fired once: a second fire of the same due time (another
// scheduler, or the same one after a restart) changes nothing.
func testFireOncePerDue(t *testing.T, e *env) {
	due := e.now()
	e.scheduleTrigger("tick", due)
	next := due.Add(time.Minute)
	fire := engine.Fire{Trigger: "tick", Due: due, Next: next, Job: e.triggerJob("trigger:tick", 0)}
	res, err := e.s.FireTriggers(e.ctx, []engine.Fire{fire}, e.now())
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.True(t, res[0].Fired)
	require.NotNil(t, res[0].Job)
	require.Equal(t, engine.SourceSchedule, res[0].Job.Source)
	require.Equal(t, engine.JobQueued, res[0].Job.State)

	res, err = e.s.FireTriggers(e.ctx, []engine.Fire{fire}, e.now())
	require.NoError(t, err)
	require.False(t, res[0].Fired, "the same due time fires once")
	require.Nil(t, res[0].Job)

	tr, err := e.s.ListTriggers(e.ctx, &engine.ListTriggersParams{Kind: engine.TriggerSchedule})
	require.NoError(t, err)
	requireTime(t, next, *tr[0].NextFireAt)
	requireTime(t, due, *tr[0].LastFireAt)
	require.Equal(t, res0JobID(t, e), tr[0].LastJobID)
	require.Equal(t, "job", tr[0].LastResult)

	// A skipped fire (Job nil) advances without a job.
	res, err = e.s.FireTriggers(e.ctx, []engine.Fire{{Trigger: "tick", Due: next, Next: next.Add(time.Minute)}}, e.now())
	require.NoError(t, err)
	require.True(t, res[0].Fired)
	require.Nil(t, res[0].Job)
	tr, _ = e.s.ListTriggers(e.ctx, &engine.ListTriggersParams{})
	require.Equal(t, "skipped", tr[0].LastResult)

	// A fire of a trigger that is gone does nothing.
	res, err = e.s.FireTriggers(e.ctx, []engine.Fire{{Trigger: "gone", Due: due, Next: next}}, e.now())
	require.NoError(t, err)
	require.False(t, res[0].Fired)
}

func res0JobID(t *testing.T, e *env) int64 {
	t.Helper()
	jobs, err := e.s.ListJobs(e.ctx, &engine.ListJobsParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	return jobs[0].ID
}

// No two unfinished jobs hold one dedupe key; a finished one frees it.
func testDedupeActive(t *testing.T, e *env) {
	j1, err := e.s.EnqueueJob(e.ctx, e.triggerJob("k", 0))
	require.NoError(t, err)
	_, err = e.s.EnqueueJob(e.ctx, e.triggerJob("k", 0))
	require.True(t, engine.IsDuplicate(err), "%v", err)
	require.Equal(t, engine.ECONFLICT, engine.ErrorCode(err))
	_, err = e.s.EnqueueJob(e.ctx, e.triggerJob("other", 0))
	require.NoError(t, err, "another key is free")
	_, err = e.s.EnqueueJob(e.ctx, e.triggerJob("", 0))
	require.NoError(t, err, "no key, no dedupe")
	_, err = e.s.EnqueueJob(e.ctx, e.triggerJob("", 0))
	require.NoError(t, err)
	_, err = e.s.SetJobState(e.ctx, &engine.SetJobStateParams{JobID: j1.ID, From: engine.JobControls["cancel"].From,
		To: engine.JobCanceled, Now: e.advance(time.Second)})
	require.NoError(t, err)
	_, err = e.s.EnqueueJob(e.ctx, e.triggerJob("k", 0))
	require.NoError(t, err, "the key is free once its job finished (no window)")

	// Fired through FireTriggers, a duplicate still advances the trigger.
	due := e.now()
	e.scheduleTrigger("dup", due)
	res, err := e.s.FireTriggers(e.ctx, []engine.Fire{{Trigger: "dup", Due: due, Next: due.Add(time.Minute), Job: e.triggerJob("k", 0)}}, e.now())
	require.NoError(t, err)
	require.True(t, res[0].Fired)
	require.True(t, res[0].Deduped)
	require.Nil(t, res[0].Job)
	tr, _ := e.s.ListTriggers(e.ctx, &engine.ListTriggersParams{})
	require.Equal(t, "deduped", tr[0].LastResult)
	requireTime(t, due.Add(time.Minute), *tr[0].NextFireAt)
}

// Within the window after a job with the key, no second one starts, even
// when the first has finished.
func testDedupeWindow(t *testing.T, e *env) {
	j, err := e.s.EnqueueJob(e.ctx, e.triggerJob("w", 5*time.Minute))
	require.NoError(t, err)
	_, err = e.s.SetJobState(e.ctx, &engine.SetJobStateParams{JobID: j.ID, From: engine.JobControls["cancel"].From,
		To: engine.JobCanceled, Now: e.now()})
	require.NoError(t, err)
	e.advance(4*time.Minute + 59*time.Second)
	_, err = e.s.EnqueueJob(e.ctx, e.triggerJob("w", 5*time.Minute))
	require.True(t, engine.IsDuplicate(err), "within the window")
	due := e.now()
	e.scheduleTrigger("win", due)
	res, err := e.s.FireTriggers(e.ctx, []engine.Fire{{Trigger: "win", Due: due, Next: due.Add(time.Minute),
		Job: e.triggerJob("w", 5*time.Minute)}}, e.now())
	require.NoError(t, err)
	require.True(t, res[0].Fired)
	require.True(t, res[0].Deduped, "a fire within the window of a finished job is deduped")
	require.Nil(t, res[0].Job)
	e.advance(2 * time.Second)
	_, err = e.s.EnqueueJob(e.ctx, e.triggerJob("w", 5*time.Minute))
	require.NoError(t, err, "after the window")
}

// A fire given Build instead of Job is built only when it will enqueue:
// never when its key is held or its tick already handled; a Build error
// counts the fire as skipped. Many deduped fires in one batch each move
// their own trigger, whatever their due times.
func testFireBuildsLazily(t *testing.T, e *env) {
	due := e.now()
	held, err := e.s.EnqueueJob(e.ctx, e.triggerJob("trigger:held", 0))
	require.NoError(t, err)
	builds := map[string]int{}
	fire := func(name, key string, due time.Time, fail bool) engine.Fire {
		return engine.Fire{Trigger: name, Due: due, Next: due.Add(time.Minute), DedupeKey: key,
			Build: func() (*engine.EnqueueJobParams, error) {
				builds[name]++
				if fail {
					return nil, engine.FieldErrorf("payload", "cannot render")
				}
				return e.triggerJob(key, 0), nil
			}}
	}
	var fires []engine.Fire
	for i := range 5 {
		name := fmt.Sprintf("held%d", i)
		d := due.Add(-time.Duration(i) * time.Second)
		e.scheduleTrigger(name, d)
		fires = append(fires, fire(name, "trigger:held", d, false))
	}
	e.scheduleTrigger("free", due)
	e.scheduleTrigger("broken", due)
	e.scheduleTrigger("stale", due.Add(time.Hour))
	fires = append(fires, fire("free", "trigger:free", due, false), fire("broken", "trigger:broken", due, true),
		fire("stale", "trigger:stale", due, false))
	res, err := e.s.FireTriggers(e.ctx, fires, e.now())
	require.NoError(t, err)
	for i := range 5 {
		require.True(t, res[i].Fired, "held%d", i)
		require.True(t, res[i].Deduped, "held%d", i)
		require.Nil(t, res[i].Job)
	}
	require.True(t, res[5].Fired)
	require.NotNil(t, res[5].Job, "the free key's job is built and enqueued")
	require.True(t, res[6].Fired, "a fire whose job cannot be built still counts")
	require.Nil(t, res[6].Job)
	require.Error(t, res[6].Err)
	require.False(t, res[7].Fired, "a due already handled")
	require.False(t, res[7].Deduped)
	require.Equal(t, map[string]int{"free": 1, "broken": 1}, builds, "held keys and handled ticks build nothing")
	ts, err := e.s.ListTriggers(e.ctx, &engine.ListTriggersParams{})
	require.NoError(t, err)
	byName := map[string]*engine.Trigger{}
	for _, tr := range ts {
		byName[tr.Name] = tr
	}
	for i := range 5 {
		tr := byName[fmt.Sprintf("held%d", i)]
		require.Equal(t, "deduped", tr.LastResult)
		requireTime(t, due.Add(-time.Duration(i)*time.Second+time.Minute), *tr.NextFireAt)
	}
	require.Equal(t, "job", byName["free"].LastResult)
	require.Equal(t, res[5].Job.ID, byName["free"].LastJobID)
	require.Equal(t, "skipped", byName["broken"].LastResult)
	requireTime(t, due.Add(time.Minute), *byName["broken"].NextFireAt)
	requireTime(t, due.Add(time.Hour), *byName["stale"].NextFireAt)
	require.NotEqual(t, held.ID, res[5].Job.ID)
}

func testLeadership(t *testing.T, e *env) {
	p := func(holder string) *engine.LeadershipParams {
		return &engine.LeadershipParams{Name: engine.SchedulerLease, Holder: holder, For: 15 * time.Second, Now: e.now()}
	}
	ok, err := e.s.AcquireLeadership(e.ctx, p("a"))
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = e.s.AcquireLeadership(e.ctx, p("b"))
	require.NoError(t, err)
	require.False(t, ok, "held by a")
	e.advance(10 * time.Second)
	ok, _ = e.s.AcquireLeadership(e.ctx, p("a"))
	require.True(t, ok, "a renews")
	e.advance(14 * time.Second)
	ok, _ = e.s.AcquireLeadership(e.ctx, p("b"))
	require.False(t, ok, "the renewal counts from its own time")
	e.advance(2 * time.Second)
	ok, _ = e.s.AcquireLeadership(e.ctx, p("b"))
	require.True(t, ok, "a's lease expired")
	require.NoError(t, e.s.ReleaseLeadership(e.ctx, p("a")), "releasing what one does not hold is a no-op")
	ok, _ = e.s.AcquireLeadership(e.ctx, p("a"))
	require.False(t, ok)
	require.NoError(t, e.s.ReleaseLeadership(e.ctx, p("b")))
	ok, _ = e.s.AcquireLeadership(e.ctx, p("a"))
	require.True(t, ok, "released")
}

// The items of a worker that stopped beating get their leases ended; a
// live worker's are kept.
func testWorkersReclaim(t *testing.T, e *env) {
	t0 := e.now()
	dead := &engine.Worker{ID: "h:1:dead", Host: "h", PID: 1, Version: "v1", StartedAt: t0}
	live := &engine.Worker{ID: "h:2:live", Host: "h", PID: 2, Version: "v1", StartedAt: t0, Running: 3}
	require.NoError(t, e.s.HeartbeatWorker(e.ctx, dead, t0))
	require.NoError(t, e.s.HeartbeatWorker(e.ctx, live, t0))
	j := e.createJob()
	require.NoError(t, e.s.InsertItems(e.ctx, &engine.InsertItemsParams{JobID: j.ID, Items: rows(1, 4), Now: t0}))
	_, err := e.s.FinishIngest(e.ctx, &engine.FinishIngestParams{JobID: j.ID, Now: t0})
	require.NoError(t, err)
	claim := func(w string, n int) []*engine.Item {
		its, err := e.s.ClaimItems(e.ctx, &engine.ClaimItemsParams{WorkerID: w, Limit: n, LeaseFor: time.Hour, Now: e.now()})
		require.NoError(t, err)
		require.Len(t, its, n)
		return its
	}
	claim(dead.ID, 2)
	claim(live.ID, 2)
	t1 := e.advance(20 * time.Second)
	require.NoError(t, e.s.HeartbeatWorker(e.ctx, live, t1))
	ws, err := e.s.ListWorkers(e.ctx)
	require.NoError(t, err)
	require.Len(t, ws, 2)
	require.Equal(t, dead.ID, ws[0].ID)
	requireTime(t, t0, ws[0].LastSeen)
	requireTime(t, t1, ws[1].LastSeen)
	require.Equal(t, 3, ws[1].Running)

	n, err := e.s.ReclaimDeadWorkers(e.ctx, &engine.ReclaimParams{StaleBefore: t1.Add(-15 * time.Second), Now: t1})
	require.NoError(t, err)
	require.Equal(t, 2, n, "the dead worker's two leases end now")
	back, err := e.s.ReapExpiredLeases(e.ctx, &engine.ReapParams{Now: t1, Limit: 100})
	require.NoError(t, err)
	require.Equal(t, 2, back, "the reaper gives them back at once, not in an hour")
	n, err = e.s.ReclaimDeadWorkers(e.ctx, &engine.ReclaimParams{StaleBefore: t1.Add(-15 * time.Second),
		ForgetBefore: t1.Add(-10 * time.Second), Now: t1})
	require.NoError(t, err)
	require.Zero(t, n)
	ws, _ = e.s.ListWorkers(e.ctx)
	require.Len(t, ws, 1, "a worker unseen since ForgetBefore is removed")
	require.NoError(t, e.s.RemoveWorker(e.ctx, live.ID))
	ws, _ = e.s.ListWorkers(e.ctx)
	require.Empty(t, ws)
}
