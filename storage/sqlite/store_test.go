package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/stretchr/testify/require"
)

func open(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "sluice.db")
	s, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestOpenCreatesPrivateFiles(t *testing.T) {
	t.Parallel()
	_, path := open(t)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	dir, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), dir.Mode().Perm())
}

func TestOpenPragmas(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	ctx := context.Background()
	var mode string
	require.NoError(t, s.w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode))
	require.Equal(t, "wal", mode)
	var sync, fk int
	require.NoError(t, s.w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync))
	require.Equal(t, 2, sync, "FULL by default")
	require.NoError(t, s.w.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk))
	require.Equal(t, 1, fk)
	// The read pool cannot write.
	_, err := s.r.ExecContext(ctx, "DELETE FROM users")
	require.Error(t, err)
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	_, err := s.w.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (999, 1)`)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = Open(context.Background(), path, Options{})
	require.Error(t, err)
	require.Equal(t, engine.ECONFLICT, engine.ErrorCode(err))
	require.Contains(t, err.Error(), "schema version 999")
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	s, path := open(t)
	ctx := context.Background()
	_, err := s.PutPipeline(ctx, &engine.PutPipelineParams{Pipeline: &engine.Pipeline{Name: "p", Stages: []engine.Stage{{Processor: "noop"}}}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s2, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	defer s2.Close()
	p, err := s2.GetPipeline(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, 1, p.Version)
}

// TestHotQueriesUseIndexes guards the query plans that throughput and the
// keyset pages depend on: no query may sort its rows in a temp B-tree.
func TestHotQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	ctx := context.Background()
	plans := map[string]struct {
		q    string
		args []any
		want string
	}{
		"claim": {`SELECT id FROM job_items WHERE job_id = ? AND status = 0 AND updated_at <= ? ORDER BY updated_at, id LIMIT ?`,
			[]any{1, 2, 3}, "job_items_job_status_updated"},
		"keyset per job": {`SELECT id FROM job_items INDEXED BY job_items_job_status_updated WHERE job_id = ? AND status = ? AND (updated_at, id) > (?, ?) ORDER BY updated_at, id LIMIT ?`,
			[]any{1, statusCode(engine.ItemPending), 0, 0, 100}, "job_items_job_status_updated"},
		"keyset global": {`SELECT id FROM job_items INDEXED BY job_items_status_user_updated WHERE status = ? AND status <> 1 /* PROCESSING */ AND user_id = ? AND (updated_at, id) > (?, ?) ORDER BY updated_at, id LIMIT ?`,
			[]any{statusCode(engine.ItemPending), 1, 0, 0, 100}, "job_items_status_user_updated"},
		// Items in flight are not in the global index: every read of them
		// goes through the jobs that hold any and the per-job index.
		"stage in flight": {stageInFlightSQL, []any{`["noop"]`}, "job_items_job_status_updated"},
		"in-flight jobs":  {inFlightJobsSQL, []any{"[1]"}, "jobs_runnable"},
		"expired leases":  {expiredLeasesSQL, []any{1, 10}, "job_items_job_status_updated"},
		"last ticket":     {lastTicketSQL, nil, "jobs_runnable"},
		"queue summary": {`SELECT COALESCE(SUM(processing_items), 0) FROM jobs WHERE queue_state IN ('INGESTING', 'QUEUED', 'RUNNING', 'PAUSED', 'CANCELED')`,
			nil, "jobs_runnable"},
		"user in flight": {userInFlightSQL, nil, "jobs_runnable"},
		"delete attempts": {`DELETE FROM item_attempts WHERE item_id BETWEEN ? AND ? AND job_id = ?`,
			[]any{1, 100, 1}, "item_attempts_item"},
		"export": {`SELECT id FROM job_items NOT INDEXED WHERE id > ? AND id <= ? AND job_id = ? ORDER BY id LIMIT ?`,
			[]any{0, 100, 1, 100}, "INTEGER PRIMARY KEY (rowid>? AND rowid<?)"},
	}
	for name, c := range plans {
		rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+c.q, c.args...)
		require.NoError(t, err, name)
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &notused, &detail))
			plan = append(plan, detail)
		}
		rows.Close()
		joined := strings.Join(plan, "; ")
		require.Contains(t, joined, c.want, name)
		// The in-flight counts group a claim's worth of rows at most.
		joined = strings.ReplaceAll(joined, "USE TEMP B-TREE FOR GROUP BY", "")
		require.NotContains(t, joined, "TEMP B-TREE", name+": "+joined)
	}
}

// TestClaimRestoresSynchronous: claims commit with synchronous=NORMAL, and
// the writer is back at FULL for every other transaction.
func TestClaimRestoresSynchronous(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	ctx := context.Background()
	fillJob(t, s, 10)
	items, err := s.ClaimItems(ctx, &engine.ClaimItemsParams{WorkerID: "w", Limit: 5, LeaseFor: time.Minute, Now: time.Now()})
	require.NoError(t, err)
	require.Len(t, items, 5)
	var sync int
	require.NoError(t, s.w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync))
	require.Equal(t, 2, sync, "FULL again after a claim")
}

// TestWriteBusy: claims count as light write time, completions as durable,
// and nothing counts while the store only reads.
func TestWriteBusy(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	ctx := context.Background()
	job := fillJob(t, s, 20)
	light0, durable0 := s.WriteBusy()
	_, err := s.GetJob(ctx, job)
	require.NoError(t, err)
	light, durable := s.WriteBusy()
	require.Equal(t, light0, light, "a read is no write")
	require.Equal(t, durable0, durable, "a read is no write")

	items, err := s.ClaimItems(ctx, &engine.ClaimItemsParams{WorkerID: "w", Limit: 20, LeaseFor: time.Minute, Now: time.Now()})
	require.NoError(t, err)
	require.Len(t, items, 20)
	light, durable = s.WriteBusy()
	require.Greater(t, light, light0, "the claim ran in a light transaction")
	require.Equal(t, durable0, durable, "the claim did not run in a durable one")

	out := make([]engine.Outcome, len(items))
	for i, it := range items {
		out[i] = engine.Outcome{ItemID: it.ID, JobID: it.JobID, Attempt: it.Attempts, Status: engine.ItemDone, Result: it.Normalized}
	}
	_, err = s.CompleteItems(ctx, &engine.CompleteItemsParams{WorkerID: "w", Outcomes: out, Now: time.Now()})
	require.NoError(t, err)
	light2, durable2 := s.WriteBusy()
	require.Equal(t, light, light2)
	require.Greater(t, durable2, durable, "the outcomes were written in a durable transaction")
}
