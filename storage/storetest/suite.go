// Package storetest is the conformance suite every engine.Store
// implementation must pass. A store package calls Run from one of its tests
// with a factory that opens a fresh, empty, migrated store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) engine.Store {
//			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db"), sqlite.Options{})
//			require.NoError(t, err)
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Every subtest runs in parallel on its own store and drives time explicitly
// through a fake clock, so the suite never sleeps. Times are kept at
// millisecond precision because stores are allowed to keep no more.
package storetest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// Run runs the whole contract against stores made by newStore. Each call of
// newStore must return a fresh, empty, migrated store and register its own
// cleanup (closing the store) with t.Cleanup; the suite never closes stores.
func Run(t *testing.T, newStore func(t *testing.T) engine.Store) {
	groups := []struct {
		name  string
		tests []subtest
	}{
		{"pipelines", pipelineTests},
		{"jobs", jobTests},
		{"ingest", ingestTests},
		{"enqueueclaim", enqueueClaimTests},
		{"claim", claimTests},
		{"complete", completeTests},
		{"handoff", handOffTests},
		{"stages", stageTests},
		{"leases", leaseTests},
		{"items", itemTests},
		{"scan", scanTests},
		{"marks", markTests},
		{"reprocess", reprocessTests},
		{"delete", deleteTests},
		{"cap", capTests},
		{"inflight", inflightTests},
		{"concurrency", concurrencyTests},
		{"accounts", accountTests},
		{"hostrates", hostRateTests},
		{"sources", sourceTests},
		{"automation", automationTests},
		{"outbox", outboxTests},
		{"blobs", blobTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, st := range g.tests {
				t.Run(st.name, func(t *testing.T) {
					t.Parallel()
					st.fn(t, setup(t, newStore))
				})
			}
		})
	}
}

// subtest is one named check of the contract, run on a fresh bundle.
type subtest struct {
	name string
	fn   func(t *testing.T, e *env)
}

// base is the fake clock's starting time: at millisecond precision, with a
// non-zero millisecond part so that stores which drop milliseconds are caught.
var base = time.Date(2031, time.March, 4, 5, 6, 7, 891_000_000, time.UTC)

// defaultLease is the lease the helpers claim with.
const defaultLease = time.Minute

// clock is the fake time of one subtest. Only the test goroutine advances it.
type clock struct{ now time.Time }

// env is the bundle every subtest works with: a fresh store, a context, a
// fake clock and the default user.
type env struct {
	t     *testing.T
	ctx   context.Context
	s     engine.Store
	clock *clock
	user  *engine.User
}

// setup makes the bundle of one subtest on a fresh store.
func setup(t *testing.T, newStore func(t *testing.T) engine.Store) *env {
	t.Helper()
	s := newStore(t)
	require.NotNil(t, s, "newStore returned nil")
	e := &env{t: t, ctx: t.Context(), s: s, clock: &clock{now: base}}
	u, err := s.DefaultUser(e.ctx)
	require.NoError(t, err, "DefaultUser")
	e.user = u
	return e
}

// now returns the fake time.
func (e *env) now() time.Time { return e.clock.now }

// advance moves the fake time forward by d (rounded to milliseconds) and
// returns the new time.
func (e *env) advance(d time.Duration) time.Time {
	e.clock.now = e.clock.now.Add(d).Truncate(time.Millisecond)
	return e.clock.now
}

// jobOpt changes the parameters of a job made by createJob.
type jobOpt func(*engine.CreateJobParams)

// withMaxAttempts sets the job's MaxAttempts.
func withMaxAttempts(n int) jobOpt {
	return func(p *engine.CreateJobParams) { p.MaxAttempts = n }
}

// withName sets the job's name.
func withName(name string) jobOpt {
	return func(p *engine.CreateJobParams) { p.Name = name }
}

// withFile links the job to a stored file.
func withFile(id int64) jobOpt {
	return func(p *engine.CreateJobParams) { p.FileID = id }
}

// createJob creates an INGESTING job of the default user on the noop
// pipeline at the current fake time.
func (e *env) createJob(opts ...jobOpt) *engine.Job {
	e.t.Helper()
	p := &engine.CreateJobParams{
		UserID:      e.user.ID,
		Pipeline:    engine.DefaultPipeline,
		Name:        "items.csv",
		Source:      "upload",
		SourceRef:   "ref-1",
		Priority:    0,
		MaxAttempts: 5,
		Now:         e.now(),
	}
	for _, o := range opts {
		o(p)
	}
	j, err := e.s.CreateJob(e.ctx, p)
	require.NoError(e.t, err, "CreateJob")
	require.NotNil(e.t, j)
	return j
}

