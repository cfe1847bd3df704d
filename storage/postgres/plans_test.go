package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/storage/postgres"
	"github.com/sluicehq/sluice/storage/postgres/pgtest"
)

// TestHotQueriesUseIndexes guards the indexes migration 6 left (fewer
// writes per item): each hot or per-item query still has an index that
// serves it, in its order where it pages. Sequential and bitmap scans are
// switched off so that an empty table cannot hide a missing index or order.
func TestHotQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, c := openForPlans(t)
	_, err := c.Exec(ctx, `SET enable_seqscan = off; SET enable_bitmapscan = off`)
	require.NoError(t, err)
	plans := []struct {
		name, q, index string
		sorted         bool // the index gives the order: no Sort node
	}{
		{"claim", `SELECT id FROM job_items WHERE job_id = 1 AND status = 'PENDING' AND updated_at <= 5
			ORDER BY updated_at, id LIMIT 100 FOR UPDATE SKIP LOCKED`, "job_items_job_status_updated", true},
		{"keyset per job", `SELECT id FROM job_items WHERE job_id = 1 AND status = 'PROCESSING' AND (updated_at, id) > (0, 0)
			ORDER BY updated_at, id LIMIT 100`, "job_items_job_status_updated", true},
		{"keyset per user", `SELECT id FROM job_items WHERE status = 'DONE' AND user_id = 1 AND (updated_at, id) > (0, 0)
			ORDER BY updated_at, id LIMIT 100`, "job_items_status_user_updated", true},
		// Items in flight are few: read from their own index, then sorted.
		{"keyset per user, in flight", `SELECT id FROM job_items WHERE status = 'PROCESSING' AND user_id = 1
			AND (updated_at, id) > (0, 0) ORDER BY updated_at, id LIMIT 100`, "job_items_inflight", false},
		{"reaper", `SELECT id FROM job_items WHERE status = 'PROCESSING' AND lease_expires_at < 5
			ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED`, "job_items_inflight", false},
		{"dead worker", `SELECT id FROM job_items WHERE status = 'PROCESSING' AND lease_expires_at > 5
			AND locked_by IN ('a', 'b')`, "job_items_inflight", false},
		{"attempts of an item", `SELECT id FROM item_attempts WHERE item_id = 1 ORDER BY id`, "item_attempts_pkey", true},
		{"attempts of a job", `DELETE FROM item_attempts WHERE item_id IN (SELECT id FROM job_items WHERE job_id = 1)`,
			"item_attempts_pkey", false},
	}
	for _, p := range plans {
		plan := explain(t, c, p.q)
		require.Contains(t, plan, p.index, "%s:\n%s", p.name, plan)
		if p.sorted {
			require.NotContains(t, plan, "Sort", "%s:\n%s", p.name, plan)
		}
	}
}

// openForPlans opens a store in a fresh schema and a plain connection
// whose search_path is that schema, for EXPLAIN; both close with t.
func openForPlans(t *testing.T) (*postgres.Store, *pgx.Conn) {
	t.Helper()
	url, schema := pgtest.URL(t), pgtest.Schema(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, url, postgres.Options{Schema: schema, NoListen: true})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	c, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(ctx) })
	_, err = c.Exec(ctx, `SET search_path = `+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	return s, c
}

// explain returns the plan of q with args, one line per plan line.
func explain(t *testing.T, c *pgx.Conn, q string, args ...any) string {
	t.Helper()
	rows, err := c.Query(context.Background(), "EXPLAIN "+q, args...)
	require.NoError(t, err, q)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err, q)
	return strings.Join(lines, "\n")
}
