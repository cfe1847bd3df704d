package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/stretchr/testify/require"
)

// fillJob creates a QUEUED job of n items with 6-field rows.
func fillJob(tb testing.TB, s *Store, n int) int64 {
	tb.Helper()
	ctx := context.Background()
	now := time.Now()
	job, err := s.CreateJob(ctx, &engine.CreateJobParams{UserID: 1, Pipeline: "noop", Now: now})
	require.NoError(tb, err)
	batch := make([]engine.NewItem, 0, 5000)
	for i := 1; i <= n; i++ {
		row := fmt.Sprintf(`{"sku":"SKU-%08d","title":"Product title number %d","brand":"Brand %d","price":"%d.99","quantity":"%d","description":"A plain description, with a comma, of item %d"}`, i, i, i%500, i%1000, i%10000, i)
		batch = append(batch, engine.NewItem{Seq: int64(i), Input: []byte(row), Normalized: []byte(row), Status: engine.ItemPending})
		if len(batch) == cap(batch) || i == n {
			require.NoError(tb, s.InsertItems(ctx, &engine.InsertItemsParams{JobID: job.ID, Items: batch, Now: now}))
			batch = batch[:0]
		}
	}
	_, err = s.FinishIngest(ctx, &engine.FinishIngestParams{JobID: job.ID, Now: now})
	require.NoError(tb, err)
	return job.ID
}

// BenchmarkClaimComplete measures the store's side of the worker loop: one
// claim transaction of 1,000 items, then one transaction completing them
// DONE with their result and an attempt record. Reported per item.
func BenchmarkClaimComplete(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "b.db"), Options{})
	require.NoError(b, err)
	defer s.Close()
	const batch = 1000
	fillJob(b, s, b.N+batch)
	ctx := context.Background()
	cpu0 := processCPU(b)
	light0, durable0 := s.WriteBusy()
	b.ResetTimer()
	for done := 0; done < b.N; {
		now := time.Now()
		items, err := s.ClaimItems(ctx, &engine.ClaimItemsParams{WorkerID: "w", Limit: min(batch, b.N-done), LeaseFor: time.Minute, Now: now})
		require.NoError(b, err)
		out := make([]engine.Outcome, len(items))
		for i, it := range items {
			out[i] = engine.Outcome{ItemID: it.ID, JobID: it.JobID, Attempt: it.Attempts, Status: engine.ItemDone, Result: it.Normalized, StartedAt: now}
		}
		res, err := s.CompleteItems(ctx, &engine.CompleteItemsParams{WorkerID: "w", Outcomes: out, Now: time.Now()})
		require.NoError(b, err)
		require.Equal(b, len(items), res.Applied)
		done += len(items)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
	// CPU time per item (this process: store, checkpointer, runtime) is
	// steadier than the rate while other work shares the machine.
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/item")
	// The write connection's busy time (transaction taken to commit
	// returned): claims, then completions.
	light, durable := s.WriteBusy()
	b.ReportMetric(float64((light-light0).Microseconds())/float64(b.N), "claim-µs/item")
	b.ReportMetric(float64((durable-durable0).Microseconds())/float64(b.N), "complete-µs/item")
}

// processCPU is this process's user+system CPU time.
func processCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	require.NoError(tb, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkKeysetPage measures a 100-item page at a random depth of a
// 200,000-item job (the target's job is 1,000,000: `sluice bench` runs it).
func BenchmarkKeysetPage(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "b.db"), Options{})
	require.NoError(b, err)
	defer s.Close()
	job := fillJob(b, s, 200000)
	ctx := context.Background()
	var cursors []*engine.Cursor
	var cur *engine.Cursor
	for {
		p, err := s.ListItems(ctx, &engine.ListItemsParams{JobID: job, After: cur, Limit: 5000})
		require.NoError(b, err)
		if p.Next == nil {
			break
		}
		cursors = append(cursors, p.Next)
		cur = p.Next
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p, err := s.ListItems(ctx, &engine.ListItemsParams{JobID: job, After: cursors[(i*7919)%len(cursors)], Limit: 100})
		require.NoError(b, err)
		require.Len(b, p.Items, 100)
	}
}

// BenchmarkEnqueueOne measures a one-item job enqueued in one durable
// transaction (the in-process pickup latency starts with it).
func BenchmarkEnqueueOne(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "b.db"), Options{})
	require.NoError(b, err)
	defer s.Close()
	ctx := context.Background()
	for b.Loop() {
		_, err := s.EnqueueJob(ctx, &engine.EnqueueJobParams{
			Job:   engine.CreateJobParams{UserID: 1, Pipeline: "noop", Now: time.Now()},
			Items: []engine.NewItem{{Seq: 1, Input: []byte(`{"t":"1"}`), Normalized: []byte(`{"t":"1"}`)}},
		})
		require.NoError(b, err)
	}
}