// sku is the SKU of row seq, as used in the JSON objects of the suite.
func sku(seq int64) string { return fmt.Sprintf("A%d", seq) }

// rowJSON is the input of row seq: {"sku":"A<seq>"}.
func rowJSON(seq int64) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"sku":%q}`, sku(seq)))
}

// normJSON is the normalised input of row seq.
func normJSON(seq int64) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"sku":%q,"n":%d}`, sku(seq), seq))
}

// resultJSON is a result for row seq.
func resultJSON(seq int64) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"sku":%q,"price":%d}`, sku(seq), seq*10))
}

// rows returns PENDING rows with Seq from..to inclusive.
func rows(from, to int64) []engine.NewItem {
	out := make([]engine.NewItem, 0, to-from+1)
	for seq := from; seq <= to; seq++ {
		out = append(out, engine.NewItem{
			Seq:        seq,
			Input:      rowJSON(seq),
			Normalized: normJSON(seq),
			Status:     engine.ItemPending,
		})
	}
	return out
}

// skippedRow returns a malformed row stored as SKIPPED.
func skippedRow(seq int64) engine.NewItem {
	return engine.NewItem{
		Seq:       seq,
		Input:     json.RawMessage(`{"raw":"bad,row"}`),
		Status:    engine.ItemSkipped,
		LastError: fmt.Sprintf("row %d: wrong number of fields", seq),
	}
}

// insert stores items in the INGESTING job at the current fake time.
func (e *env) insert(jobID int64, items []engine.NewItem) {
	e.t.Helper()
	err := e.s.InsertItems(e.ctx, &engine.InsertItemsParams{JobID: jobID, Items: items, Now: e.now()})
	require.NoError(e.t, err, "InsertItems")
}

// finish ends the job's ingest at the current fake time.
func (e *env) finish(jobID int64) *engine.Job {
	e.t.Helper()
	j, err := e.s.FinishIngest(e.ctx, &engine.FinishIngestParams{JobID: jobID, Now: e.now()})
	require.NoError(e.t, err, "FinishIngest")
	require.NotNil(e.t, j)
	return j
}

// queuedJob creates a job with n PENDING rows (Seq 1..n), inserted in
// batches of at most 500, and finishes its ingest: the job is QUEUED.
func (e *env) queuedJob(n int64, opts ...jobOpt) *engine.Job {
	e.t.Helper()
	j := e.createJob(opts...)
	for from := int64(1); from <= n; from += 500 {
		e.insert(j.ID, rows(from, min(from+499, n)))
	}
	j = e.finish(j.ID)
	require.Equal(e.t, engine.JobQueued, j.State)
	return j
}

// job returns the stored job.
func (e *env) job(id int64) *engine.Job {
	e.t.Helper()
	j, err := e.s.GetJob(e.ctx, id)
	require.NoError(e.t, err, "GetJob %d", id)
	require.NotNil(e.t, j)
	return j
}

// item returns the stored item.
func (e *env) item(id int64) *engine.Item {
	e.t.Helper()
	it, err := e.s.GetItem(e.ctx, id)
	require.NoError(e.t, err, "GetItem %d", id)
	require.NotNil(e.t, it)
	return it
}

// items returns every item of the job in seq order, with inputs.
func (e *env) items(jobID int64) []*engine.Item {
	e.t.Helper()
	var out []*engine.Item
	err := e.s.ScanItems(e.ctx, &engine.ScanItemsParams{JobID: jobID, WithInput: true}, func(it *engine.Item) error {
		out = append(out, it)
		return nil
	})
	require.NoError(e.t, err, "ScanItems")
	slices.SortFunc(out, func(a, b *engine.Item) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// itemIDs returns the IDs of items.
func itemIDs(items []*engine.Item) []int64 {
	out := make([]int64, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

// seqs returns the Seq of items, sorted.
func seqs(items []*engine.Item) []int64 {
	out := make([]int64, len(items))
	for i, it := range items {
		out[i] = it.Seq
	}
	slices.Sort(out)
	return out
}

// seqRange returns from..to inclusive.
func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// claim claims up to limit items for worker at the current fake time with
// the default lease and fairness.
func (e *env) claim(worker string, limit int) []*engine.Item {
	e.t.Helper()
	items, err := e.s.ClaimItems(e.ctx, &engine.ClaimItemsParams{
		WorkerID: worker,
		Limit:    limit,
		LeaseFor: defaultLease,
		Now:      e.now(),
	})
	require.NoError(e.t, err, "ClaimItems")
	return items
}

// claimAll claims until nothing is due and returns every claimed item.
func (e *env) claimAll(worker string) []*engine.Item {
	e.t.Helper()
	var out []*engine.Item
	for range 1000 {
		got := e.claim(worker, 100)
		if len(got) == 0 {
			return out
		}
		out = append(out, got...)
	}
	e.t.Fatal("claimAll: claims never ran dry")
	return nil
}

// outcome returns an outcome of a claimed item with status st, as a worker
// builds it: the claimed attempt, stage and strategy kept, started now.
func (e *env) outcome(it *engine.Item, st engine.ItemStatus) engine.Outcome {
	o := engine.Outcome{
		ItemID:    it.ID,
		JobID:     it.JobID,
		Attempt:   it.Attempts,
		Status:    st,
		Stage:     it.Stage,
		Strategy:  it.Strategy,
		StartedAt: e.now(),
		Duration:  25 * time.Millisecond,
	}
	switch st {
	case engine.ItemDone:
		o.Result = resultJSON(it.Seq)
	case engine.ItemError:
		o.ErrorClass = engine.ClassPermanent
		o.Error = fmt.Sprintf("%s: rejected", sku(it.Seq))
	case engine.ItemNotFound:
		o.ErrorClass = engine.ClassNotFound
		o.Error = fmt.Sprintf("%s: no match", sku(it.Seq))
	case engine.ItemPending:
		o.ErrorClass = engine.ClassTransient
		o.Error = "timeout"
		o.RunAt = e.now().Add(30 * time.Second)
	}
	return o
}

// complete applies outcomes for worker at the current fake time.
func (e *env) complete(worker string, outcomes ...engine.Outcome) *engine.CompleteItemsResult {
	e.t.Helper()
	res, err := e.s.CompleteItems(e.ctx, &engine.CompleteItemsParams{WorkerID: worker, Outcomes: outcomes, Now: e.now()})
	require.NoError(e.t, err, "CompleteItems")
	require.NotNil(e.t, res)
	return res
}

// completeAll completes every item with status st for worker and requires
// every outcome to be applied.
func (e *env) completeAll(worker string, items []*engine.Item, st engine.ItemStatus) *engine.CompleteItemsResult {
	e.t.Helper()
	outs := make([]engine.Outcome, len(items))
	for i, it := range items {
		outs[i] = e.outcome(it, st)
	}
	res := e.complete(worker, outs...)
	require.Equal(e.t, len(items), res.Applied, "Applied")
	require.Empty(e.t, res.Stale, "Stale")
	return res
}

// requireCounts checks the job's stored counters.
func (e *env) requireCounts(jobID int64, want engine.ItemCounts) {
	e.t.Helper()
	require.Equal(e.t, want, e.job(jobID).Counts, "counts of job %d", jobID)
}

// requireTime checks that got is the instant want, at millisecond precision.
func requireTime(t *testing.T, want, got time.Time, msgAndArgs ...any) {
	t.Helper()
	require.False(t, got.IsZero(), msgAndArgs...)
	require.Equal(t, want.UnixMilli(), got.UnixMilli(), msgAndArgs...)
}

// requireTimePtr checks that got is set and is the instant want.
func requireTimePtr(t *testing.T, want time.Time, got *time.Time, msgAndArgs ...any) {
	t.Helper()
	require.NotNil(t, got, msgAndArgs...)
	requireTime(t, want, *got, msgAndArgs...)
}

// requireJSON checks that got is JSON equivalent to want.
func requireJSON(t *testing.T, want, got json.RawMessage, msgAndArgs ...any) {
	t.Helper()
	require.NotEmpty(t, got, msgAndArgs...)
	require.JSONEq(t, string(want), string(got), msgAndArgs...)
}

// requireNotFound checks that err means "no such thing".
func requireNotFound(t *testing.T, err error, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	require.True(t, engine.IsNotFound(err), "want a not-found error, got %v", err)
}

// requireConflict checks that err is an ECONFLICT error.
func requireConflict(t *testing.T, err error, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	require.Equal(t, engine.ECONFLICT, engine.ErrorCode(err), "want ECONFLICT, got %v", err)
}

// byJob groups items by job ID.
func byJob(items []*engine.Item) map[int64][]*engine.Item {
	out := map[int64][]*engine.Item{}
	for _, it := range items {
		out[it.JobID] = append(out[it.JobID], it)
	}
	return out
}
