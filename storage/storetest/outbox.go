package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// outboxTests cover the event outbox (engine.OutboxStore).
var outboxTests = []subtest{
	{"AppendPendingDone", testOutboxAppendPendingDone},
	{"FireMarksEventDone", testOutboxFireMarksDone},
}

// Events come back in append order with their context (numbers as
// written), until marked done; done events are pruned by age.
func testOutboxAppendPendingDone(t *testing.T, e *env) {
	at := e.now()
	err := e.s.AppendEvents(e.ctx, &engine.AppendEventsParams{Origin: "h:1:a", Now: at, Events: []engine.Event{
		{Name: engine.EventJobFinished, Subject: "job:41", At: at, Data: map[string]any{"jobId": 41, "name": "x"}},
		{Name: engine.EventItemDead, Subject: "item:7", At: at.Add(time.Millisecond)},
	}})
	require.NoError(t, err)
	require.NoError(t, e.s.AppendEvents(e.ctx, &engine.AppendEventsParams{Origin: "h:2:b", Now: at,
		Events: []engine.Event{{Name: engine.EventFileIngested, Subject: "source-object:3", At: at}}}))
	evs, err := e.s.PendingEvents(e.ctx, &engine.PendingEventsParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, evs, 3)
	require.Equal(t, []string{engine.EventJobFinished, engine.EventItemDead, engine.EventFileIngested},
		[]string{evs[0].Name, evs[1].Name, evs[2].Name}, "in append order")
	require.Less(t, evs[0].ID, evs[1].ID)
	require.Equal(t, "job:41", evs[0].Subject)
	require.Equal(t, "h:1:a", evs[0].Origin)
	requireTime(t, at, evs[0].At)
	require.Equal(t, json.Number("41"), evs[0].Data["jobId"], "a number reads back as written")
	require.Equal(t, "x", evs[0].Data["name"])
	require.Empty(t, evs[1].Data)
	first, err := e.s.PendingEvents(e.ctx, &engine.PendingEventsParams{Limit: 1})
	require.NoError(t, err)
	require.Len(t, first, 1)
	require.Equal(t, evs[0].ID, first[0].ID)

	done := e.advance(time.Second)
	require.NoError(t, e.s.MarkEventsDone(e.ctx, &engine.MarkEventsDoneParams{IDs: []int64{evs[0].ID, evs[2].ID}, Now: done}))
	left, err := e.s.PendingEvents(e.ctx, &engine.PendingEventsParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, evs[1].ID, left[0].ID)
	n, err := e.s.PruneEvents(e.ctx, &engine.PruneEventsParams{Before: done})
	require.NoError(t, err)
	require.Zero(t, n, "done at the cut: kept")
	n, err = e.s.PruneEvents(e.ctx, &engine.PruneEventsParams{Before: done.Add(time.Millisecond)})
	require.NoError(t, err)
	require.Equal(t, 2, n, "done events are pruned, the pending one stays")
	left, err = e.s.PendingEvents(e.ctx, &engine.PendingEventsParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, left, 1)
}

// A fire that names its outbox event marks it done in its transaction,
// also when the trigger is gone.
func testOutboxFireMarksDone(t *testing.T, e *env) {
	require.NoError(t, e.s.AppendEvents(e.ctx, &engine.AppendEventsParams{Now: e.now(), Events: []engine.Event{
		{Name: engine.EventJobFinished, Subject: "job:1", At: e.now()},
		{Name: engine.EventJobFinished, Subject: "job:2", At: e.now()},
		{Name: engine.EventJobFinished, Subject: "job:3", At: e.now()},
	}}))
	evs, err := e.s.PendingEvents(e.ctx, &engine.PendingEventsParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, evs, 3)
	_, err = e.s.CreateTrigger(e.ctx, &engine.Trigger{Name: "on-done", Kind: engine.TriggerEvent, Event: engine.EventJobFinished,
		Pipeline: engine.DefaultPipeline, Enabled: true}, e.now())
	require.NoError(t, err)
	res, err := e.s.FireTriggers(e.ctx, []engine.Fire{
		{Trigger: "on-done", Job: e.triggerJob("trigger:on-done:job:1", 0), EventID: evs[0].ID},
		{Trigger: "gone", Job: e.triggerJob("trigger:gone:job:2", 0), EventID: evs[1].ID},
	}, e.now())
	require.NoError(t, err)
	require.True(t, res[0].Fired)
	require.NotNil(t, res[0].Job)
	require.False(t, res[1].Fired)
	left, err := e.s.PendingEvents(e.ctx, &engine.PendingEventsParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, evs[2].ID, left[0].ID)
}
