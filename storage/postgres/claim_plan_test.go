package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/storage/postgres"
)

// TestClaimPlansReadOnlyTheClaimedRows: on a job of a few thousand
// PENDING items, with the planner's own statistics and every plan type
// allowed, a claim reads the rows it takes and not the table: the pick
// of jobs probes the job's first PENDING entry in the index, and the
// update reaches the locked rows by tuple id. (Both once chose a scan of
// all of job_items, which cost every claim of a drain more as the drain
// went on.)
func TestClaimPlansReadOnlyTheClaimedRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c := openForPlans(t)
	now := time.Now()
	j, err := s.CreateJob(ctx, &engine.CreateJobParams{UserID: 1, Pipeline: engine.DefaultPipeline, Now: now})
	require.NoError(t, err)
	items := make([]engine.NewItem, 5000)
	for i := range items {
		items[i] = engine.NewItem{Seq: int64(i + 1), Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
	}
	require.NoError(t, s.InsertItems(ctx, &engine.InsertItemsParams{JobID: j.ID, Items: items, Now: now}))
	_, err = s.FinishIngest(ctx, &engine.FinishIngestParams{JobID: j.ID, Now: now})
	require.NoError(t, err)

	_, err = c.Exec(ctx, `ANALYZE job_items; ANALYZE jobs`)
	require.NoError(t, err)
	ms := now.UnixMilli()
	plan := explain(t, c, postgres.ClaimJobsSQL, ms, 8, int64(0), 0, []int64{})
	require.NotContains(t, plan, "Seq Scan on job_items", plan)
	require.Contains(t, plan, "job_items_job_status_updated", plan)
	plan = explain(t, c, postgres.ClaimItemsSQL, j.ID, ms, 1000, "w", ms+60000)
	require.NotContains(t, plan, "Seq Scan on job_items", plan)
	require.Contains(t, plan, "Tid Scan on job_items", plan)
}
