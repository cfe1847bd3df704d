package storetest

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// itemTests cover GetItem and the keyset listing of ListItems.
var itemTests = []subtest{
	{"GetItem", testGetItem},
	{"GetItemMissing", testGetItemMissing},
	{"ListOrder", testListItemsOrder},
	{"ListStatuses", testListItemsStatuses},
	{"ListKeysetWalk", testListItemsKeysetWalk},
	{"ListKeysetSameUpdatedAt", testListItemsSameUpdatedAt},
	{"ListAcrossJobs", testListItemsAcrossJobs},
	{"ListInFlightAcrossJobs", testListItemsInFlightAcrossJobs},
	{"ListUser", testListItemsUser},
	{"ListWithInput", testListItemsWithInput},
	{"ListPipeline", testListItemsPipeline},
}

// testListItemsPipeline: Pipeline restricts a listing to jobs on that
// pipeline, within a job and across jobs.
func testListItemsPipeline(t *testing.T, e *env) {
	_, err := e.s.PutPipeline(e.ctx, &engine.PutPipelineParams{Pipeline: &engine.Pipeline{Name: "other",
		Stages: []engine.Stage{{Processor: "noop"}}}, Now: e.now()})
	require.NoError(t, err)
	a := e.queuedJob(3)
	other := e.queuedJob(2, func(p *engine.CreateJobParams) { p.Pipeline = "other" })

	got := e.walkItems(engine.ListItemsParams{Pipeline: "other", Limit: 1})
	require.Len(t, got, 2)
	for _, it := range got {
		require.Equal(t, other.ID, it.JobID)
		require.Equal(t, "other", it.Pipeline)
	}
	got = e.walkItems(engine.ListItemsParams{Pipeline: engine.DefaultPipeline, Statuses: []engine.ItemStatus{engine.ItemPending}, Limit: 2})
	require.Len(t, got, 3)
	got = e.walkItems(engine.ListItemsParams{JobID: a.ID, Pipeline: "other", Limit: 2})
	require.Empty(t, got)
}

// testGetItem: an item reads back with input, normalised input and result.
func testGetItem(t *testing.T, e *env) {
	j := e.queuedJob(2)
	claimed := e.claim("w1", 1)
	require.Len(t, claimed, 1)
	e.complete("w1", e.outcome(claimed[0], engine.ItemDone))

	got := e.item(claimed[0].ID)
	require.Equal(t, claimed[0].ID, got.ID)
	require.Equal(t, j.ID, got.JobID)
	require.Equal(t, e.user.ID, got.UserID)
	require.Equal(t, engine.DefaultPipeline, got.Pipeline)
	require.Equal(t, int64(1), got.Seq)
	require.Equal(t, engine.ItemDone, got.Status)
	requireJSON(t, rowJSON(1), got.Input, "Input")
	requireJSON(t, normJSON(1), got.Normalized, "Normalized")
	requireJSON(t, resultJSON(1), got.Result, "Result")
	requireTime(t, e.now(), got.UpdatedAt, "UpdatedAt")
}

// testGetItemMissing: an unknown id is not found.
func testGetItemMissing(t *testing.T, e *env) {
	_, err := e.s.GetItem(e.ctx, 123456)
	requireNotFound(t, err)
}

// listItems returns one page.
func (e *env) listItems(p *engine.ListItemsParams) *engine.ItemPage {
	e.t.Helper()
	page, err := e.s.ListItems(e.ctx, p)
	require.NoError(e.t, err, "ListItems")
	require.NotNil(e.t, page)
	return page
}

// walkItems follows Next from the first page to the last and returns every
// item in the order listed, checking Limit on every page.
func (e *env) walkItems(p engine.ListItemsParams) []*engine.Item {
	e.t.Helper()
	var out []*engine.Item
	p.After = nil
	for pages := 0; ; pages++ {
		require.Less(e.t, pages, 1000, "keyset walk never ends")
		page := e.listItems(&p)
		require.LessOrEqual(e.t, len(page.Items), p.Limit, "Limit respected")
		out = append(out, page.Items...)
		if page.Next == nil {
			return out
		}
		require.NotEmpty(e.t, page.Items, "a page with a Next cursor has items")
		p.After = page.Next
	}
}

