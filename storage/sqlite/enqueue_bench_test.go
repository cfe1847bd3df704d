package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// BenchmarkEnqueueClaimed measures the store's share of an idle worker's
// pickup with the direct hand-off: a one-item job enqueued with its item
// claimed in the same durable transaction, then completed. Compare with
// BenchmarkEnqueueClaimOne (enqueue, then a claim transaction).
func BenchmarkEnqueueClaimed(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "b.db"), Options{})
	require.NoError(b, err)
	defer s.Close()
	ctx := context.Background()
	var enq time.Duration
	cpu0 := processCPU(b)
	for b.Loop() {
		t0 := time.Now()
		_, it, err := s.EnqueueJobClaimed(ctx, &engine.EnqueueJobParams{
			Job:   engine.CreateJobParams{UserID: 1, Pipeline: "noop", Now: t0},
			Items: []engine.NewItem{{Seq: 1, Input: []byte(`{"t":"1"}`), Normalized: []byte(`{"t":"1"}`)}},
		}, &engine.EnqueueClaim{WorkerID: "w", LeaseFor: time.Minute})
		require.NoError(b, err)
		require.NotNil(b, it)
		t1 := time.Now()
		enq += t1.Sub(t0)
		_, err = s.CompleteItems(ctx, &engine.CompleteItemsParams{WorkerID: "w", Now: t1,
			Outcomes: []engine.Outcome{{ItemID: it.ID, JobID: it.JobID, Attempt: it.Attempts, Status: engine.ItemDone, Result: it.Normalized, StartedAt: t1}}})
		require.NoError(b, err)
	}
	b.ReportMetric(float64(enq.Microseconds())/float64(b.N), "enqueue-µs")
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkDurableFloor measures what a durable commit cannot go under on
// this disk: a 4 KiB write in place and fsync of a plain file beside the
// database (fsync-µs; fdatasync-µs with fdatasync, which skips the
// file's times), and the smallest FULL write transaction of the store (one
// row of one small table updated; commit-µs). A one-item enqueue is one
// such commit plus its statements.
func BenchmarkDurableFloor(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(context.Background(), filepath.Join(dir, "b.db"), Options{})
	require.NoError(b, err)
	defer s.Close()
	ctx := context.Background()
	_, err = s.w.ExecContext(ctx, `CREATE TABLE tick (id INTEGER PRIMARY KEY, v INTEGER); INSERT INTO tick VALUES (1, 0)`)
	require.NoError(b, err)
	f, err := os.Create(filepath.Join(dir, "plain"))
	require.NoError(b, err)
	defer f.Close()
	page := make([]byte, 4096)
	var fsync, fdatasync, commit time.Duration
	for b.Loop() {
		t0 := time.Now()
		_, err := f.WriteAt(page, 0)
		require.NoError(b, err)
		require.NoError(b, f.Sync())
		td := time.Now()
		_, err = f.WriteAt(page, 0)
		require.NoError(b, err)
		require.NoError(b, syscall.Fdatasync(int(f.Fd())))
		t1 := time.Now()
		fdatasync += t1.Sub(td)
		require.NoError(b, s.tx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE tick SET v = v + 1 WHERE id = 1`)
			return err
		}))
		fsync, commit = fsync+td.Sub(t0), commit+time.Since(t1)
	}
	b.ReportMetric(float64(fsync.Microseconds())/float64(b.N), "fsync-µs")
	b.ReportMetric(float64(fdatasync.Microseconds())/float64(b.N), "fdatasync-µs")
	b.ReportMetric(float64(commit.Microseconds())/float64(b.N), "commit-µs")
}

// BenchmarkEnqueuePlainVsDirect interleaves the two one-item enqueues in
// one process, so that both see the same moments of the disk: each
// iteration enqueues one job plainly (then claims and completes it) and
// one with its item claimed in the enqueue (then completes it), a few
// milliseconds apart. Reported: the median wall time of each enqueue.
func BenchmarkEnqueuePlainVsDirect(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "b.db"), Options{})
	require.NoError(b, err)
	defer s.Close()
	ctx := context.Background()
	params := func() *engine.EnqueueJobParams {
		return &engine.EnqueueJobParams{Job: engine.CreateJobParams{UserID: 1, Pipeline: "noop", Now: time.Now()},
			Items: []engine.NewItem{{Seq: 1, Input: []byte(`{"t":"1"}`), Normalized: []byte(`{"t":"1"}`)}}}
	}
	complete := func(it *engine.Item) {
		_, err := s.CompleteItems(ctx, &engine.CompleteItemsParams{WorkerID: "w", Now: time.Now(),
			Outcomes: []engine.Outcome{{ItemID: it.ID, JobID: it.JobID, Attempt: it.Attempts, Status: engine.ItemDone, Result: it.Normalized, StartedAt: time.Now()}}})
		require.NoError(b, err)
	}
	var plain, direct []time.Duration
	for b.Loop() {
		t0 := time.Now()
		_, err := s.EnqueueJob(ctx, params())
		require.NoError(b, err)
		plain = append(plain, time.Since(t0))
		items, err := s.ClaimItems(ctx, &engine.ClaimItemsParams{WorkerID: "w", Limit: 8, LeaseFor: time.Minute, Now: time.Now()})
		require.NoError(b, err)
		require.Len(b, items, 1)
		complete(items[0])
		time.Sleep(3 * time.Millisecond)

		t0 = time.Now()
		_, it, err := s.EnqueueJobClaimed(ctx, params(), &engine.EnqueueClaim{WorkerID: "w", LeaseFor: time.Minute})
		require.NoError(b, err)
		require.NotNil(b, it)
		direct = append(direct, time.Since(t0))
		complete(it)
		time.Sleep(3 * time.Millisecond)
	}
	slices.Sort(plain)
	slices.Sort(direct)
	b.ReportMetric(float64(plain[len(plain)/2].Microseconds()), "plain-p50-µs")
	b.ReportMetric(float64(direct[len(direct)/2].Microseconds()), "direct-p50-µs")
}
