package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// Every item runs both stages once. With hand-off (the default) stage 1
// is begun in the write that ends stage 0, without a claim; without it
// every stage is claimed. The records are the same.
func TestRunnerMultiStagePipeline(t *testing.T) {
	t.Parallel()
	for _, noHandOff := range []bool{false, true} {
		t.Run(map[bool]string{false: "handoff", true: "claims"}[noHandOff], func(t *testing.T) {
			t.Parallel()
			testMultiStage(t, noHandOff)
		})
	}
}

func testMultiStage(t *testing.T, noHandOff bool) {
	s := newStore(t)
	putPipeline(t, s, &engine.Pipeline{Name: "two", Stages: []engine.Stage{
		{Name: "first", Processor: "noop"}, {Name: "second", Processor: "noop"}}})
	job := enqueue(t, newIngester(t, s, nil), "two", 30)
	sum := drain(t, s, engine.RunnerConfig{NoHandOff: noHandOff})
	if noHandOff {
		require.Equal(t, int64(60), sum.Claimed)
		require.Zero(t, sum.HandedOff)
	} else {
		require.Equal(t, int64(30), sum.Claimed, "stage 1 needs no claim")
		require.Equal(t, int64(30), sum.HandedOff)
	}
	require.Equal(t, int64(60), sum.Completed)

	got := getJob(t, s, job.ID)
	require.Equal(t, engine.JobDone, got.State)
	require.Equal(t, engine.ItemCounts{Done: 30}, got.Counts)
	for _, it := range scanItems(t, s, job.ID) {
		require.Equal(t, engine.ItemDone, it.Status)
		require.Equal(t, 1, it.Stage, "the item ends at the last stage")
		require.JSONEq(t, string(it.Normalized), string(it.Result))
		require.Equal(t, 1, it.Attempts, "attempts count per stage")
		a := attempts(t, s, it.ID)
		require.Len(t, a, 2)
		require.Equal(t, engine.ItemPending, a[0].Outcome, "stage 0 hands the item on")
		require.Equal(t, engine.ItemDone, a[1].Outcome)
	}
}

// The attempt record names the stage the attempt ran, not the stage the item
// moved on to (before the fix, both attempts of a two-stage item were
// recorded as stage 1).
func TestRunnerAttemptRecordsTheStageItRan(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	putPipeline(t, s, &engine.Pipeline{Name: "two", Stages: []engine.Stage{{Processor: "noop"}, {Processor: "noop"}}})
	job := enqueue(t, newIngester(t, s, nil), "two", 1)
	drain(t, s, engine.RunnerConfig{})
	a := attempts(t, s, scanItems(t, s, job.ID)[0].ID)
	require.Len(t, a, 2)
	require.Equal(t, []int{0, 1}, []int{a[0].Stage, a[1].Stage}, "attempt 1 ran stage 0, attempt 2 ran stage 1")
	require.Equal(t, []int{1, 1}, []int{a[0].AttemptNo, a[1].AttemptNo}, "each stage numbers its own attempts")
}

// Each stage has its own retry budget. Before the fix, the policy was
// applied to the item's attempts over all stages, so a later stage started
// with part of its budget spent: 2 query variants at stage 1 got one
// attempt, and a transient failure at stage 5 was never retried.
func TestRunnerEachStageHasItsOwnRetryBudget(t *testing.T) {
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
		require.Equal(t, 2, it.Attempts)
	})
	t.Run("transient at a late stage", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		// Five noop stages, then one that fails its first attempt: with
		// one budget for the whole item (5 attempts by default), it would
		// be on attempt 6.
		stages := make([]engine.Stage, 5, 6)
		for i := range stages {
			stages[i] = engine.Stage{Processor: "noop"}
		}
		stages = append(stages, engine.Stage{Processor: "failOnce"})
		reg := testRegistry()
		var failed atomic.Bool
		reg.Register("failOnce", func(json.RawMessage) (engine.Processor, error) { return &failOnce{failed: &failed}, nil })
		p := &engine.Pipeline{Name: "long", Stages: stages, Retry: fastRetry()}
		require.NoError(t, p.Validate(reg))
		_, err := s.PutPipeline(t.Context(), &engine.PutPipelineParams{Pipeline: p, Now: time.Now()})
		require.NoError(t, err)
		job := enqueue(t, newIngester(t, s, nil), "long", 1)
		drain(t, s, engine.RunnerConfig{Registry: reg})
		it := scanItems(t, s, job.ID)[0]
		require.Equal(t, engine.ItemDone, it.Status,
			"one transient failure at stage 5 must be retried (got %s after %d attempts: %s)", it.Status, it.Attempts, it.LastError)
		require.Equal(t, 5, it.Stage)
		require.Len(t, attempts(t, s, it.ID), 7, "5 stages once, the last twice")
	})
}

// failOnce fails its first call with a transient error, then succeeds: use
// it with one item.
type failOnce struct{ failed *atomic.Bool }

func (f *failOnce) Process(_ context.Context, t *engine.Task) (json.RawMessage, error) {
	if f.failed.CompareAndSwap(false, true) {
		return nil, engine.Transient(errors.New("blip"))
	}
	return t.Input, nil
}