// requireKeysetOrder checks that items are in strictly increasing
// (UpdatedAt, ID) order, so none is listed twice.
func requireKeysetOrder(t *testing.T, items []*engine.Item) {
	t.Helper()
	for i := 1; i < len(items); i++ {
		a, b := items[i-1], items[i]
		c := cmp.Or(cmp.Compare(a.UpdatedAt.UnixMilli(), b.UpdatedAt.UnixMilli()), cmp.Compare(a.ID, b.ID))
		require.Negative(t, c, "items %d (%v) and %d (%v) out of (updated_at, id) order",
			a.ID, a.UpdatedAt, b.ID, b.UpdatedAt)
	}
}

// sortedKeyset returns a copy of items sorted by (UpdatedAt, ID).
func sortedKeyset(items []*engine.Item) []int64 {
	s := slices.Clone(items)
	slices.SortFunc(s, func(a, b *engine.Item) int {
		return cmp.Or(cmp.Compare(a.UpdatedAt.UnixMilli(), b.UpdatedAt.UnixMilli()), cmp.Compare(a.ID, b.ID))
	})
	return itemIDs(s)
}

// mixedJob makes a job of n items whose updates happen at different times:
// items are claimed and completed in reverse seq order, one per second, so
// the (updated_at, id) order differs from the id order. Every third item is
// left PENDING, every other one ends DONE or ERROR by parity of seq.
func (e *env) mixedJob(n int64) *engine.Job {
	e.t.Helper()
	j := e.queuedJob(n)
	claimed := e.claimAll("w1")
	require.Len(e.t, claimed, int(n))
	slices.SortFunc(claimed, func(a, b *engine.Item) int { return cmp.Compare(b.Seq, a.Seq) })
	for _, it := range claimed {
		e.advance(time.Second)
		st := engine.ItemDone
		switch {
		case it.Seq%3 == 0:
			st = engine.ItemPending
		case it.Seq%2 == 0:
			st = engine.ItemError
		}
		o := e.outcome(it, st)
		o.RunAt = e.now().Add(time.Hour)
		res := e.complete("w1", o)
		require.Equal(e.t, 1, res.Applied)
	}
	return j
}

// testListItemsOrder: a single page is ordered by (UpdatedAt, ID), with a
// nil Next.
func testListItemsOrder(t *testing.T, e *env) {
	j := e.mixedJob(9)
	page := e.listItems(&engine.ListItemsParams{JobID: j.ID, Limit: 100})
	require.Len(t, page.Items, 9)
	require.Nil(t, page.Next, "a single page has no Next")
	requireKeysetOrder(t, page.Items)
	// Completed in reverse seq order one second apart, and a PENDING item's
	// UpdatedAt is its due time (an hour after its completion): the retries
	// (seq 9, 6, 3) come after every terminal item, the last retry last.
	require.Equal(t, int64(3), page.Items[len(page.Items)-1].Seq)
	require.Equal(t, int64(1), page.Items[len(page.Items)-4].Seq)
	for _, it := range page.Items {
		require.Equal(t, j.ID, it.JobID)
	}
}

// statusesOf returns the distinct statuses of items.
func statusesOf(items []*engine.Item) []engine.ItemStatus {
	var out []engine.ItemStatus
	for _, it := range items {
		if !slices.Contains(out, it.Status) {
			out = append(out, it.Status)
		}
	}
	slices.Sort(out)
	return out
}

