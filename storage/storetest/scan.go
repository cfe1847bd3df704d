package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// scanTests cover ScanItems.
var scanTests = []subtest{
	{"InsertOrder", testScanInsertOrder},
	{"Statuses", testScanStatuses},
	{"StopsOnError", testScanStopsOnError},
	{"OtherJobsLeftOut", testScanOtherJobs},
	{"ListOrder", testScanListOrder},
	{"ListOrderMixed", testScanListOrderMixed},
	{"GridOnly", testScanGridOnly},
	{"OneSnapshot", testScanOneSnapshot},
	{"MissingJob", testScanMissingJob},
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

// testScanInsertOrder: items inserted at one instant share their UpdatedAt
// and are appended in input order, so they are visited in seq order across
// batches; a batch whose seqs do not rise past the last stored one is
// refused.
func testScanInsertOrder(t *testing.T, e *env) {
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

// requireScanMatchesList checks that ScanItems visits exactly the items, in
// exactly the order, of a ListItems walk with the same filter, for several
// page sizes, and that the order is strictly (UpdatedAt, ID).
func (e *env) requireScanMatchesList(jobID int64, statuses []engine.ItemStatus, wantLen int) {
	e.t.Helper()
	scanned := e.scan(&engine.ScanItemsParams{JobID: jobID, Statuses: statuses})
	require.Len(e.t, scanned, wantLen, "statuses %v", statuses)
	requireKeysetOrder(e.t, scanned)
	for _, limit := range []int{1, 3, 100} {
		listed := e.walkItems(engine.ListItemsParams{JobID: jobID, Statuses: statuses, Limit: limit})
		require.Equal(e.t, itemIDs(listed), itemIDs(scanned), "statuses %v, pages of %d", statuses, limit)
	}
	for _, it := range scanned {
		require.Equal(e.t, jobID, it.JobID)
		if len(statuses) > 0 {
			require.Contains(e.t, statuses, it.Status)
		}
	}
}

// sameInstantJob makes a job of 30 items whose updates share few instants,
// across statuses: 10 stay PENDING (inserted at base, due at once); 20 are
// claimed one second later, 4 of them stay PROCESSING; the other 16 are
// completed together another second later as DONE, ERROR, NOT_FOUND,
// SKIPPED or a retry due in a minute (one UpdatedAt shared by four
// statuses). Seqs are claimed in an order unrelated to ids.
func (e *env) sameInstantJob() *engine.Job {
	e.t.Helper()
	j := e.queuedJob(30)
	e.advance(time.Second)
	claimed := e.claim("w1", 20)
	require.Len(e.t, claimed, 20)
	e.advance(time.Second)
	var outs []engine.Outcome
	for i, it := range claimed[4:] {
		st := []engine.ItemStatus{engine.ItemDone, engine.ItemError, engine.ItemNotFound, engine.ItemSkipped, engine.ItemPending}[i%5]
		o := e.outcome(it, st)
		if st == engine.ItemSkipped {
			o.Error = "skipped"
		}
		o.RunAt = e.now().Add(time.Minute)
		outs = append(outs, o)
	}
	res := e.complete("w1", outs...)
	require.Equal(e.t, len(outs), res.Applied)
	return j
}

// testScanListOrder: the scan's order is ListItems' order, (UpdatedAt, ID),
// when many items of several statuses share one UpdatedAt, for every filter.
func testScanListOrder(t *testing.T, e *env) {
	j := e.sameInstantJob()
	e.queuedJob(3) // another job's items are never visited
	all := e.items(j.ID)
	count := func(sts ...engine.ItemStatus) int {
		n := 0
		for _, it := range all {
			if slices.Contains(sts, it.Status) {
				n++
			}
		}
		return n
	}
	require.Equal(t, 4, count(engine.ItemProcessing))
	require.Equal(t, 13, count(engine.ItemPending))
	for _, sts := range [][]engine.ItemStatus{
		nil,
		{engine.ItemDone},
		{engine.ItemPending},
		{engine.ItemError, engine.ItemNotFound, engine.ItemDone},
		{engine.ItemSkipped, engine.ItemProcessing, engine.ItemPending},
		{engine.ItemDone, engine.ItemDone, engine.ItemError},
		{engine.ItemNotFound, engine.ItemSkipped, engine.ItemError, engine.ItemDone, engine.ItemProcessing, engine.ItemPending},
	} {
		want := len(all)
		if sts != nil {
			want = count(sts...)
		}
		e.requireScanMatchesList(j.ID, sts, want)
	}
	// The order is neither seq nor id order alone: the retries (PENDING,
	// due later) come last although completed with the others.
	scanned := e.scan(&engine.ScanItemsParams{JobID: j.ID})
	for _, it := range scanned[len(scanned)-3:] {
		require.Equal(t, engine.ItemPending, it.Status)
		require.Greater(t, it.Attempts, 0, "a retry")
	}
}

// testScanListOrderMixed: items updated at many different instants, in an
// order unrelated to their ids (see mixedJob).
func testScanListOrderMixed(t *testing.T, e *env) {
	j := e.mixedJob(24)
	e.requireScanMatchesList(j.ID, nil, 24)
	e.requireScanMatchesList(j.ID, []engine.ItemStatus{engine.ItemPending, engine.ItemError}, 16)
	scanned := e.scan(&engine.ScanItemsParams{JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemDone}})
	// Completed in reverse seq order: DONE items come in falling seq order.
	require.Equal(t, []int64{23, 19, 17, 13, 11, 7, 5, 1}, scanSeqs(scanned))
}

// testScanGridOnly: GridOnly fills the grid's fields as a full scan does,
// in the same order, whether one status or several are read, and leaves the
// input out (the ID may be left out too: items are told apart by seq); it
// cannot be combined with WithInput.
func testScanGridOnly(t *testing.T, e *env) {
	j := e.sameInstantJob()
	full := e.scan(&engine.ScanItemsParams{JobID: j.ID})
	grid := e.scan(&engine.ScanItemsParams{JobID: j.ID, GridOnly: true})
	require.Equal(t, scanSeqs(full), scanSeqs(grid))
	for i, g := range grid {
		f := full[i]
		require.True(t, g.ID == 0 || g.ID == f.ID, "ID %d of seq %d, want 0 or %d", g.ID, g.Seq, f.ID)
		require.Equal(t, f.JobID, g.JobID)
		require.Equal(t, f.Seq, g.Seq)
		require.Equal(t, f.Status, g.Status)
		require.Equal(t, f.Attempts, g.Attempts)
		require.Equal(t, f.LastError, g.LastError)
		require.Equal(t, string(f.Result), string(g.Result))
		require.Empty(t, g.Input)
		require.Empty(t, g.Normalized)
	}
	for _, sts := range [][]engine.ItemStatus{
		{engine.ItemError, engine.ItemDone},
		{engine.ItemDone},
		{engine.ItemDone, engine.ItemProcessing},
		{engine.ItemNotFound, engine.ItemDone, engine.ItemNotFound},
	} {
		grid := e.scan(&engine.ScanItemsParams{JobID: j.ID, Statuses: sts, GridOnly: true})
		require.Equal(t, scanSeqs(e.scan(&engine.ScanItemsParams{JobID: j.ID, Statuses: sts})), scanSeqs(grid), "%v", sts)
		for _, it := range grid {
			require.Contains(t, sts, it.Status)
			require.Equal(t, j.ID, it.JobID)
		}
	}
	// A job with items of one status only.
	k := e.queuedJob(7)
	require.Equal(t, scanSeqs(e.scan(&engine.ScanItemsParams{JobID: k.ID})),
		scanSeqs(e.scan(&engine.ScanItemsParams{JobID: k.ID, GridOnly: true})))

	err := e.s.ScanItems(e.ctx, &engine.ScanItemsParams{JobID: j.ID, GridOnly: true, WithInput: true},
		func(*engine.Item) error { return nil })
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err), "GridOnly with WithInput: %v", err)
}

