package engine_test

// Tests in this file FAIL on purpose: each pins down a bug in non-test code
// that was found while writing the engine tests and left for the owner of
// that code to fix. Each test names the code at fault and what it should do.
// Delete the BUG prefix once the bug is fixed.

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// BUG (engine/process.go, Runner.process): the retry policy is applied to
// the item's attempts over all stages (it.Attempts), not to the attempts
// made at the current stage. Stores keep attempts across stages (an item at
// stage 1 is on attempt 2 at least), so a later stage starts with part of
// its budget already spent: a processor with 2 query variants at stage 1
// gets one attempt instead of one per variant, and a transient failure at
// stage N (N ≥ MaxAttempts-1) is never retried.
func TestBUGRetryBudgetSpentByEarlierStages(t *testing.T) {
	t.Parallel()
	t.Run("not found variants at stage 1", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		putPipeline(t, s, &engine.Pipeline{Name: "enrich", Retry: fastRetry(), Stages: []engine.Stage{
			{Processor: "noop"},
			{Processor: "variants", Config: json.RawMessage(`{"variants":2,"succeedAt":1}`)},
		}})
		job := enqueue(t, newIngester(t, s, nil), "enrich", 1)
		drain(t, s, engine.RunnerConfig{Registry: testRegistry()})
		it := scanItems(t, s, job.ID)[0]
		require.Equal(t, engine.ItemDone, it.Status,
			"stage 1 has 2 variants: NOT_FOUND with variant 0 must be retried with variant 1 (got %s: %s)", it.Status, it.LastError)
		require.JSONEq(t, `{"foundWith":1}`, string(it.Result))
	})
	t.Run("transient at a late stage", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		// Five noop stages, then one that fails its first attempt. With the
		// default budget (5 attempts) the last stage is on attempt 6.
		stages := make([]engine.Stage, 5, 6)
		for i := range stages {
			stages[i] = engine.Stage{Processor: "noop"}
		}
		stages = append(stages, engine.Stage{Processor: "failOnce"})
		reg := testRegistry()
		var failed bool
		reg.Register("failOnce", func(json.RawMessage) (engine.Processor, error) { return &failOnce{failed: &failed}, nil })
		p := &engine.Pipeline{Name: "long", Stages: stages, Retry: fastRetry()}
		require.NoError(t, p.Validate(reg))
		_, err := s.PutPipeline(t.Context(), &engine.PutPipelineParams{Pipeline: p, Now: time.Now()})
		require.NoError(t, err)
		job := enqueue(t, newIngester(t, s, nil), "long", 1)
		drain(t, s, engine.RunnerConfig{Registry: reg, Concurrency: 1})
		it := scanItems(t, s, job.ID)[0]
		require.Equal(t, engine.ItemDone, it.Status,
			"one transient failure at stage 5 must be retried (got %s after %d attempts: %s)", it.Status, it.Attempts, it.LastError)
	})
}

// failOnce fails its first call with a transient error, then succeeds. It
// is only used with Concurrency 1 and one item.
type failOnce struct{ failed *bool }

func (f *failOnce) Process(_ context.Context, t *engine.Task) (json.RawMessage, error) {
	if !*f.failed {
		*f.failed = true
		return nil, engine.Transient(errors.New("blip"))
	}
	return t.Input, nil
}

// BUG (storage/sqlite/complete.go, CompleteItems): the attempt record of an
// attempt that moved an item on to the next stage is written with the
// outcome's Stage, which is the NEXT stage, so the audit trail says stage 0
// never ran and stage 1 ran twice. (The reaper records the stage attempted;
// engine.Outcome has no field for the stage the attempt ran, so the fix
// needs one, or the store must record the item's stage before the update.)
func TestBUGAttemptRecordsTheStageItRan(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	putPipeline(t, s, &engine.Pipeline{Name: "two", Stages: []engine.Stage{{Processor: "noop"}, {Processor: "noop"}}})
	job := enqueue(t, newIngester(t, s, nil), "two", 1)
	drain(t, s, engine.RunnerConfig{})
	a := attempts(t, s, scanItems(t, s, job.ID)[0].ID)
	require.Len(t, a, 2)
	require.Equal(t, []int{0, 1}, []int{a[0].Stage, a[1].Stage}, "attempt 1 ran stage 0, attempt 2 ran stage 1")
}