// testListItemsStatuses: one status, several, or none (all).
func testListItemsStatuses(t *testing.T, e *env) {
	j := e.mixedJob(12) // seq%3==0: PENDING (4); else even: ERROR (4); else DONE (4)
	all := e.items(j.ID)
	count := func(st ...engine.ItemStatus) int {
		n := 0
		for _, it := range all {
			if slices.Contains(st, it.Status) {
				n++
			}
		}
		return n
	}
	require.Equal(t, 4, count(engine.ItemPending))

	got := e.walkItems(engine.ListItemsParams{JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemError}, Limit: 100})
	require.Len(t, got, count(engine.ItemError))
	require.Equal(t, []engine.ItemStatus{engine.ItemError}, statusesOf(got))

	got = e.walkItems(engine.ListItemsParams{JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemPending, engine.ItemDone}, Limit: 3})
	require.Len(t, got, count(engine.ItemPending, engine.ItemDone))
	require.Equal(t, []engine.ItemStatus{engine.ItemDone, engine.ItemPending}, statusesOf(got))
	requireKeysetOrder(t, got)

	got = e.walkItems(engine.ListItemsParams{JobID: j.ID, Limit: 5})
	require.Len(t, got, 12)
	requireKeysetOrder(t, got)

	got = e.walkItems(engine.ListItemsParams{JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemNotFound}, Limit: 5})
	require.Empty(t, got)
}

// testListItemsKeysetWalk: walking the pages visits every item once, in
// order, whatever the page size.
func testListItemsKeysetWalk(t *testing.T, e *env) {
	j := e.mixedJob(23)
	want := sortedKeyset(e.items(j.ID))
	for _, limit := range []int{1, 2, 5, 7, 22, 23, 24, 100} {
		got := e.walkItems(engine.ListItemsParams{JobID: j.ID, Limit: limit})
		require.Equal(t, want, itemIDs(got), "Limit %d", limit)
	}
	page := e.listItems(&engine.ListItemsParams{JobID: j.ID, Limit: 5})
	require.Len(t, page.Items, 5)
	require.NotNil(t, page.Next, "more items follow")
}

// testListItemsSameUpdatedAt: a keyset walk is exact when many items share
// one UpdatedAt, and when a page boundary falls inside such a run.
func testListItemsSameUpdatedAt(t *testing.T, e *env) {
	j := e.queuedJob(25) // all inserted at the same instant
	e.advance(time.Second)
	claimed := e.claim("w1", 10)
	require.Len(t, claimed, 10)
	e.advance(time.Second)
	e.completeAll("w1", claimed, engine.ItemDone) // ten more sharing another instant

	want := sortedKeyset(e.items(j.ID))
	for _, limit := range []int{1, 3, 4, 6, 11} {
		got := e.walkItems(engine.ListItemsParams{JobID: j.ID, Limit: limit})
		require.Equal(t, want, itemIDs(got), "Limit %d", limit)
		requireKeysetOrder(t, got)
	}
	got := e.walkItems(engine.ListItemsParams{JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemPending}, Limit: 4})
	require.Len(t, got, 15)
	requireKeysetOrder(t, got)
}

// testListItemsAcrossJobs: JobID 0 lists the items of every job.
func testListItemsAcrossJobs(t *testing.T, e *env) {
	a := e.queuedJob(4)
	e.advance(time.Second)
	b := e.queuedJob(3)
	e.advance(time.Second)
	claimed := e.claim("w1", 2)
	e.completeAll("w1", claimed, engine.ItemDone)

	got := e.walkItems(engine.ListItemsParams{Limit: 2})
	require.Len(t, got, 7)
	requireKeysetOrder(t, got)
	jobs := byJob(got)
	require.Len(t, jobs[a.ID], 4)
	require.Len(t, jobs[b.ID], 3)

	got = e.walkItems(engine.ListItemsParams{Statuses: []engine.ItemStatus{engine.ItemPending}, Limit: 3})
	require.Len(t, got, 5)
	require.Equal(t, []engine.ItemStatus{engine.ItemPending}, statusesOf(got))

	got = e.walkItems(engine.ListItemsParams{JobID: b.ID, Limit: 2})
	require.Len(t, got, 3)
	for _, it := range got {
		require.Equal(t, b.ID, it.JobID)
	}
}

