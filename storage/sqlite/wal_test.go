package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/stretchr/testify/require"
)

// TestWALStaysBoundedDuringLongIngest: while ~100 MB of rows are inserted
// in back-to-back transactions, the WAL never grows past the journal size
// limit (the checkpointer and the writer's autocheckpoint keep restarting
// it), although the database grows well past that.
func TestWALStaysBoundedDuringLongIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("writes ~100 MB; not in -short")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "wal.db")
	s, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	now := time.Now()
	job, err := s.CreateJob(ctx, &engine.CreateJobParams{UserID: 1, Pipeline: "noop", Now: now})
	require.NoError(t, err)
	const rows, batch = 400_000, 5000
	var maxWAL int64
	items := make([]engine.NewItem, 0, batch)
	for i := 1; i <= rows; i++ {
		row := fmt.Sprintf(`{"sku":"SKU-%08d","title":"Product title number %d","description":"A plain description, with a comma, of item %d"}`, i, i, i)
		items = append(items, engine.NewItem{Seq: int64(i), Input: []byte(row), Normalized: []byte(row)})
		if len(items) == batch {
			require.NoError(t, s.InsertItems(ctx, &engine.InsertItemsParams{JobID: job.ID, Items: items, Now: now}))
			items = items[:0]
			if st, err := os.Stat(path + "-wal"); err == nil {
				maxWAL = max(maxWAL, st.Size())
			}
		}
	}
	db, err := os.Stat(path)
	require.NoError(t, err)
	t.Logf("database %d MB, largest WAL seen %d MB", db.Size()>>20, maxWAL>>20)
	require.Greater(t, db.Size(), int64(64<<20), "the ingest wrote more than the WAL limit")
	require.Less(t, maxWAL, int64(64<<20), "the WAL stayed under journal_size_limit")
}
