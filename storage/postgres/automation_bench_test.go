package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/storage/postgres"
	"github.com/sluicehq/sluice/storage/postgres/pgtest"
)

// benchTriggers makes n "@every 1s" schedule triggers due at raceTime and
// returns the store and the default user's id.
func benchTriggers(b *testing.B, n int) (*postgres.Store, int64) {
	b.Helper()
	s := pgtest.Open(b, postgres.Options{NoListen: true})
	ctx := context.Background()
	u, err := s.DefaultUser(ctx)
	if err != nil {
		b.Fatal(err)
	}
	due := raceTime
	for i := range n {
		_, err := s.CreateTrigger(ctx, &engine.Trigger{Name: fmt.Sprintf("t%04d", i), Kind: engine.TriggerSchedule,
			Cron: "@every 1s", TZ: "UTC", Pipeline: engine.DefaultPipeline, Enabled: true, NextFireAt: &due}, due)
		if err != nil {
			b.Fatal(err)
		}
	}
	return s, u.ID
}

// fireAll fires every trigger's tick at due in transactions of 256 fires
// (the scheduler's batch), each with a job keyed by key(i) ("" for none),
// and returns how many fires created a job.
func fireAll(b *testing.B, s *postgres.Store, userID int64, n int, due time.Time, key func(i int) string) int {
	b.Helper()
	made := 0
	for from := 0; from < n; from += 256 {
		fires := make([]engine.Fire, 0, 256)
		for i := from; i < min(n, from+256); i++ {
			name := fmt.Sprintf("t%04d", i)
			fires = append(fires, engine.Fire{Trigger: name, Due: due, Next: due.Add(time.Second),
				Job: oneItemJob(userID, engine.SourceSchedule, "trigger:"+name, key(i))})
		}
		res, err := s.FireTriggers(context.Background(), fires, due)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if !r.Fired {
				b.Fatalf("fire of %s at %s not recorded", fires[0].Trigger, due)
			}
			if r.Job != nil {
				made++
			}
		}
	}
	return made
}

// BenchmarkFireTriggersDeduped is the scheduler's steady state of
// `sluice bench --only schedulercpu` on PostgreSQL: 1,000 triggers whose
// last jobs are still queued, so every fire is recorded and deduped. One
// op is one tick of all 1,000.
func BenchmarkFireTriggersDeduped(b *testing.B) {
	const n = 1000
	s, userID := benchTriggers(b, n)
	key := func(i int) string { return fmt.Sprintf("trigger:t%04d", i) }
	due := raceTime
	if made := fireAll(b, s, userID, n, due, key); made != n {
		b.Fatalf("the first tick made %d jobs, want %d", made, n)
	}
	b.ResetTimer()
	for b.Loop() {
		due = due.Add(time.Second)
		if made := fireAll(b, s, userID, n, due, key); made != 0 {
			b.Fatalf("%d fires not deduped", made)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "fires/s")
}

// BenchmarkFireTriggersJobs: every fire enqueues a one-item job (no
// dedupe key). One op is one tick of 256 triggers.
func BenchmarkFireTriggersJobs(b *testing.B) {
	const n = 256
	s, userID := benchTriggers(b, n)
	due := raceTime
	for b.Loop() {
		if made := fireAll(b, s, userID, n, due, func(int) string { return "" }); made != n {
			b.Fatalf("%d jobs, want %d", made, n)
		}
		due = due.Add(time.Second)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "fires/s")
}