// testListItemsInFlightAcrossJobs: the PROCESSING items of all jobs (and
// of one owner's) list in keyset order, beside the other statuses, and
// leave the listing once completed. A store may keep items in flight out
// of its cross-job index (SQLite and PostgreSQL do).
func testListItemsInFlightAcrossJobs(t *testing.T, e *env) {
	other := e.addUser("other-owner", "user")
	a := e.queuedJob(4)
	e.advance(time.Second)
	b := e.queuedJob(3)
	e.advance(time.Second)
	c := e.queuedJob(2, func(p *engine.CreateJobParams) { p.UserID = other.ID })
	e.advance(time.Second)
	claimed := e.claim("w1", 6)
	require.Len(t, claimed, 6)
	perJob := byJob(claimed)
	require.Len(t, perJob, 3, "the claim took items of every job")
	processing := []engine.ItemStatus{engine.ItemProcessing}

	got := e.walkItems(engine.ListItemsParams{Statuses: processing, Limit: 2})
	require.Len(t, got, 6)
	requireKeysetOrder(t, got)
	require.Equal(t, processing, statusesOf(got))

	mine := e.walkItems(engine.ListItemsParams{UserID: e.user.ID, Statuses: processing, Limit: 1})
	require.Len(t, mine, len(perJob[a.ID])+len(perJob[b.ID]), "only the owner's jobs")
	for _, it := range mine {
		require.NotEqual(t, c.ID, it.JobID)
	}
	both := e.walkItems(engine.ListItemsParams{Statuses: []engine.ItemStatus{engine.ItemPending, engine.ItemProcessing}, Limit: 3})
	require.Len(t, both, 9)
	requireKeysetOrder(t, both)

	e.advance(time.Second)
	e.completeAll("w1", perJob[a.ID], engine.ItemDone)
	got = e.walkItems(engine.ListItemsParams{Statuses: processing, Limit: 2})
	require.Len(t, got, 6-len(perJob[a.ID]), "completed items left the in-flight listing")
	done := e.walkItems(engine.ListItemsParams{Statuses: []engine.ItemStatus{engine.ItemDone}, Limit: 2})
	require.Len(t, done, len(perJob[a.ID]))
	require.Equal(t, []engine.ItemStatus{engine.ItemDone}, statusesOf(done))
}

// testListItemsUser: UserID restricts the listing to one owner.
func testListItemsUser(t *testing.T, e *env) {
	j := e.queuedJob(3)
	got := e.walkItems(engine.ListItemsParams{UserID: e.user.ID, Limit: 2})
	require.Len(t, got, 3)
	for _, it := range got {
		require.Equal(t, e.user.ID, it.UserID)
	}
	got = e.walkItems(engine.ListItemsParams{UserID: e.user.ID + 1000, Limit: 2})
	require.Empty(t, got, "no items of another user")
	got = e.walkItems(engine.ListItemsParams{JobID: j.ID, UserID: e.user.ID + 1000, Limit: 2})
	require.Empty(t, got, "no items of another user in this job")
}

// testListItemsWithInput: listings leave Input out unless asked.
func testListItemsWithInput(t *testing.T, e *env) {
	j := e.queuedJob(3)
	page := e.listItems(&engine.ListItemsParams{JobID: j.ID, Limit: 10})
	require.Len(t, page.Items, 3)
	for _, it := range page.Items {
		require.Nil(t, it.Input, "Input left out")
		require.Equal(t, engine.ItemPending, it.Status)
		require.Positive(t, it.Seq)
	}
	page = e.listItems(&engine.ListItemsParams{JobID: j.ID, Limit: 10, WithInput: true})
	require.Len(t, page.Items, 3)
	for _, it := range page.Items {
		requireJSON(t, rowJSON(it.Seq), it.Input, "Input with WithInput")
	}
}
