package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/storage/postgres"
	"github.com/sluicehq/sluice/storage/postgres/pgtest"
)

// TestOpenRefusesNewerSchema: a database migrated by a newer sluice is
// refused with ECONFLICT, as on SQLite.
func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	c, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer c.Close(ctx)
	_, err = c.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema, "goose_db_version"}.Sanitize()+` (version_id, is_applied) VALUES (999, true)`)
	require.NoError(t, err)
	_, err = postgres.Open(ctx, url, postgres.Options{Schema: schema})
	require.Error(t, err)
	require.Equal(t, engine.ECONFLICT, engine.ErrorCode(err))
	require.Contains(t, err.Error(), "version 999")
}

// TestReopenKeepsData: a second store on the same schema sees the first's
// rows and does not migrate again.
func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
	require.NoError(t, err)
	_, err = s.PutPipeline(ctx, &engine.PutPipelineParams{Pipeline: &engine.Pipeline{Name: "p", Stages: []engine.Stage{{Processor: "noop"}}}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "closing twice is safe")
	s2, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
	require.NoError(t, err)
	defer s2.Close()
	p, err := s2.GetPipeline(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, 1, p.Version)
}

// waitListening waits until the store's LISTEN connection is up.
func waitListening(t *testing.T, s *postgres.Store) {
	t.Helper()
	require.Eventually(t, s.Listening, 10*time.Second, 5*time.Millisecond, "the LISTEN connection comes up")
}

// TestEnqueueWakesAnotherStore: work enqueued through one store (one
// process) wakes the notifier subscribed on another, and moves its change
// counter; a write that adds no work moves the counter without a wake-up.
func TestEnqueueWakesAnotherStore(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t)
	ctx := context.Background()
	producer, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
	require.NoError(t, err)
	defer producer.Close()
	consumer, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
	require.NoError(t, err)
	defer consumer.Close()
	n := engine.NewNotifier()
	consumer.WakeOn(n)
	wake, unsub := n.Subscribe()
	defer unsub()
	waitListening(t, consumer)
	// The (re)connect itself wakes once: that is the start-up scan.
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up after the listener connected")
	}
	before, err := consumer.ChangeCounter(ctx)
	require.NoError(t, err)

	_, err = producer.EnqueueJob(ctx, &engine.EnqueueJobParams{
		Job:   engine.CreateJobParams{UserID: 1, Pipeline: "noop", Now: time.Now()},
		Items: []engine.NewItem{{Seq: 1, Input: []byte(`{"a":1}`)}},
	})
	require.NoError(t, err)
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("enqueue in another store did not wake this one")
	}
	after, err := consumer.ChangeCounter(ctx)
	require.NoError(t, err)
	require.Greater(t, after, before)

	// A claim changes what people see but adds no work.
	items, err := producer.ClaimItems(ctx, &engine.ClaimItemsParams{WorkerID: "w", Limit: 10, LeaseFor: time.Minute, Now: time.Now()})
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Eventually(t, func() bool {
		v, _ := consumer.ChangeCounter(ctx)
		return v > after
	}, 5*time.Second, 5*time.Millisecond, "the claim moves the change counter")
	select {
	case <-wake:
		t.Fatal("a claim woke the workers")
	case <-time.After(100 * time.Millisecond):
	}
}

// TestListenerReconnects: when the server ends the LISTEN connection, the
// store connects again, and the reconnect wakes the workers (notifications
// sent meanwhile were lost: they must look).
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := context.Background()
	s := pgtest.Open(t, postgres.Options{})
	n := engine.NewNotifier()
	s.WakeOn(n)
	wake, unsub := n.Subscribe()
	defer unsub()
	waitListening(t, s)
	<-wake
	c, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer c.Close(ctx)
	var killed int
	require.NoError(t, c.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query LIKE 'LISTEN %' AND query LIKE '%'||$1||'%'`, s.Schema()).Scan(&killed))
	require.Equal(t, 1, killed, "the LISTEN connection was found and ended")
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up after the listener reconnected")
	}
	waitListening(t, s)
}

// TestLeaderIsExclusive: of two stores (two processes) one leads a duty;
// when it resigns the other takes over; duties are independent.
func TestLeaderIsExclusive(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t)
	ctx := context.Background()
	a, err := postgres.Open(ctx, url, postgres.Options{Schema: schema, NoListen: true})
	require.NoError(t, err)
	defer a.Close()
	b, err := postgres.Open(ctx, url, postgres.Options{Schema: schema, NoListen: true})
	require.NoError(t, err)
	defer b.Close()

	la, lb := a.Leader("reaper"), b.Leader("reaper")
	ok, err := la.TryLead(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = la.TryLead(ctx)
	require.NoError(t, err)
	require.True(t, ok, "a leader stays leader")
	ok, err = lb.TryLead(ctx)
	require.NoError(t, err)
	require.False(t, ok, "only one leads")
	ok, err = b.Leader("scheduler").TryLead(ctx)
	require.NoError(t, err)
	require.True(t, ok, "another duty has its own election")

	require.NoError(t, la.Resign(ctx))
	require.NoError(t, la.Resign(ctx), "resigning twice is safe")
	ok, err = lb.TryLead(ctx)
	require.NoError(t, err)
	require.True(t, ok, "the other takes over")
	ok, err = la.TryLead(ctx)
	require.NoError(t, err)
	require.False(t, ok)
}
