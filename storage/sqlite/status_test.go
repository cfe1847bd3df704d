package sqlite

import (
	"context"
	"io/fs"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// TestStatusCodesMigration: migration 00012 turns stored status names into
// codes and back (its Down), keeping every row, what the store reads of
// it, and the id high-water mark, also past deleted items.
func TestStatusCodesMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := open(t)
	// One item in each status: 6 rows, claimed and completed through the
	// store; then a second job, deleted, so the sequence is past max(id).
	job := fillJob(t, s, 6)
	now := time.Now()
	claimed, err := s.ClaimItems(ctx, &engine.ClaimItemsParams{WorkerID: "w", Limit: 4, LeaseFor: time.Minute, Now: now})
	require.NoError(t, err)
	require.Len(t, claimed, 4)
	var outs []engine.Outcome
	for i, st := range []engine.ItemStatus{engine.ItemDone, engine.ItemError, engine.ItemNotFound} {
		outs = append(outs, engine.Outcome{ItemID: claimed[i].ID, JobID: job, Attempt: claimed[i].Attempts, Status: st, StartedAt: now})
	}
	res, err := s.CompleteItems(ctx, &engine.CompleteItemsParams{WorkerID: "w", Outcomes: outs, Now: now})
	require.NoError(t, err)
	require.Equal(t, 3, res.Applied)
	_, err = s.w.ExecContext(ctx, `UPDATE job_items SET status = 5 WHERE id = (SELECT max(id) FROM job_items)`)
	require.NoError(t, err)
	gone := fillJob(t, s, 3)
	_, err = s.DeleteJob(ctx, gone)
	require.NoError(t, err)

	before := listAll(t, s, job)
	var statuses []engine.ItemStatus
	for _, it := range before {
		statuses = append(statuses, it.Status)
	}
	require.ElementsMatch(t, []engine.ItemStatus{engine.ItemDone, engine.ItemError, engine.ItemNotFound,
		engine.ItemProcessing, engine.ItemPending, engine.ItemSkipped}, statuses)
	highWater := sequence(t, s)
	require.Greater(t, highWater, before[len(before)-1].ID, "the deleted job's ids are past the last item")

	// Down to 00011: the names are back in the rows.
	sub, err := fs.Sub(migrations, "migrations")
	require.NoError(t, err)
	p, err := goose.NewProvider(goose.DialectSQLite3, s.w, sub, goose.WithDisableGlobalRegistry(true))
	require.NoError(t, err)
	_, err = p.DownTo(ctx, 11)
	require.NoError(t, err)
	for _, it := range before {
		var name string
		require.NoError(t, s.w.QueryRowContext(ctx, `SELECT status FROM job_items WHERE id = ?`, it.ID).Scan(&name))
		require.Equal(t, string(it.Status), name, "item %d", it.ID)
	}
	require.Equal(t, highWater, sequence(t, s))
	require.NoError(t, s.Close())

	// Up again on open: the store reads the same items, and a new item
	// takes an id past the high-water mark.
	s, err = Open(ctx, path, Options{})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, before, listAll(t, s, job))
	require.Equal(t, highWater, sequence(t, s))
	next := fillJob(t, s, 1)
	require.Greater(t, listAll(t, s, next)[0].ID, highWater, "ids are never reused")
}

// TestStatusCodes: every item status has a code and back; a stored code
// this binary does not know is an error, not a blank status.
func TestStatusCodes(t *testing.T) {
	t.Parallel()
	for _, st := range []engine.ItemStatus{engine.ItemPending, engine.ItemProcessing, engine.ItemDone,
		engine.ItemError, engine.ItemNotFound, engine.ItemSkipped} {
		code := statusCode(st)
		require.GreaterOrEqual(t, code, int64(0), st)
		name, err := statusName(code)
		require.NoError(t, err)
		require.Equal(t, st, name)
	}
	require.Equal(t, int64(-1), statusCode("BOGUS"))
	var st engine.ItemStatus
	require.ErrorContains(t, statusCol{&st}.Scan(int64(9)), "not known")
	require.Error(t, statusCol{&st}.Scan("DONE"))
}

func listAll(t *testing.T, s *Store, job int64) []*engine.Item {
	t.Helper()
	var out []*engine.Item
	require.NoError(t, s.ScanItems(context.Background(), &engine.ScanItemsParams{JobID: job}, func(it *engine.Item) error {
		out = append(out, it)
		return nil
	}))
	return out
}

func sequence(t *testing.T, s *Store) int64 {
	t.Helper()
	var seq int64
	require.NoError(t, s.w.QueryRow(`SELECT seq FROM sqlite_sequence WHERE name = 'job_items'`).Scan(&seq))
	return seq
}
