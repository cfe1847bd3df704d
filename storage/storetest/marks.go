package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// markTests cover ItemMarks, the sparse position index behind the grid's
// jump to a row.
var markTests = []subtest{
	{"MatchListing", testMarksMatchListing},
	{"SameInstant", testMarksSameInstant},
	{"Empty", testMarksEmpty},
	{"Errors", testMarksErrors},
}

// requireMarksMatch checks ItemMarks against a walk of ListItems with the
// same filter: the total, every mark the key of the row before it, and a
// page after each mark starting exactly at the mark's row.
func (e *env) requireMarksMatch(jobID int64, statuses []engine.ItemStatus, every int) {
	e.t.Helper()
	want := e.walkItems(engine.ListItemsParams{JobID: jobID, Statuses: statuses, Limit: 3})
	m, err := e.s.ItemMarks(e.ctx, &engine.ItemMarksParams{JobID: jobID, Statuses: statuses, Every: every})
	require.NoError(e.t, err)
	require.Equal(e.t, int64(len(want)), m.Total, "statuses %v", statuses)
	require.Equal(e.t, every, m.Every)
	blocks := max(1, (len(want)+every-1)/every)
	require.Len(e.t, m.Starts, blocks, "statuses %v every %d", statuses, every)
	require.Nil(e.t, m.Starts[0], "row 0 starts with no cursor")
	for k := 1; k < blocks; k++ {
		prev := want[k*every-1]
		require.Equal(e.t, prev.ID, m.Starts[k].ID, "mark %d, every %d, statuses %v", k, every, statuses)
		require.True(e.t, prev.UpdatedAt.Equal(m.Starts[k].UpdatedAt), "mark %d", k)
	}
	for k, c := range m.Starts {
		page := e.listItems(&engine.ListItemsParams{JobID: jobID, Statuses: statuses, After: c, Limit: every})
		end := min(len(want), (k+1)*every)
		require.Equal(e.t, itemIDs(want[k*every:end]), itemIDs(page.Items), "block %d, every %d, statuses %v", k, every, statuses)
	}
}

// testMarksMatchListing: on a job whose items moved between statuses at
// different times, the marks of every filter and spacing agree with the
// listing.
func testMarksMatchListing(t *testing.T, e *env) {
	j := e.mixedJob(20)
	e.queuedJob(5) // another job's items are not counted
	for _, sts := range [][]engine.ItemStatus{
		nil,
		{engine.ItemPending},
		{engine.ItemDone, engine.ItemError},
		{engine.ItemError, engine.ItemPending, engine.ItemError},
		{engine.ItemSkipped},
	} {
		for _, every := range []int{1, 2, 3, 7, 20, 50} {
			e.requireMarksMatch(j.ID, sts, every)
		}
	}
}

// testMarksSameInstant: rows sharing one updated_at (an ingest batch) are
// told apart by id, in the marks as in the listing.
func testMarksSameInstant(t *testing.T, e *env) {
	j := e.queuedJob(25)
	e.advance(time.Second)
	claimed := e.claim("w1", 10)
	e.advance(time.Second)
	e.completeAll("w1", claimed, engine.ItemDone)
	for _, every := range []int{1, 4, 10, 24, 25, 26} {
		e.requireMarksMatch(j.ID, nil, every)
	}
	// Several statuses sharing one instant, merged.
	k := e.sameInstantJob()
	for _, sts := range [][]engine.ItemStatus{nil, {engine.ItemDone, engine.ItemError, engine.ItemNotFound}, {engine.ItemPending}} {
		for _, every := range []int{1, 3, 8} {
			e.requireMarksMatch(k.ID, sts, every)
		}
	}
}

// testMarksEmpty: a filter that lists nothing has a total of 0 and the one
// nil start.
func testMarksEmpty(t *testing.T, e *env) {
	j := e.queuedJob(3)
	m, err := e.s.ItemMarks(e.ctx, &engine.ItemMarksParams{JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemDone}, Every: 10})
	require.NoError(t, err)
	require.Equal(t, &engine.ItemMarks{Total: 0, Every: 10, Starts: []*engine.Cursor{nil}}, m)
}

// testMarksErrors: a missing job is ErrNotFound; a spacing below 1 is
// EINVALID.
func testMarksErrors(t *testing.T, e *env) {
	_, err := e.s.ItemMarks(e.ctx, &engine.ItemMarksParams{JobID: 999_999, Every: 10})
	require.True(t, engine.IsNotFound(err), "got %v", err)
	j := e.queuedJob(1)
	_, err = e.s.ItemMarks(e.ctx, &engine.ItemMarksParams{JobID: j.ID, Every: 0})
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
}
