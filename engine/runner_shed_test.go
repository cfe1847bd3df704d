package engine_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// slowingProc takes fast for its first n calls and slow after: a vendor
// whose latency jumps.
type slowingProc struct {
	calls      atomic.Int64
	n          int64
	fast, slow time.Duration
}

func (p *slowingProc) Process(ctx context.Context, t *engine.Task) (json.RawMessage, error) {
	d := p.fast
	if p.calls.Add(1) > p.n {
		d = p.slow
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return t.Input, nil
}

// When the item time jumps (1 ms → 40 ms), the items claimed at the old
// pace are far more than the look-ahead now allows: the runner gives the
// excess back (no attempt charged) instead of holding it for seconds, and
// every item still ends DONE after exactly one attempt. Without shedding
// Released stays 0 (the runner holds all of them until they ran).
func TestRunnerGivesBackQueuedItemsWhenItemTimeJumps(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	proc := &slowingProc{n: 150, fast: time.Millisecond, slow: 40 * time.Millisecond}
	reg := testRegistry()
	reg.Register("slowing", func(json.RawMessage) (engine.Processor, error) { return proc, nil })
	p := &engine.Pipeline{Name: "slowing", Stages: []engine.Stage{{Processor: "slowing"}}}
	require.NoError(t, p.Validate(reg))
	_, err := s.PutPipeline(t.Context(), &engine.PutPipelineParams{Pipeline: p, Now: time.Now()})
	require.NoError(t, err)
	const n = 400
	job := enqueue(t, newIngester(t, s, nil), "slowing", n)

	sum := drain(t, s, engine.RunnerConfig{Registry: reg, Concurrency: 4, LookAhead: 200 * time.Millisecond})
	require.Positive(t, sum.Released, "queued items beyond the look-ahead are given back after the jump")
	require.Zero(t, sum.Stale)
	require.Zero(t, sum.Reaped)
	require.Equal(t, engine.ItemCounts{Done: n}, getJob(t, s, job.ID).Counts)
	for _, it := range scanItems(t, s, job.ID) {
		require.Equal(t, 1, it.Attempts, "item %d: a released item is not charged an attempt", it.ID)
		a, err := s.ListAttempts(t.Context(), it.ID)
		require.NoError(t, err)
		require.Len(t, a, 1, "item %d", it.ID)
	}
	requireNoProcessing(t, s)
}
