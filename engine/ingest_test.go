package engine_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/tabular"
)

func ingest(t *testing.T, g *engine.Ingester, req engine.IngestRequest) *engine.IngestResult {
	t.Helper()
	res, err := g.IngestCSV(t.Context(), req)
	require.NoError(t, err)
	return res
}

func TestIngestSmallCSV(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	n := engine.NewNotifier()
	wake, unsub := n.Subscribe()
	defer unsub()
	g := newIngester(t, s, n)
	res := ingest(t, g, engine.IngestRequest{Name: "p.csv", Input: strings.NewReader(csvRows(3))})

	require.Equal(t, int64(3), res.Rows)
	require.Zero(t, res.Skipped)
	require.GreaterOrEqual(t, res.Batches, 1)
	job := res.Job
	require.Equal(t, engine.JobQueued, job.State)
	require.Equal(t, engine.DefaultPipeline, job.Pipeline)
	require.Equal(t, "p.csv", job.Name)
	require.Equal(t, int64(3), job.TotalItems)
	require.Equal(t, engine.ItemCounts{Pending: 3}, job.Counts)
	require.Equal(t, job.Counts, getJob(t, s, job.ID).Counts)
	select {
	case <-wake:
	default:
		t.Fatal("ingest did not notify the workers")
	}

	items := scanItems(t, s, job.ID)
	require.Len(t, items, 3)
	for i, it := range items {
		require.Equal(t, int64(i+1), it.Seq)
		require.Equal(t, engine.ItemPending, it.Status)
		require.Equal(t, job.ID, it.JobID)
	}
	require.JSONEq(t, `{"Product Name":"product 2","Price":"2.50"}`, string(items[1].Input))
}

func TestIngestNormalizesKeysAndValues(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	g := newIngester(t, s, nil)
	csv := "Product Name;  Unit Price (€) ;Qty\n  Widget  ; 9,99 ;3\nGadget;1;\n"
	res := ingest(t, g, engine.IngestRequest{Input: strings.NewReader(csv)})
	items := scanItems(t, s, res.Job.ID)
	require.Len(t, items, 2)

	// Input keeps the header names and the raw values, in header order.
	require.Equal(t, `{"Product Name":"  Widget  ","  Unit Price (€) ":" 9,99 ","Qty":"3"}`, string(items[0].Input))
	require.JSONEq(t, `{"product_name":"Widget","unit_price":"9,99","qty":"3"}`, string(items[0].Normalized))
	require.JSONEq(t, `{"product_name":"Gadget","unit_price":"1","qty":""}`, string(items[1].Normalized))
}

func TestIngestWrongFieldCountIsSkipped(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	g := newIngester(t, s, nil)
	csv := "a,b\n1,2\n3\n4,5,6\n7,8\n"
	res := ingest(t, g, engine.IngestRequest{Input: strings.NewReader(csv)})
	require.Equal(t, int64(4), res.Rows)
	require.Equal(t, int64(2), res.Skipped)
	require.Equal(t, engine.JobQueued, res.Job.State)
	require.Equal(t, int64(4), res.Job.TotalItems)
	require.Equal(t, engine.ItemCounts{Pending: 2, Skipped: 2}, res.Job.Counts)

	items := scanItems(t, s, res.Job.ID)
	require.Len(t, items, 4)
	require.Equal(t, engine.ItemSkipped, items[1].Status)
	require.Equal(t, "line 3: has 1 fields, header has 2", items[1].LastError)
	require.Equal(t, engine.ItemSkipped, items[2].Status)
	require.Equal(t, "line 4: has 3 fields, header has 2", items[2].LastError)
	require.Equal(t, engine.ItemPending, items[3].Status)
	require.JSONEq(t, `{"a":"3","b":""}`, string(items[1].Input), "a short row keeps what it has")
}

func TestIngestAllSkippedIsDone(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	g := newIngester(t, s, nil)
	res := ingest(t, g, engine.IngestRequest{Input: strings.NewReader("a,b,c\n1\n2,3\n")})
	require.Equal(t, engine.JobDone, res.Job.State)
	require.NotNil(t, res.Job.FinishedAt)
	require.Equal(t, int64(2), res.Job.TotalItems)
	require.Equal(t, engine.ItemCounts{Skipped: 2}, res.Job.Counts)
}

