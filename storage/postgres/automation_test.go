package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/storage/postgres"
	"github.com/sluicehq/sluice/storage/postgres/pgtest"
)

// raceTime is the fake time of the race tests.
var raceTime = time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)

// twoStores opens two stores on one fresh schema (two processes sharing a
// database) and returns them with the default user's id.
func twoStores(t *testing.T) (a, b *postgres.Store, userID int64) {
	t.Helper()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t)
	open := func() *postgres.Store {
		s, err := postgres.Open(context.Background(), url, postgres.Options{Schema: schema, MaxConns: 4, NoListen: true})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b = open(), open()
	u, err := a.DefaultUser(context.Background())
	require.NoError(t, err)
	return a, b, u.ID
}

// oneItemJob is a job of one item, with a dedupe key when key is set.
func oneItemJob(userID int64, source, ref, key string) *engine.EnqueueJobParams {
	return &engine.EnqueueJobParams{
		Job: engine.CreateJobParams{UserID: userID, Pipeline: engine.DefaultPipeline, Source: source, SourceRef: ref,
			DedupeKey: key, Now: raceTime},
		Items: []engine.NewItem{{Seq: 1, Input: []byte(`{"n":1}`), Status: engine.ItemPending}}}
}

// race runs fn n times at once, on the two stores in turn, and waits.
func race(n int, stores [2]*postgres.Store, fn func(i int, s *postgres.Store)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i, stores[i%2])
		}()
	}
	close(start)
	wg.Wait()
}

// Four schedulers in two processes fire the same due ticks of many
// triggers at once, each in its own order, without dedupe keys: only the
// compare-and-set on next_fire_at stands between them, and each tick
// fires once, with one job.
func TestFireTriggersConcurrentSchedulers(t *testing.T) {
	t.Parallel()
	a, b, userID := twoStores(t)
	ctx := context.Background()
	due := raceTime
	const triggers = 30
	for i := range triggers {
		_, err := a.CreateTrigger(ctx, &engine.Trigger{Name: fmt.Sprintf("t%02d", i), Kind: engine.TriggerSchedule,
			Cron: "@every 1m", TZ: "UTC", Pipeline: engine.DefaultPipeline, Enabled: true, NextFireAt: &due}, due)
		require.NoError(t, err)
	}
	const schedulers = 4
	fired := make([]int, schedulers)
	jobs := make([]map[string]int64, schedulers)
	errs := make([]error, schedulers)
	race(schedulers, [2]*postgres.Store{a, b}, func(i int, s *postgres.Store) {
		fires := make([]engine.Fire, triggers)
		for k := range fires {
			name := fmt.Sprintf("t%02d", k)
			fires[k] = engine.Fire{Trigger: name, Due: due, Next: due.Add(time.Minute),
				Job: oneItemJob(userID, engine.SourceSchedule, "trigger:"+name, "")}
		}
		rand.Shuffle(len(fires), func(x, y int) { fires[x], fires[y] = fires[y], fires[x] })
		res, err := s.FireTriggers(ctx, fires, due)
		errs[i] = err
		jobs[i] = map[string]int64{}
		for k, r := range res {
			if !r.Fired {
				continue
			}
			fired[i]++
			if r.Job == nil {
				errs[i] = fmt.Errorf("trigger %s fired without a job", fires[k].Trigger)
				continue
			}
			jobs[i][fires[k].Trigger] = r.Job.ID
		}
	})
	total := 0
	byTrigger := map[string]int64{}
	for i := range schedulers {
		require.NoError(t, errs[i], "scheduler %d", i)
		total += fired[i]
		for name, id := range jobs[i] {
			_, twice := byTrigger[name]
			require.False(t, twice, "trigger %s fired by two schedulers", name)
			byTrigger[name] = id
		}
	}
	require.Equal(t, triggers, total, "each tick fires once across all schedulers")
	list, err := a.ListJobs(ctx, &engine.ListJobsParams{Limit: 1000})
	require.NoError(t, err)
	require.Len(t, list, triggers, "one job per tick")
	trs, err := b.ListTriggers(ctx, &engine.ListTriggersParams{Kind: engine.TriggerSchedule})
	require.NoError(t, err)
	for _, tr := range trs {
		require.Equal(t, due.Add(time.Minute), tr.NextFireAt.UTC(), tr.Name)
		require.Equal(t, byTrigger[tr.Name], tr.LastJobID, "trigger %s records the job its fire made", tr.Name)
		require.Equal(t, "job", tr.LastResult)
	}
}

// Eight writers in two processes enqueue jobs with one dedupe key at
// once: the partial unique index lets exactly one through, and the others
// get ErrDuplicate, not a failed transaction.
func TestEnqueueDedupeConcurrent(t *testing.T) {
	t.Parallel()
	a, b, userID := twoStores(t)
	ctx := context.Background()
	const writers = 8
	errs := make([]error, writers)
	race(writers, [2]*postgres.Store{a, b}, func(i int, s *postgres.Store) {
		_, errs[i] = s.EnqueueJob(ctx, oneItemJob(userID, engine.SourceManual, "", "nightly"))
	})
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		require.True(t, engine.IsDuplicate(err), "%v", err)
	}
	require.Equal(t, 1, ok, "one writer holds the key")
	list, err := b.ListJobs(ctx, &engine.ListJobsParams{Limit: 100})
	require.NoError(t, err)
	require.Len(t, list, 1)
}

// Eight holders in two processes ask for the free scheduler lease at
// once: one gets it.
func TestLeadershipConcurrent(t *testing.T) {
	t.Parallel()
	a, b, _ := twoStores(t)
	ctx := context.Background()
	const holders = 8
	held := make([]bool, holders)
	errs := make([]error, holders)
	race(holders, [2]*postgres.Store{a, b}, func(i int, s *postgres.Store) {
		held[i], errs[i] = s.AcquireLeadership(ctx, &engine.LeadershipParams{Name: engine.SchedulerLease,
			Holder: fmt.Sprintf("h%d", i), For: 15 * time.Second, Now: raceTime})
	})
	n := 0
	for i := range holders {
		require.NoError(t, errs[i])
		if held[i] {
			n++
		}
	}
	require.Equal(t, 1, n, "one leader")
}
