package storetest

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// concurrencyTests cover many workers on one store.
var concurrencyTests = []subtest{
	{"ClaimCompleteNoDuplicates", testConcurrentClaimComplete},
	{"ClaimsKeepLimits", testConcurrentClaimsKeepLimits},
}

// testConcurrentClaimComplete: four workers claim and complete a 2,000-item
// job at the same time; every item is completed exactly once and never held
// by two workers.
func testConcurrentClaimComplete(t *testing.T, e *env) {
	const (
		total   = 2000
		workers = 4
		limit   = 50
	)
	j := e.queuedJob(total)
	now := e.now() // the clock stands still: no lease expires

	var (
		mu        sync.Mutex
		holder    = map[int64]string{} // item -> worker while PROCESSING
		completed = map[int64]int{}
		problems  []string
	)
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}

	work := func(worker string) {
		for spins := 0; spins < 100_000; spins++ {
			items, err := e.s.ClaimItems(e.ctx, &engine.ClaimItemsParams{WorkerID: worker, Limit: limit, LeaseFor: defaultLease, Now: now})
			if err != nil {
				report("%s: ClaimItems: %v", worker, err)
				return
			}
			if len(items) == 0 {
				job, err := e.s.GetJob(e.ctx, j.ID)
				if err != nil {
					report("%s: GetJob: %v", worker, err)
					return
				}
				if job.State == engine.JobDone {
					return
				}
				runtime.Gosched()
				continue
			}
			outs := make([]engine.Outcome, len(items))
			mu.Lock()
			for i, it := range items {
				if other, ok := holder[it.ID]; ok {
					problems = append(problems, fmt.Sprintf("item %d claimed by %s while held by %s", it.ID, worker, other))
				}
				if completed[it.ID] > 0 {
					problems = append(problems, fmt.Sprintf("item %d claimed by %s after it was completed", it.ID, worker))
				}
				holder[it.ID] = worker
				outs[i] = engine.Outcome{
					ItemID: it.ID, JobID: it.JobID, Attempt: it.Attempts, Status: engine.ItemDone,
					Result: resultJSON(it.Seq), StartedAt: now,
				}
			}
			mu.Unlock()
			res, err := e.s.CompleteItems(e.ctx, &engine.CompleteItemsParams{WorkerID: worker, Outcomes: outs, Now: now})
			if err != nil {
				report("%s: CompleteItems: %v", worker, err)
				return
			}
			if res.Applied != len(outs) || len(res.Stale) != 0 {
				report("%s: CompleteItems applied %d of %d, stale %v", worker, res.Applied, len(outs), res.Stale)
			}
			mu.Lock()
			for _, it := range items {
				delete(holder, it.ID)
				completed[it.ID]++
			}
			mu.Unlock()
		}
		report("%s: gave up before the job was DONE", worker)
	}

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { work(fmt.Sprintf("worker-%d", w)) })
	}
	wg.Wait()

	require.Empty(t, problems)
	require.Len(t, completed, total, "every item completed")
	for id, n := range completed {
		require.Equal(t, 1, n, "item %d completed %d times", id, n)
	}
	got := e.job(j.ID)
	require.Equal(t, engine.JobDone, got.State)
	require.Equal(t, int64(total), got.Counts.Done)
	require.Equal(t, engine.ItemCounts{Done: total}, got.Counts)
	for _, it := range e.items(j.ID) {
		require.Equal(t, engine.ItemDone, it.Status)
		require.Equal(t, 1, it.Attempts)
	}
}

// testConcurrentClaimsKeepLimits: workers claiming at the same moment
// never take a job past its in-flight limit or its spending cap together,
// though each claim alone stays within them (a store must read the
// budget and take the items atomically).
func testConcurrentClaimsKeepLimits(t *testing.T, e *env) {
	const workers = 4
	capped := e.queuedJob(200, func(p *engine.CreateJobParams) { p.RequestCap = 7 })
	limited := e.queuedJob(200)
	claimAll := func(p engine.ClaimItemsParams) map[int64]int {
		var mu sync.Mutex
		got := map[int64]int{}
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for range 5 {
					q := p
					q.WorkerID = fmt.Sprintf("worker-%d", w)
					items, err := e.s.ClaimItems(e.ctx, &q)
					if err != nil {
						t.Errorf("ClaimItems: %v", err)
						return
					}
					mu.Lock()
					for _, it := range items {
						got[it.JobID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return got
	}
	got := claimAll(engine.ClaimItemsParams{Limit: 5, LeaseFor: defaultLease, Now: e.now(), JobID: capped.ID})
	require.Equal(t, 7, got[capped.ID], "the cap's budget, claimed once in all")
	got = claimAll(engine.ClaimItemsParams{Limit: 5, LeaseFor: defaultLease, Now: e.now(), JobID: limited.ID, MaxInFlightPerJob: 9})
	require.Equal(t, 9, got[limited.ID], "the in-flight limit holds across workers")
	require.Equal(t, int64(9), e.job(limited.ID).Counts.Processing)
	require.Equal(t, int64(7), e.job(capped.ID).Counts.Processing)
}