// BUG (storage/sqlite/claim.go, claimJobsSQL): ClaimItems picks the
// MaxJobs runnable jobs with pending_items > 0 by priority first, whether
// or not any of their items is due. When MaxJobs (or more) higher-priority
// jobs have only retries waiting (run_at in the future), they fill every
// slot, claim nothing, and a lower-priority job whose items are due gets
// nothing until those retries come due: workers sit idle (and a draining
// runner spins on claim + QueueSummary). The job selection should only
// consider jobs with a due PENDING item (e.g. EXISTS (... status='PENDING'
// AND updated_at <= now)).
func TestBUGLowPriorityJobStarvedByRetryingHighPriorityJobs(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	hi := noopPipeline("hi", `{"failEvery":1}`)
	hi.Priority = 10
	hi.Retry.Transient.Delays = []engine.Duration{engine.Duration(time.Minute)}
	putPipeline(t, s, hi)
	g := newIngester(t, s, nil)
	for range 2 {
		enqueue(t, g, "hi", 1)
	}
	w := watch(s)
	finished := make(chan int64, 1)
	r := newRunner(t, w, engine.RunnerConfig{MaxJobsPerClaim: 2, OnJobFinished: func(id int64) { finished <- id }})
	runInBackground(t, r)
	// Both high-priority items failed once and wait a minute for a retry.
	w.waitFor(t, func() bool { return w.completed.Load() >= 2 })

	low := enqueue(t, g, engine.DefaultPipeline, 5)
	select {
	case id := <-finished:
		require.Equal(t, low.ID, id)
	case <-time.After(3 * time.Second):
		t.Fatalf("a job with 5 due items was not processed in 3s while the only other work was 2 retries due in a minute "+
			"(claims that found nothing: %d)", w.emptyClaims.Load())
	}
}

// BUG (engine/runner.go, Runner.produce): on a poll tick the runner means
// to skip the claim when the store has not changed (ChangeCounter) and the
// last claim is less than a second old, but the `continue` that should skip
// it sits inside the select at the end of the loop body, so it just starts
// the next iteration, which claims. An idle runner therefore runs a claim
// (a write transaction) on every PollInterval tick instead of about once a
// second.
func TestBUGIdleRunnerClaimsOnEveryPoll(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	w := watch(s)
	r := newRunner(t, w, engine.RunnerConfig{PollInterval: 5 * time.Millisecond})
	stop := runInBackground(t, r)
	w.waitFor(t, func() bool { return w.emptyClaims.Load() > 0 })
	time.Sleep(300 * time.Millisecond) // observing that nothing happens needs time to pass
	stop(5 * time.Second)
	require.LessOrEqual(t, w.emptyClaims.Load(), int64(3),
		"an idle runner with nothing changed should not claim on every 5ms poll")
}

// BUG (engine/runner.go, Run and Summary): Run writes r.started while
// Summary, documented as "the counters so far" and built from atomics for
// concurrent use, reads it without synchronisation: a data race whenever
// Summary is called while Run starts (the race detector reports it; this
// test fails only under -race). started should be an atomic (e.g. unix ns in
// an atomic.Int64) or set under a lock.
func TestBUGRunnerSummaryRacesWithRun(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	enqueue(t, newIngester(t, s, nil), engine.DefaultPipeline, 5)
	r := newRunner(t, s, engine.RunnerConfig{})
	stop := runInBackground(t, r)
	deadline := time.Now().Add(10 * time.Second)
	for r.Summary().Completed < 5 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	stop(5 * time.Second)
	require.Equal(t, int64(5), r.Summary().Completed)
}
