package engine_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// stageTally counts, per stage, the items in process and done, and the most
// ever in process at once.
type stageTally struct {
	inProcess, most, done [2]atomic.Int64
}

type tallyProc struct {
	tally *stageTally
	stage int
	delay time.Duration
}

func (p *tallyProc) Process(ctx context.Context, t *engine.Task) (json.RawMessage, error) {
	n := p.tally.inProcess[p.stage].Add(1)
	for {
		m := p.tally.most[p.stage].Load()
		if n <= m || p.tally.most[p.stage].CompareAndSwap(m, n) {
			break
		}
	}
	defer p.tally.inProcess[p.stage].Add(-1)
	defer p.tally.done[p.stage].Add(1)
	if p.delay > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(p.delay):
		}
	}
	return t.Input, nil
}

// tallyRegistry registers tally0 (stage 0, instant) and slow1 (stage 1,
// taking delay), both counting into tally.
func tallyRegistry(tally *stageTally, delay time.Duration) *engine.Registry {
	reg := testRegistry()
	reg.Register("tally0", func(json.RawMessage) (engine.Processor, error) {
		return &tallyProc{tally: tally, stage: 0}, nil
	})
	reg.Register("slow1", func(json.RawMessage) (engine.Processor, error) {
		return &tallyProc{tally: tally, stage: 1, delay: delay}, nil
	})
	return reg
}

// A stage with maxConcurrency 1 never has more than one item in process in
// a runner of 4 workers, while the other workers keep the fast stage 0
// flowing, also for a job submitted while the slow stage has a backlog.
// A share of a quarter of 4 workers bounds it the same way. Without a bound
// the slow stage takes several workers at once.
func TestRunnerStageMaxConcurrency(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		stage engine.Stage
		bound int // the limit in force for stage 1; 0 = none
	}{
		{"bounded", engine.Stage{Processor: "slow1", MaxConcurrency: 1}, 1},
		{"share", engine.Stage{Processor: "slow1", Share: 0.25}, 1}, // a quarter of 4 workers
		{"unbounded", engine.Stage{Processor: "slow1"}, 0},
	}
	for _, tc := range cases {
		bound := tc.bound
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			w := watch(s)
			tally := &stageTally{}
			reg := tallyRegistry(tally, 15*time.Millisecond)
			p := &engine.Pipeline{Name: "two", Stages: []engine.Stage{
				{Processor: "tally0"}, tc.stage}}
			require.NoError(t, p.Validate(reg))
			_, err := s.PutPipeline(t.Context(), &engine.PutPipelineParams{Pipeline: p, Now: time.Now()})
			require.NoError(t, err)
			g := newIngester(t, s, nil)
			enqueue(t, g, "two", 20)

			ctx, cancel := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			wg.Go(func() {
				_, err := newRunner(t, w, engine.RunnerConfig{Registry: reg, Concurrency: 4}).Run(ctx)
				require.NoError(t, err)
			})
			defer func() { cancel(); wg.Wait() }()

			// Once the slow stage has a backlog, a second job arrives: its
			// stage 0 must go through while stage 1 is still far behind.
			w.waitFor(t, func() bool { return tally.done[0].Load() == 20 && tally.done[1].Load() >= 1 })
			enqueue(t, g, "two", 20)
			w.waitFor(t, func() bool { return tally.done[0].Load() == 40 })
			if bound == 1 {
				require.Less(t, tally.done[1].Load(), int64(30),
					"stage 0 of the second job waited for the slow stage")
			}
			w.waitFor(t, func() bool { return tally.done[1].Load() == 40 && w.completed.Load() == 80 })
			if bound == 1 {
				require.Equal(t, int64(1), tally.most[1].Load(), "stage 1 items in process at once")
			} else {
				require.Greater(t, tally.most[1].Load(), int64(1), "without a bound the slow stage takes several workers")
			}
			cancel()
			wg.Wait()
			requireNoProcessing(t, s)
		})
	}
}

