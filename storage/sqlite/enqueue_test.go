package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/stretchr/testify/require"
)

// A one-item job comes back from EnqueueJob as written (read by the
// transaction's last statement) and can be claimed at once.
func TestEnqueueOneItemReturnsTheJob(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	ctx := context.Background()
	job, err := s.EnqueueJob(ctx, &engine.EnqueueJobParams{
		Job:   engine.CreateJobParams{UserID: 1, Pipeline: "noop", Name: "one", Now: time.Now()},
		Items: []engine.NewItem{{Seq: 1, Input: []byte(`{"a":"1"}`), Normalized: []byte(`{"a":"1"}`)}},
	})
	require.NoError(t, err)
	require.Equal(t, engine.JobQueued, job.State)
	require.Equal(t, "one", job.Name)
	require.EqualValues(t, 1, job.TotalItems)
	require.EqualValues(t, 1, job.Counts.Pending)
	stored, err := s.GetJob(ctx, job.ID)
	require.NoError(t, err)
	require.Equal(t, stored, job)
	items, err := s.ClaimItems(ctx, &engine.ClaimItemsParams{WorkerID: "w", Limit: 8, LeaseFor: time.Minute, Now: time.Now()})
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Equal(t, job.ID, items[0].JobID)
	require.JSONEq(t, `{"a":"1"}`, string(items[0].Normalized))
}

// The one-item path checks its item like the many-item one, and a failed
// enqueue leaves no job behind.
func TestEnqueueOneItemRejectsBadStatus(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	ctx := context.Background()
	before, err := s.ListJobs(ctx, &engine.ListJobsParams{Limit: 100})
	require.NoError(t, err)
	_, err = s.EnqueueJob(ctx, &engine.EnqueueJobParams{
		Job:   engine.CreateJobParams{UserID: 1, Pipeline: "noop", Now: time.Now()},
		Items: []engine.NewItem{{Seq: 1, Input: []byte(`{"a":"1"}`), Status: engine.ItemDone}},
	})
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
	after, err := s.ListJobs(ctx, &engine.ListJobsParams{Limit: 100})
	require.NoError(t, err)
	require.Len(t, after, len(before))
}
