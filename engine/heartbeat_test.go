package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// A worker that stopped beating has its items handed out again by another
// process's heartbeat, long before their one-hour leases would run out; the
// live process's own row is written, and removed when it stops.
func TestHeartbeatReclaimsDeadWorkersLeases(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	t0 := time.Now().Truncate(time.Millisecond)
	dead := &engine.Worker{ID: "old:1:gone", Host: "old", PID: 1, StartedAt: t0.Add(-time.Hour)}
	require.NoError(t, s.HeartbeatWorker(t.Context(), dead, t0.Add(-time.Minute)))
	job, err := s.EnqueueJob(t.Context(), &engine.EnqueueJobParams{
		Job:   engine.CreateJobParams{UserID: 1, Pipeline: engine.DefaultPipeline, MaxAttempts: 5, Now: t0},
		Items: []engine.NewItem{{Seq: 1, Input: json.RawMessage(`{"a":1}`), Status: engine.ItemPending}}})
	require.NoError(t, err)
	claimed, err := s.ClaimItems(t.Context(), &engine.ClaimItemsParams{WorkerID: dead.ID, Limit: 10, LeaseFor: time.Hour, Now: t0})
	require.NoError(t, err)
	require.Len(t, claimed, 1)

	ctx, cancel := context.WithCancel(t.Context())
	a := engine.NewAutomation(engine.AutomationConfig{Store: s, Notifier: engine.NewNotifier(), ID: "here:2:live", Version: "test",
		Beat: 20 * time.Millisecond, NoScheduler: true, Running: func() int { return 4 }})
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	require.Eventually(t, func() bool {
		it, err := s.GetItem(t.Context(), claimed[0].ID)
		require.NoError(t, err)
		return it.Status == engine.ItemPending
	}, 10*time.Second, 10*time.Millisecond, "the dead worker's item is PENDING again")
	j, err := s.GetJob(t.Context(), job.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), j.Counts.Pending)
	ws, err := s.ListWorkers(t.Context())
	require.NoError(t, err)
	var me *engine.Worker
	for _, w := range ws {
		if w.ID == "here:2:live" {
			me = w
		}
	}
	require.NotNil(t, me, "this process beats")
	require.Equal(t, 4, me.Running)
	require.Equal(t, "test", me.Version)
	cancel()
	<-done
	ws, err = s.ListWorkers(t.Context())
	require.NoError(t, err)
	for _, w := range ws {
		require.NotEqual(t, "here:2:live", w.ID, "a clean stop removes the row")
	}
}

// The runner publishes job.finished (and job.failed when items failed)
// and item.dead.
func TestRunnerPublishesEvents(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	putPipeline(t, s, noopPipeline("perm", `{"permanentEvery":2}`))
	events := engine.NewEvents()
	ch, unsub := events.Subscribe(64)
	defer unsub()
	g := newIngester(t, s, nil)
	j, err := g.Enqueue(t.Context(), engine.EnqueueRequest{Pipeline: "perm", Rows: []json.RawMessage{
		json.RawMessage(`{"a":1}`), json.RawMessage(`{"a":2}`)}})
	require.NoError(t, err)
	r, err := engine.NewRunner(engine.RunnerConfig{Store: s, Registry: testRegistry(), Drain: true, Events: events})
	require.NoError(t, err)
	_, err = r.Run(t.Context())
	require.NoError(t, err)
	got := map[string]engine.Event{}
	for len(ch) > 0 {
		ev := <-ch
		got[ev.Name] = ev
	}
	require.Contains(t, got, engine.EventItemDead)
	require.Contains(t, got, engine.EventJobFinished)
	require.Contains(t, got, engine.EventJobFailed)
	require.Equal(t, j.ID, got[engine.EventJobFinished].Data["jobId"])
	require.EqualValues(t, 1, got[engine.EventJobFailed].Data["failed"])
}