// testScanOneSnapshot: changes committed while a scan runs are not seen by
// it: an item completed mid-scan (which moves it to the end of the order)
// is visited once, as it was when the scan began.
func testScanOneSnapshot(t *testing.T, e *env) {
	j := e.queuedJob(6)
	e.advance(time.Second)
	claimed := e.claim("w1", 6)
	require.Len(t, claimed, 6)
	e.advance(time.Second)
	var visited []string
	err := e.s.ScanItems(e.ctx, &engine.ScanItemsParams{JobID: j.ID}, func(it *engine.Item) error {
		visited = append(visited, fmt.Sprintf("%d:%s", it.Seq, it.Status))
		if it.Seq == 2 {
			e.advance(time.Second)
			e.completeAll("w1", claimed[4:], engine.ItemDone) // seqs 5 and 6
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"1:PROCESSING", "2:PROCESSING", "3:PROCESSING", "4:PROCESSING", "5:PROCESSING", "6:PROCESSING"}, visited)
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, scanSeqs(e.scan(&engine.ScanItemsParams{JobID: j.ID})))
	require.Equal(t, []int64{5, 6}, scanSeqs(e.scan(&engine.ScanItemsParams{JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemDone}})))
}

// testScanMissingJob: an unknown job is not found.
func testScanMissingJob(t *testing.T, e *env) {
	err := e.s.ScanItems(e.ctx, &engine.ScanItemsParams{JobID: 424242}, func(*engine.Item) error { return nil })
	requireNotFound(t, err)
}