// BenchmarkEnqueueClaimOne measures the store's share of an idle worker's
// pickup: a one-item job enqueued (durable), then claimed (the claim
// transaction skips the fsync), then completed. Reported per step.
func BenchmarkEnqueueClaimOne(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "b.db"), Options{})
	require.NoError(b, err)
	defer s.Close()
	ctx := context.Background()
	var enq, claim time.Duration
	cpu0 := processCPU(b)
	for b.Loop() {
		t0 := time.Now()
		_, err := s.EnqueueJob(ctx, &engine.EnqueueJobParams{
			Job:   engine.CreateJobParams{UserID: 1, Pipeline: "noop", Now: t0},
			Items: []engine.NewItem{{Seq: 1, Input: []byte(`{"t":"1"}`), Normalized: []byte(`{"t":"1"}`)}},
		})
		require.NoError(b, err)
		t1 := time.Now()
		items, err := s.ClaimItems(ctx, &engine.ClaimItemsParams{WorkerID: "w", Limit: 8, LeaseFor: time.Minute, Now: t1})
		require.NoError(b, err)
		require.Len(b, items, 1)
		t2 := time.Now()
		enq, claim = enq+t1.Sub(t0), claim+t2.Sub(t1)
		it := items[0]
		_, err = s.CompleteItems(ctx, &engine.CompleteItemsParams{WorkerID: "w", Now: t2,
			Outcomes: []engine.Outcome{{ItemID: it.ID, JobID: it.JobID, Attempt: it.Attempts, Status: engine.ItemDone, Result: it.Normalized, StartedAt: t2}}})
		require.NoError(b, err)
	}
	b.ReportMetric(float64(enq.Microseconds())/float64(b.N), "enqueue-µs")
	b.ReportMetric(float64(claim.Microseconds())/float64(b.N), "claim-µs")
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkItemMarks measures the position index of a job's items, every
// 1,000th key of an index-only walk (SLUICE_BENCH_ROWS rows, 200,000 by
// default; the grid's target job is 1,000,000). Reported per item.
func BenchmarkItemMarks(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "b.db"), Options{})
	require.NoError(b, err)
	defer s.Close()
	rows := 200000
	if v, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_ROWS")); err == nil && v > 0 {
		rows = v
	}
	job := fillJob(b, s, rows)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		m, err := s.ItemMarks(ctx, &engine.ItemMarksParams{JobID: job, Every: 1000})
		require.NoError(b, err)
		require.Equal(b, int64(rows), m.Total)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows), "ns/item")
}

// BenchmarkInsertItems measures the ingest's store side: batches of 20,000
// 6-field rows (the ingest benchmark's shape) appended to one INGESTING
// job. Reported per row; "lean" rows have their normalised form equal to
// their input, "full" ones do not (each is bound with five values).
func BenchmarkInsertItems(b *testing.B) {
	for _, shape := range []string{"lean", "full"} {
		b.Run(shape, func(b *testing.B) {
			s, err := Open(context.Background(), filepath.Join(b.TempDir(), "b.db"), Options{})
			require.NoError(b, err)
			defer s.Close()
			ctx := context.Background()
			now := time.Now()
			job, err := s.CreateJob(ctx, &engine.CreateJobParams{UserID: 1, Pipeline: "noop", Now: now})
			require.NoError(b, err)
			const batchRows = 20000
			batch := make([]engine.NewItem, batchRows)
			var seq int64
			cpu0 := cpuTime()
			for b.Loop() {
				for i := range batch {
					seq++
					row := fmt.Appendf(nil, `{"sku":"SKU-%08d","title":"Product title number %d","brand":"Brand %d","price":"%d.99","quantity":"%d","description":"A plain description, with a comma, of item %d"}`, seq, seq, seq%500, seq%1000, seq%10000, seq)
					norm := row
					if shape == "full" {
						norm = bytes.Replace(row, []byte(`"sku"`), []byte(`"Sku"`), 1)
					}
					batch[i] = engine.NewItem{Seq: seq, Input: row, Normalized: norm, Status: engine.ItemPending}
				}
				require.NoError(b, s.InsertItems(ctx, &engine.InsertItemsParams{JobID: job.ID, Items: batch, Now: now}))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(seq), "ns/row")
			// CPU time is the steadier figure on a shared machine.
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(seq), "cpu-ns/row")
		})
	}
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
