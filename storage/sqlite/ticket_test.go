package sqlite

import (
	"context"
	"encoding/binary"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// TestTicketClock: tickets rise strictly, also when asked for faster than
// the clock's microseconds go, and stay above a seed from the future.
func TestTicketClock(t *testing.T) {
	t.Parallel()
	var c ticketClock
	prev := c.next()
	require.InDelta(t, time.Now().UnixMicro(), prev, float64(time.Minute.Microseconds()))
	for range 10000 {
		n := c.next()
		require.Greater(t, n, prev)
		prev = n
	}
	future := time.Now().Add(time.Hour).UnixMicro()
	c.seed(future)
	require.Equal(t, future+1, c.next())
	require.Equal(t, future+2, c.next())
	c.seed(5) // a seed below the last ticket changes nothing
	require.Equal(t, future+3, c.next())
}

// TestClaimLineAfterClockSetBack: a job claimed before the clock was set
// back (its ticket is in the future) is not kept waiting behind the claims
// made after a restart: the reopened store's tickets start above it, so
// two jobs still take turns.
func TestClaimLineAfterClockSetBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := open(t)
	enqueue := func() int64 {
		var items []engine.NewItem
		for i := 1; i <= 4; i++ {
			items = append(items, engine.NewItem{Seq: int64(i), Input: []byte(`{}`), Normalized: []byte(`{}`)})
		}
		j, err := s.EnqueueJob(ctx, &engine.EnqueueJobParams{Job: engine.CreateJobParams{UserID: 1, Pipeline: "noop", Now: time.Now()}, Items: items})
		require.NoError(t, err)
		return j.ID
	}
	a, b := enqueue(), enqueue()
	future := time.Now().Add(time.Hour).UnixMicro()
	_, err := s.w.ExecContext(ctx, `UPDATE jobs SET claim_ticket = ? WHERE id = ?`, future, a)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s, err = Open(ctx, path, Options{})
	require.NoError(t, err)
	defer s.Close()
	claimOne := func() int64 {
		items, err := s.ClaimItems(ctx, &engine.ClaimItemsParams{WorkerID: "w", Limit: 1, MaxJobs: 1, LeaseFor: time.Minute, Now: time.Now()})
		require.NoError(t, err)
		require.Len(t, items, 1)
		return items[0].JobID
	}
	require.Equal(t, []int64{b, a, b, a}, []int64{claimOne(), claimOne(), claimOne(), claimOne()})
}

// TestEnqueueClaimedPages: a one-item enqueue claimed in its transaction
// changes one page of each B-tree it must (the job, its two indexes that
// hold it, the item, its per-job index, the AUTOINCREMENT counters) and no
// other: every page a commit changes is one more page it writes to the WAL
// and syncs, on the path of an idle worker's pickup.
func TestEnqueueClaimedPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := open(t)
	enqueue := func() { enqueueOneClaimed(t, s) }
	// Enough jobs that the indexes span several pages.
	for range 300 {
		enqueue()
	}
	// Empty the WAL. The store's background checkpointer may hold the
	// checkpoint at that moment (the result says busy): try again.
	require.Eventually(t, func() bool {
		var busy, frames, done int
		err := s.w.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done)
		require.NoError(t, err)
		return busy == 0 && frames == 0
	}, 10*time.Second, 10*time.Millisecond)
	enqueue()

	wal, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	const frameHeader, pageSize = 24, 4096
	var pages []uint32
	for off := 32; off+frameHeader+pageSize <= len(wal); off += frameHeader + pageSize {
		pages = append(pages, binary.BigEndian.Uint32(wal[off:]))
	}
	owner := map[uint32]string{}
	rows, err := s.w.QueryContext(ctx, `SELECT name, pageno FROM dbstat`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		var page uint32
		require.NoError(t, rows.Scan(&name, &page))
		owner[page] = name
	}
	require.NoError(t, rows.Err())
	var trees []string
	for _, p := range pages {
		trees = append(trees, owner[p])
	}
	require.ElementsMatch(t, []string{"jobs", "jobs_user_created", "jobs_runnable", "sqlite_sequence",
		"job_items", "job_items_job_status_updated"}, trees, "pages %v", pages)
}

// enqueueOneClaimed enqueues a one-item job with its item claimed by
// worker "w".
func enqueueOneClaimed(t *testing.T, s *Store) {
	t.Helper()
	_, it, err := s.EnqueueJobClaimed(context.Background(), &engine.EnqueueJobParams{
		Job:   engine.CreateJobParams{UserID: 1, Pipeline: "noop", Now: time.Now()},
		Items: []engine.NewItem{{Seq: 1, Input: []byte(`{"t":"1"}`), Normalized: []byte(`{"t":"1"}`)}},
	}, &engine.EnqueueClaim{WorkerID: "w", LeaseFor: time.Minute})
	require.NoError(t, err)
	require.NotNil(t, it)
}