func TestIngestBinaryInputFailsTheJob(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	g := newIngester(t, s, nil)
	input := []byte("a,b\n1,2\n3,\x004\n5,6\n")
	res, err := g.IngestCSV(t.Context(), engine.IngestRequest{Name: "photo.csv", Input: bytes.NewReader(input)})
	require.Error(t, err)
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
	require.Contains(t, engine.ErrorMessage(err), "photo.csv")
	require.Contains(t, engine.ErrorMessage(err), "line 3")
	require.NotNil(t, res)
	require.NotNil(t, res.Job)
	require.Equal(t, engine.JobFailed, res.Job.State)
	require.Contains(t, res.Job.LastError, "line 3")
	require.Contains(t, res.Job.LastError, "NUL")

	stored := getJob(t, s, res.Job.ID)
	require.Equal(t, engine.JobFailed, stored.State)
	require.Equal(t, res.Job.LastError, stored.LastError)
	require.NotNil(t, stored.FinishedAt)
}

func TestIngestEmptyFileFailsTheJob(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	g := newIngester(t, s, nil)
	res, err := g.IngestCSV(t.Context(), engine.IngestRequest{Input: strings.NewReader("")})
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
	require.Equal(t, engine.JobFailed, res.Job.State)
	require.Equal(t, "input: empty file: no header row", res.Job.LastError)
}

func TestIngestUnknownPipelineCreatesNoJob(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	g := newIngester(t, s, nil)
	res, err := g.IngestCSV(t.Context(), engine.IngestRequest{Pipeline: "nope", Input: strings.NewReader(csvRows(2))})
	require.Nil(t, res)
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
	require.Contains(t, engine.ErrorMessage(err), `"nope"`)
	jobs, err := s.ListJobs(t.Context(), &engine.ListJobsParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, jobs)
}

func TestIngestUsesPipelineSettings(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	p := noopPipeline("prio", "")
	p.Priority = 5
	p.Retry.Transient.MaxAttempts = 3
	putPipeline(t, s, p)
	g := newIngester(t, s, nil)
	res := ingest(t, g, engine.IngestRequest{Pipeline: "prio", Priority: 2, Input: strings.NewReader(csvRows(1))})
	require.Equal(t, "prio", res.Job.Pipeline)
	require.Equal(t, 7, res.Job.Priority)
	require.Equal(t, 3, res.Job.MaxAttempts)
	require.Equal(t, int64(1), res.Job.UserID)
}

func TestIngestLargeCSVInBatches(t *testing.T) {
	t.Parallel()
	const n = 30000
	s := newStore(t)
	g := newIngester(t, s, nil)
	var mu sync.Mutex
	var progress []int64
	res := ingest(t, g, engine.IngestRequest{
		Input: strings.NewReader(csvRows(n)),
		CSV:   tabular.Options{Delimiter: ','},
		Progress: func(rows int64) {
			mu.Lock()
			progress = append(progress, rows)
			mu.Unlock()
		},
	})
	require.Equal(t, int64(n), res.Rows)
	require.Greater(t, res.Batches, 1)
	require.Positive(t, res.FinalBatch)
	require.Equal(t, engine.JobQueued, res.Job.State)
	require.Equal(t, int64(n), res.Job.TotalItems)
	require.Equal(t, engine.ItemCounts{Pending: n}, res.Job.Counts)

	mu.Lock()
	require.Len(t, progress, res.Batches, "one progress call per batch")
	require.IsIncreasing(t, progress)
	require.Equal(t, int64(n), progress[len(progress)-1])
	mu.Unlock()

	seen := make([]bool, n+1)
	err := s.ScanItems(t.Context(), &engine.ScanItemsParams{JobID: res.Job.ID}, func(it *engine.Item) error {
		require.True(t, it.Seq >= 1 && it.Seq <= int64(n) && !seen[it.Seq], "seq %d", it.Seq)
		seen[it.Seq] = true
		return nil
	})
	require.NoError(t, err)
	require.NotContains(t, seen[1:], false, "every seq stored once")

	last, err := s.GetItem(t.Context(), mustLastItemID(t, s, res.Job.ID))
	require.NoError(t, err)
	var norm map[string]string
	require.NoError(t, json.Unmarshal(last.Normalized, &norm))
	require.Equal(t, map[string]string{"product_name": "product 30000", "price": "30000.50"}, norm)
}

// mustLastItemID pages through the job's items with ListItems and returns
// the id of the item with the highest seq, checking the count on the way.
func mustLastItemID(t *testing.T, s engine.Store, jobID int64) int64 {
	t.Helper()
	var after *engine.Cursor
	var total int
	var best, bestSeq int64
	for {
		page, err := s.ListItems(t.Context(), &engine.ListItemsParams{JobID: jobID, After: after, Limit: 5000})
		require.NoError(t, err)
		for _, it := range page.Items {
			total++
			if it.Seq > bestSeq {
				best, bestSeq = it.ID, it.Seq
			}
		}
		if page.Next == nil {
			break
		}
		after = page.Next
	}
	job := getJob(t, s, jobID)
	require.Equal(t, int(job.TotalItems), total, "ListItems pages cover every item once")
	return best
}
