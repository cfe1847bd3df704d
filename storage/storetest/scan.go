package storetest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// scanTests cover ScanItems.
var scanTests = []subtest{
	{"SeqOrder", testScanSeqOrder},
	{"Statuses", testScanStatuses},
	{"StopsOnError", testScanStopsOnError},
	{"OtherJobsLeftOut", testScanOtherJobs},
}

// scan collects the items ScanItems visits.
func (e *env) scan(p *engine.ScanItemsParams) []*engine.Item {
	e.t.Helper()
	var out []*engine.Item
	err := e.s.ScanItems(e.ctx, p, func(it *engine.Item) error {
		out = append(out, it)
		return nil
	})
	require.NoError(e.t, err, "ScanItems")
	return out
}

// scanSeqs returns the Seq of items in visiting order.
func scanSeqs(items []*engine.Item) []int64 {
	out := make([]int64, len(items))
	for i, it := range items {
		out[i] = it.Seq
	}
	return out
}

// testScanSeqOrder: items are visited in seq order across batches, and a
// batch whose seqs do not rise past the last stored one is refused (items
// are appended in input order).
func testScanSeqOrder(t *testing.T, e *env) {
	j := e.createJob()
	e.insert(j.ID, rows(1, 5))
	e.insert(j.ID, rows(6, 10))
	err := e.s.InsertItems(e.ctx, &engine.InsertItemsParams{JobID: j.ID, Items: rows(3, 4), Now: e.now()})
	require.Error(t, err, "seqs that do not rise")
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
	e.insert(j.ID, rows(11, 15))
	e.finish(j.ID)

	got := e.scan(&engine.ScanItemsParams{JobID: j.ID})
	require.Equal(t, seqRange(1, 15), scanSeqs(got))

	got = e.scan(&engine.ScanItemsParams{JobID: j.ID, WithInput: true})
	require.Equal(t, seqRange(1, 15), scanSeqs(got))
	for _, it := range got {
		requireJSON(t, rowJSON(it.Seq), it.Input, "Input")
		requireJSON(t, normJSON(it.Seq), it.Normalized, "Normalized")
	}
}

// testScanStatuses: Statuses filters and results come with the items.
func testScanStatuses(t *testing.T, e *env) {
	j := e.queuedJob(6)
	claimed := e.claimAll("w1")
	require.Len(t, claimed, 6)
	var outs []engine.Outcome
	for _, it := range claimed {
		st := engine.ItemDone
		if it.Seq%2 == 0 {
			st = engine.ItemError
		}
		o := e.outcome(it, st)
		o.Result = resultJSON(it.Seq)
		outs = append(outs, o)
	}
	e.complete("w1", outs...)

	done := e.scan(&engine.ScanItemsParams{JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemDone}})
	require.Equal(t, []int64{1, 3, 5}, scanSeqs(done))
	for _, it := range done {
		require.Equal(t, engine.ItemDone, it.Status)
		requireJSON(t, resultJSON(it.Seq), it.Result, "Result")
	}
	failed := e.scan(&engine.ScanItemsParams{JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemError, engine.ItemNotFound}})
	require.Equal(t, []int64{2, 4, 6}, scanSeqs(failed))
	for _, it := range failed {
		require.Equal(t, engine.ItemError, it.Status)
		require.NotEmpty(t, it.LastError)
	}
	all := e.scan(&engine.ScanItemsParams{JobID: j.ID})
	require.Equal(t, seqRange(1, 6), scanSeqs(all))
	require.Empty(t, e.scan(&engine.ScanItemsParams{JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemPending}}))
}

// testScanStopsOnError: the scan stops at fn's first error and returns it.
func testScanStopsOnError(t *testing.T, e *env) {
	j := e.queuedJob(10)
	stop := errors.New("stop here")
	var visited []int64
	err := e.s.ScanItems(e.ctx, &engine.ScanItemsParams{JobID: j.ID}, func(it *engine.Item) error {
		visited = append(visited, it.Seq)
		if it.Seq == 4 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, []int64{1, 2, 3, 4}, visited)
}

// testScanOtherJobs: only the job's own items are visited.
func testScanOtherJobs(t *testing.T, e *env) {
	a := e.queuedJob(3)
	b := e.queuedJob(4)
	got := e.scan(&engine.ScanItemsParams{JobID: b.ID})
	require.Len(t, got, 4)
	for _, it := range got {
		require.Equal(t, b.ID, it.JobID)
	}
	require.Len(t, e.scan(&engine.ScanItemsParams{JobID: a.ID}), 3)
}
