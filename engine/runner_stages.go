package engine

import (
	"context"
	"sync"
)

// Per-stage bounds: a stage may cap how many of its items one runner has
// in process at once (Stage.MaxConcurrency, Stage.Share), so that a slow
// stage cannot take every worker while earlier stages have work.
//
// A worker that takes an item of a stage at its bound does not wait for a
// slot: it parks the item on the stage's gate and takes the next item from
// the local queue. A worker that finishes an item of a bounded stage hands
// its slot to the oldest parked item and runs it. Unbounded stages never
// touch a gate.

// stageKey names one stage of one pipeline.
type stageKey struct {
	pipeline string
	stage    int
}

// stageGate counts the items of one (pipeline, stage) in process and holds
// the items waiting for a slot.
type stageGate struct {
	mu      sync.Mutex
	running int
	parked  []*Item
}

// admit starts it if fewer than limit items of the stage are running, and
// parks it otherwise.
func (g *stageGate) admit(it *Item, limit int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running < max(limit, 1) {
		g.running++
		return true
	}
	g.parked = append(g.parked, it)
	return false
}

// done ends one item's slot: it returns the parked item that takes the slot
// over, or nil.
func (g *stageGate) done() *Item {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.parked) > 0 {
		next := g.parked[0]
		g.parked[0] = nil
		g.parked = g.parked[1:]
		return next
	}
	g.running--
	return nil
}

// takeParked removes and returns every parked item (at shutdown).
func (g *stageGate) takeParked() []*Item {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.parked
	g.parked = nil
	return out
}

// stageGates are a runner's gates, made on first use.
type stageGates struct {
	mu     sync.Mutex
	gates  map[stageKey]*stageGate
	parked int // items parked on every gate together, for the producer
}

func (s *stageGates) gate(k stageKey) *stageGate {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.gates[k]
	if g == nil {
		if s.gates == nil {
			s.gates = map[stageKey]*stageGate{}
		}
		g = &stageGate{}
		s.gates[k] = g
	}
	return g
}

func (s *stageGates) addParked(n int) {
	s.mu.Lock()
	s.parked += n
	s.mu.Unlock()
}

func (s *stageGates) parkedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parked
}

// drainParked removes every parked item of every gate.
func (s *stageGates) drainParked() []*Item {
	s.mu.Lock()
	gates := make([]*stageGate, 0, len(s.gates))
	for _, g := range s.gates {
		gates = append(gates, g)
	}
	s.mu.Unlock()
	var out []*Item
	for _, g := range gates {
		out = append(out, g.takeParked()...)
	}
	s.addParked(-len(out))
	return out
}

// stageLimit is the bound of a stage in a runner of concurrency workers:
// the smaller of MaxConcurrency and Share × concurrency (rounded up), 0 =
// none.
func stageLimit(st *Stage, concurrency int) int {
	limit := st.MaxConcurrency
	if st.Share > 0 && st.Share < 1 {
		n := int(st.Share*float64(concurrency) + 0.999999)
		if limit == 0 || n < limit {
			limit = max(n, 1)
		}
	}
	return limit
}

// sendOutcome hands o to the completer; until its group commit, o's item
// is processed but still in flight (Runner.awaiting).
func (r *Runner) sendOutcome(outcomes chan<- Outcome, o Outcome) {
	r.awaiting.Add(1)
	outcomes <- o
}

// runItem processes it, or parks it when its stage is at its bound; after a
// bounded item it runs the parked items its slot passes to. stopping items
// go to unstarted.
func (r *Runner) runItem(ctx context.Context, it *Item, outcomes chan<- Outcome, stopping func() bool, unstarted func(*Item)) {
	cp := r.pipes.get(ctx, it.Pipeline)
	if cp.limits == nil || it.Stage >= len(cp.limits) || cp.limits[it.Stage] == 0 {
		r.sendOutcome(outcomes, r.processWith(ctx, it, cp))
		return
	}
	g := r.gates.gate(stageKey{it.Pipeline, it.Stage})
	if !g.admit(it, cp.limits[it.Stage]) {
		r.gates.addParked(1)
		return
	}
	for {
		r.sendOutcome(outcomes, r.processWith(ctx, it, cp))
		next := g.done()
		if next == nil {
			return
		}
		r.gates.addParked(-1)
		if stopping() {
			unstarted(next)
			for _, p := range g.takeParked() {
				r.gates.addParked(-1)
				unstarted(p)
			}
			g.done()
			return
		}
		it = next
		cp = r.pipes.get(ctx, it.Pipeline)
	}
}
