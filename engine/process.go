package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// compiledPipeline is a pipeline with its processors built.
type compiledPipeline struct {
	p        *Pipeline
	procs    []Processor
	variants []int
	// limits are the stages' bounds in this runner (stageLimit); nil when
	// no stage has one.
	limits []int
	err    error // the pipeline is gone or its config no longer builds
	loaded time.Time
}

// pipelineCache keeps built pipelines for a few seconds so that a change
// made with `sluice pipeline apply` reaches running workers soon.
type pipelineCache struct {
	store Store
	reg   *Registry
	clock Clock
	// concurrency is the runner's worker count, for Stage.Share.
	concurrency int
	mu          sync.Mutex
	entries     map[string]*compiledPipeline
}

const pipelineTTL = 5 * time.Second

func (c *pipelineCache) get(ctx context.Context, name string) *compiledPipeline {
	now := c.clock.Now()
	c.mu.Lock()
	e := c.entries[name]
	c.mu.Unlock()
	if e != nil && now.Sub(e.loaded) < pipelineTTL {
		return e
	}
	e = &compiledPipeline{loaded: now}
	p, err := c.store.GetPipeline(ctx, name)
	switch {
	case IsNotFound(err):
		e.err = Permanent(fmt.Errorf("pipeline %q no longer exists", name))
	case err != nil:
		e.err = Transient(fmt.Errorf("load pipeline %q: %w", name, err))
		e.loaded = time.Time{} // try again next time
	default:
		e.p = p
		for i, st := range p.Stages {
			proc, err := c.reg.New(st.Processor, st.Config)
			if err != nil {
				e.err = Permanent(fmt.Errorf("pipeline %q stage %d: %w", name, i, err))
				break
			}
			v := 0
			if vv, ok := proc.(Variants); ok {
				v = vv.Variants()
			}
			e.procs = append(e.procs, proc)
			e.variants = append(e.variants, v)
			if l := stageLimit(&p.Stages[i], c.concurrency); l > 0 {
				if e.limits == nil {
					e.limits = make([]int, len(p.Stages))
				}
				e.limits[i] = l
			}
		}
	}
	c.mu.Lock()
	c.entries[name] = e
	c.mu.Unlock()
	return e
}

// process runs one attempt of one item and decides what happens next.
func (r *Runner) process(ctx context.Context, it *Item) Outcome {
	return r.processWith(ctx, it, r.pipes.get(ctx, it.Pipeline))
}

// processWith is process with the item's pipeline already looked up.
func (r *Runner) processWith(ctx context.Context, it *Item, cp *compiledPipeline) Outcome {
	startedAt := r.clock.Now()
	o := Outcome{ItemID: it.ID, JobID: it.JobID, Attempt: it.Attempts, Stage: it.Stage, NextStage: it.Stage,
		Strategy: it.Strategy, StartedAt: startedAt}
	var result []byte
	var err error
	variants := 0
	var policy RetryPolicy
	switch {
	case cp.err != nil:
		err = cp.err
		policy = DefaultRetryPolicy()
	case it.Stage >= len(cp.procs):
		err = Permanent(fmt.Errorf("pipeline %q has no stage %d (it changed since the item started)", it.Pipeline, it.Stage))
		policy = cp.p.RetryFor(0)
	default:
		input := it.Normalized
		if it.Stage > 0 && len(it.Result) > 0 {
			input = it.Result
		}
		variants = cp.variants[it.Stage]
		policy = cp.p.RetryFor(it.Stage)
		task := &Task{Item: it, Input: input, Attempt: it.Attempts, Strategy: it.Strategy}
		t0 := time.Now()
		result, err = safeProcess(ctx, cp.procs[it.Stage], task)
		r.claim.ObserveItem(time.Since(t0))
		o.Detail = task.Detail
	}
	now := r.clock.Now()
	o.Duration = now.Sub(startedAt)
	if err == nil {
		o.Result = result
		if cp.p != nil && it.Stage+1 < len(cp.procs) {
			o.Status, o.NextStage, o.RunAt, o.Strategy = ItemPending, it.Stage+1, now, 0
			if r.mayHandOff(cp, o.NextStage) {
				o.HandOff, o.LeaseUntil, o.item = true, now.Add(r.lease()), it
			}
			r.debug(ctx, "item advanced to next stage", it, "stage", o.NextStage)
		} else {
			o.Status = ItemDone
			r.debug(ctx, "item done", it)
		}
		return o
	}
	r.rndMu.Lock()
	d := policy.Decide(err, it.Attempts, it.Strategy, variants, now, r.rnd)
	r.rndMu.Unlock()
	o.ErrorClass = ClassOf(err)
	o.Error = err.Error()
	o.Strategy = d.NextStrategy
	var fe *Failure
	if asFailure(err, &fe) && fe.Detail != nil {
		o.Detail = fe.Detail
	}
	if d.Retry {
		o.Status, o.RunAt = ItemPending, d.RunAt
		r.log.Info("item failed; retry scheduled", "job_id", it.JobID, "item_id", it.ID, "attempt", it.Attempts,
			"error_class", o.ErrorClass, "err", o.Error, "run_at", d.RunAt)
	} else {
		o.Status = d.Status
		level := slog.LevelWarn
		if o.Status == ItemNotFound {
			level = slog.LevelInfo // an answer, not a fault
		}
		r.log.Log(ctx, level, "item failed", "job_id", it.JobID, "item_id", it.ID, "attempt", it.Attempts,
			"error_class", o.ErrorClass, "err", o.Error, "status", o.Status)
	}
	return o
}

func (r *Runner) debug(ctx context.Context, msg string, it *Item, args ...any) {
	if !r.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	r.log.Debug(msg, append([]any{"job_id", it.JobID, "item_id", it.ID, "attempt", it.Attempts}, args...)...)
}

// safeProcess runs one attempt and turns a panic into a permanent failure of
// that item: a processor bug must not take the worker, and every other item
// it holds, down with it.
func safeProcess(ctx context.Context, p Processor, t *Task) (res json.RawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = nil, Permanent(fmt.Errorf("processor panicked: %v", v))
		}
	}()
	return p.Process(ctx, t)
}