// stageRecorder records the stage of every claimed item, in claim order.
type stageRecorder struct {
	engine.Store
	mu     sync.Mutex
	stages []int
	claims [][]int // the stages of each claim
}

func (s *stageRecorder) ClaimItems(ctx context.Context, p *engine.ClaimItemsParams) ([]*engine.Item, error) {
	items, err := s.Store.ClaimItems(ctx, p)
	s.mu.Lock()
	var c []int
	for _, it := range items {
		s.stages = append(s.stages, it.Stage)
		c = append(c, it.Stage)
	}
	if len(c) > 0 {
		s.claims = append(s.claims, c)
	}
	s.mu.Unlock()
	return items, err
}

// Earlier stages are claimed first (seed 001's priority order): a claim
// takes a job's due items of stage 0, then of stage 1, and so on (the
// store's rule, storetest "stages"). Here, without hand-off so that every
// stage is claimed, the stage-0 backlog is claimed before any later stage
// and every claim is in stage order. An item that reached stage 2 may
// still be claimed before one that reached stage 1 later (it was due
// first, and no stage-1 item was due then); the test logs how many.
func TestRunnerClaimsEarlierStagesFirst(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	putPipeline(t, s, &engine.Pipeline{Name: "three", Stages: []engine.Stage{
		{Processor: "noop"}, {Processor: "noop"}, {Processor: "noop"}}})
	enqueue(t, newIngester(t, s, nil), "three", 60)
	// The clock is in milliseconds: stage 0 must not end in the
	// millisecond the job was ingested (ties go by id).
	time.Sleep(3 * time.Millisecond)
	rec := &stageRecorder{Store: s}
	sum := drain(t, rec, engine.RunnerConfig{Concurrency: 2, NoHandOff: true})
	require.Equal(t, int64(180), sum.Claimed)
	require.Len(t, rec.stages, 180)
	for i, c := range rec.claims {
		require.IsNonDecreasing(t, c, "claim %d in stage order", i)
	}
	for i, st := range rec.stages[:60] {
		require.Zero(t, st, "claim %d: the stage-0 backlog comes first", i)
	}
	// ahead: items claimed before an item of an earlier stage.
	ahead, low := 0, rec.stages[len(rec.stages)-1]
	for i := len(rec.stages) - 1; i >= 60; i-- {
		if rec.stages[i] > low {
			ahead++
		}
		low = min(low, rec.stages[i])
	}
	t.Logf("items claimed ahead of an earlier stage: %d of 120", ahead)
}

// A stage's maxInFlight holds across runners: two runners of 4 workers
// on one store never have more than 2 items of the slow stage in process
// together, and every item still goes through both stages once.
func TestRunnerStageMaxInFlightAcrossRunners(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	w := watch(s)
	tally := &stageTally{}
	reg := tallyRegistry(tally, 10*time.Millisecond)
	p := &engine.Pipeline{Name: "two", Stages: []engine.Stage{{Processor: "tally0"}, {Processor: "slow1", MaxInFlight: 2}}}
	require.NoError(t, p.Validate(reg))
	_, err := s.PutPipeline(t.Context(), &engine.PutPipelineParams{Pipeline: p, Now: time.Now()})
	require.NoError(t, err)
	job := enqueue(t, newIngester(t, s, nil), "two", 40)

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			_, err := newRunner(t, w, engine.RunnerConfig{Registry: reg, Concurrency: 4,
				WorkerID: "runner-" + string(rune('a'+i))}).Run(ctx)
			require.NoError(t, err)
		})
	}
	defer func() { cancel(); wg.Wait() }()
	w.waitFor(t, func() bool { return tally.done[1].Load() == 40 && w.completed.Load() == 80 })
	require.LessOrEqual(t, tally.most[1].Load(), int64(2), "stage 1 items in process at once, both runners together")
	require.Equal(t, int64(2), tally.most[1].Load(), "the bound is used, not just respected")
	require.Equal(t, int64(40), tally.done[0].Load())
	cancel()
	wg.Wait()
	requireNoProcessing(t, s)
	require.Equal(t, engine.JobDone, getJob(t, s, job.ID).State)
}
