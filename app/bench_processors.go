package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/adapt"
	"github.com/sluicehq/sluice/engine/hostlimit"
	"github.com/sluicehq/sluice/engine/httpproc"
	"github.com/sluicehq/sluice/engine/imageproc"
	"github.com/sluicehq/sluice/engine/vendorsim"
	"github.com/sluicehq/sluice/storage/sqlite"
)

// The processor benchmarks (issue 3): per-host pacing against the vendor
// simulator over real HTTP, a jump of the vendor's latency, a 3-stage noop
// pipeline against a 1-stage one, and camera-sized JPEGs through the image
// pipeline.

// processorBenchNames are the benchmarks of this file, in the order they run.
var processorBenchNames = []string{"hostlimit", "latencyjump", "stages", "images"}

func isProcessorBench(name string) bool { return slices.Contains(processorBenchNames, name) }

// procOpts are the settings of the processor benchmarks (flags of bench).
type procOpts struct {
	hostRate    float64
	hostFor     time.Duration
	hostWarmup  time.Duration
	restartFor  time.Duration
	hostLatency time.Duration

	jumpFrom, jumpTo      time.Duration
	jumpBefore, jumpAfter time.Duration

	stageItems, stageRounds int

	images    int
	imageSize string
}

func (o *procOpts) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Float64Var(&o.hostRate, "host-rate", 50, "hostlimit: the simulated vendor's limit, requests per second")
	f.DurationVar(&o.hostFor, "host-for", 30*time.Second, "hostlimit: length of the first run")
	f.DurationVar(&o.hostWarmup, "host-warmup", 10*time.Second, "hostlimit: learning time left out of the sustained rate")
	f.DurationVar(&o.restartFor, "restart-for", 10*time.Second, "hostlimit: length of the run after the restart")
	f.DurationVar(&o.hostLatency, "host-latency", 20*time.Millisecond, "hostlimit: the simulated vendor's latency")
	f.DurationVar(&o.jumpFrom, "jump-from", 20*time.Millisecond, "latencyjump: the vendor's latency before the jump")
	f.DurationVar(&o.jumpTo, "jump-to", 500*time.Millisecond, "latencyjump: the vendor's latency after the jump")
	f.DurationVar(&o.jumpBefore, "jump-before", 15*time.Second, "latencyjump: run time before the jump")
	f.DurationVar(&o.jumpAfter, "jump-after", 20*time.Second, "latencyjump: run time after the jump")
	f.IntVar(&o.stageItems, "stage-items", 10_000, "stages: items per run (at most 10,000)")
	f.IntVar(&o.stageRounds, "stage-rounds", 3, "stages: runs of each pipeline (the median counts)")
	f.IntVar(&o.images, "images", 1000, "images: number of JPEGs")
	f.StringVar(&o.imageSize, "image-size", "4000x3000", "images: WIDTHxHEIGHT of each JPEG")
}

type namedBench struct {
	name string
	fn   func(context.Context) (benchResult, error)
}

// processorBenches returns the benchmarks of this file bound to b and o.
func (b *bench) processorBenches(o *procOpts) []namedBench {
	return []namedBench{
		{"hostlimit", func(ctx context.Context) (benchResult, error) { return b.hostlimit(ctx, o) }},
		{"latencyjump", func(ctx context.Context) (benchResult, error) { return b.latencyJump(ctx, o) }},
		{"stages", func(ctx context.Context) (benchResult, error) { return b.stages(ctx, o) }},
		{"images", func(ctx context.Context) (benchResult, error) { return b.images(ctx, o) }},
	}
}

// ---- shared helpers -------------------------------------------------------

// runnerOn returns a runner of env's settings on store (env.Store or a
// wrapper of it).
func runnerOn(env *Env, store engine.Store) (*engine.Runner, error) {
	return engine.NewRunner(engine.RunnerConfig{
		Store: store, Registry: env.Registry, Notifier: env.Notifier, Logger: env.Log,
		Concurrency: env.Tuning.Concurrency, Claim: env.Tuning.Claim, Lease: env.Tuning.Lease,
		ReapInterval: env.Tuning.ReapInterval, StaleIngestAfter: env.Tuning.StaleIngestAfter,
	})
}

// running is a runner started in the background.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	sum    *engine.RunSummary
	err    error
}

func startRunner(ctx context.Context, r *engine.Runner) *running {
	rctx, cancel := context.WithCancel(ctx)
	rn := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(rn.done)
		rn.sum, rn.err = r.Run(rctx)
	}()
	return rn
}

// stop ends the run (in-flight items finish) and returns its summary.
func (rn *running) stop() (*engine.RunSummary, error) {
	rn.cancel()
	<-rn.done
	return rn.sum, rn.err
}

// putHTTPPipeline stores a one-stage http pipeline named name that looks
// SKUs up at the simulator base.
func putHTTPPipeline(ctx context.Context, env *Env, name, base string) error {
	cfg := fmt.Sprintf(`{"url":%q,"map":{"name":"product.name","price":"product.price"}}`, base+"/lookup?sku={{.sku}}")
	p := &engine.Pipeline{Name: name, Stages: []engine.Stage{{Processor: httpproc.Kind, Config: json.RawMessage(cfg)}}}
	if err := p.Validate(env.Registry); err != nil {
		return err
	}
	_, err := env.Store.PutPipeline(ctx, &engine.PutPipelineParams{Pipeline: p, Now: time.Now()})
	return err
}

// enqueueSKUs stores n items {"sku":"P<i>"} for pipeline as jobs of at most
// engine.MaxEnqueueRows items.
func enqueueSKUs(ctx context.Context, env *Env, pipeline string, n int) error {
	ing, err := env.Ingester()
	if err != nil {
		return err
	}
	for first := 0; first < n; first += engine.MaxEnqueueRows {
		rows := make([]json.RawMessage, 0, min(n-first, engine.MaxEnqueueRows))
		for i := first; i < n && len(rows) < cap(rows); i++ {
			rows = append(rows, json.RawMessage(fmt.Sprintf(`{"sku":"P%07d"}`, i+1)))
		}
		if _, err := ing.Enqueue(ctx, engine.EnqueueRequest{Pipeline: pipeline, Name: pipeline, Rows: rows}); err != nil {
			return err
		}
	}
	return nil
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func medianInt(v []int) int {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianF(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func round1(f float64) float64 { return float64(int64(f*10+0.5)) / 10 }

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// ---- hostlimit --------------------------------------------------------------

// vendorSample is the simulator's counters at one moment of a run.
type vendorSample struct {
	at    time.Duration // since the run started
	stats vendorsim.Stats
	rate  float64 // the limiter's rate for the host then
	conc  int
}

// sampleVendor records the simulator's counters and the limiter's state
// every second until ctx ends.
func sampleVendor(ctx context.Context, s *vendorsim.Server, lim *hostlimit.Limiter, start time.Time) []vendorSample {
	var out []vendorSample
	take := func() {
		v := vendorSample{at: time.Since(start), stats: s.Stats()}
		if snap := lim.Snapshot(); len(snap) > 0 {
			v.rate, v.conc = snap[0].Rate, snap[0].Concurrency
		}
		out = append(out, v)
	}
	take()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			take()
			return out
		case <-t.C:
			take()
		}
	}
}

// window sums the simulator's answers between the samples nearest to from
// and to: OK answers per second and the share of 429s among all answers.
func window(samples []vendorSample, from, to time.Duration) (okPerSec, share429 float64) {
	pick := func(d time.Duration) vendorSample {
		best := samples[0]
		for _, s := range samples {
			if absDur(s.at-d) < absDur(best.at-d) {
				best = s
			}
		}
		return best
	}
	a, b := pick(from), pick(to)
	secs := (b.at - a.at).Seconds()
	if secs <= 0 {
		return 0, 0
	}
	ok := b.stats.OK - a.stats.OK
	tooMany := b.stats.TooMany - a.stats.TooMany
	answered := ok + tooMany + (b.stats.ServerErrors - a.stats.ServerErrors) + (b.stats.NotFound - a.stats.NotFound) +
		(b.stats.ClientErrors - a.stats.ClientErrors) + (b.stats.Malformed - a.stats.Malformed)
	if answered > 0 {
		share429 = float64(tooMany) / float64(answered)
	}
	return float64(ok) / secs, share429
}

func absDur(d time.Duration) time.Duration { return max(d, -d) }

// trace renders per-second OK/429 answers and the limiter's rate.
func trace(samples []vendorSample) string {
	var sb strings.Builder
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		fmt.Fprintf(&sb, " %d:%d/%d@%.0f", int(b.at.Round(time.Second)/time.Second),
			b.stats.OK-a.stats.OK, b.stats.TooMany-a.stats.TooMany, b.rate)
	}
	return strings.TrimSpace(sb.String())
}

// hostlimit: http items through the real runner, store, http processor and
// the process's per-host limiter (Env.Hosts) against a simulator limited to
// hostRate req/s. The restart is real as far as one process allows: the
// first Env (store, registry, limiter) saves its learned rates and is
// closed, and a new Env on the same data directory restores them through
// the call every command that runs workers makes (Env.keepHostRates).
func (b *bench) hostlimit(ctx context.Context, o *procOpts) (benchResult, error) {
	if o.hostWarmup >= o.hostFor {
		return benchResult{}, usagef("--host-warmup (%s) must be shorter than --host-for (%s)", o.hostWarmup, o.hostFor)
	}
	env, err := b.openEnv(ctx, "hostlimit")
	if err != nil {
		return benchResult{}, err
	}
	defer env.Close() // closing twice is harmless
	sim := vendorsim.New(vendorsim.Config{RatePerSec: o.hostRate, Latency: o.hostLatency, Seed: 7})
	defer sim.Close()
	if err := putHTTPPipeline(ctx, env, "bench-hostlimit", sim.URL()); err != nil {
		return benchResult{}, err
	}
	// Twice what the limit allows over both runs, so the queue never runs dry.
	n := int(2 * o.hostRate * (o.hostFor + o.restartFor).Seconds())
	if err := enqueueSKUs(ctx, env, "bench-hostlimit", n); err != nil {
		return benchResult{}, err
	}

	// phase runs workers on env for d the way `sluice worker` does: rates
	// restored at the start, saved every 10 s and once more at the end.
	// It returns the per-second samples and the limiter's state just after
	// the restore.
	phase := func(env *Env, d time.Duration) ([]vendorSample, []hostlimit.HostState, *engine.RunSummary, error) {
		stopKeeping := env.keepHostRates(ctx)
		restored := env.Hosts.Snapshot()
		r, err := runnerOn(env, env.Store)
		if err != nil {
			stopKeeping()
			return nil, nil, nil, err
		}
		start := time.Now()
		rn := startRunner(ctx, r)
		sctx, stopSampling := context.WithTimeout(ctx, d)
		samples := sampleVendor(sctx, sim, env.Hosts, start)
		stopSampling()
		sum, err := rn.stop()
		stopKeeping()
		if err == nil {
			err = ctx.Err()
		}
		return samples, restored, sum, err
	}
	first, _, sum1, err := phase(env, o.hostFor)
	if err != nil {
		return benchResult{}, err
	}
	learned, err := env.Store.LoadHostRates(ctx)
	if err != nil {
		return benchResult{}, err
	}
	if len(learned) != 1 {
		return benchResult{}, fmt.Errorf("%d host rates were saved, want 1", len(learned))
	}
	// The restart: everything of the first process is closed; a new Env
	// opens the same data directory.
	if err := env.Close(); err != nil {
		return benchResult{}, err
	}
	env2, err := b.openEnv(ctx, "hostlimit")
	if err != nil {
		return benchResult{}, err
	}
	defer env2.Close()
	second, restored, sum2, err := phase(env2, o.restartFor)
	if err != nil {
		return benchResult{}, err
	}
	if len(restored) != 1 {
		return benchResult{}, fmt.Errorf("the restarted limiter restored %d hosts, want 1", len(restored))
	}

	okPerSec, share := window(first, o.hostWarmup, o.hostFor)
	coldOK, coldShare := window(first, 0, o.restartFor)
	warmOK, warmShare := window(second, 0, o.restartFor)
	st := sim.Stats()
	figures := map[string]float64{
		"limitPerSec": o.hostRate, "seconds": o.hostFor.Seconds(), "warmupSeconds": o.hostWarmup.Seconds(),
		"okPerSec": round1(okPerSec), "share429Pct": round2(100 * share),
		"learnedRate": round1(learned[0].Rate), "learnedCeiling": round1(learned[0].Ceiling), "learnedConcurrency": float64(learned[0].Concurrency),
		"restoredRate": round1(restored[0].Rate), "restoredConcurrency": float64(restored[0].Concurrency),
		"coldFirstOKPerSec": round1(coldOK), "coldFirstShare429Pct": round2(100 * coldShare),
		"restartOKPerSec": round1(warmOK), "restartShare429Pct": round2(100 * warmShare), "restartSeconds": o.restartFor.Seconds(),
		"requests": float64(st.Requests), "answers429": float64(st.TooMany),
		"itemsDone": float64(sum1.ByStatus["DONE"] + sum2.ByStatus["DONE"]), "stale": float64(sum1.Stale + sum2.Stale),
	}
	pass := okPerSec >= 0.9*o.hostRate && share < 0.02 && warmOK >= 0.9*o.hostRate && warmShare < 0.02
	return benchResult{
		Name: "hostlimit", Figures: figures, Pass: boolp(pass),
		Target: fmt.Sprintf("after %s: ≥ %.0f req/s OK with < 2%% 429; after a restart ≥ %.0f req/s from the start",
			o.hostWarmup, 0.9*o.hostRate, 0.9*o.hostRate),
		Note: fmt.Sprintf("the restart closes the first store and limiter and opens new ones on the same data directory, "+
			"which restore the saved rate as the worker commands do (saved %.1f req/s, ceiling %.1f: restored at %.1f req/s, %d in flight); "+
			"coldFirst* is the first run's start, from slow start; "+
			"per second OK/429@rate: first run %s | after restart %s",
			learned[0].Rate, learned[0].Ceiling, restored[0].Rate, restored[0].Concurrency, trace(first), trace(second)),
	}, nil
}

// ---- latencyjump ------------------------------------------------------------

// leaseWatch wraps a Store to see every claim (its size and lease) and
// every lease renewal, and checks, with the processor wrapper, that no
// item's lease ran out while the item was in hand.
type leaseWatch struct {
	engine.Store
	mu      sync.Mutex
	start   time.Time
	claims  []claimSeen
	until   map[int64]time.Time // item → lease expiry as last granted
	claimAt map[int64]time.Time // item → when it was claimed
	renews  int
	// lapsed counts renewals that came after the lease had run out;
	// expiredWorked counts items whose processing ended after their
	// lease ran out.
	lapsed, expiredWorked int
	// lastOldDone is when the last item claimed before mark finished.
	mark, lastOldDone time.Time
	// releases are the runner's give-backs of unstarted items.
	releases []releaseSeen
}

type releaseSeen struct {
	at    time.Duration // since start
	items int
}

type claimSeen struct {
	at          time.Duration // since start
	limit, got  int
	lease       time.Duration
	controlSize int
}

func newLeaseWatch(s engine.Store) *leaseWatch {
	return &leaseWatch{Store: s, start: time.Now(), until: map[int64]time.Time{}, claimAt: map[int64]time.Time{}}
}

func (w *leaseWatch) ClaimItems(ctx context.Context, p *engine.ClaimItemsParams) ([]*engine.Item, error) {
	items, err := w.Store.ClaimItems(ctx, p)
	if err != nil {
		return items, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(items) > 0 {
		w.claims = append(w.claims, claimSeen{at: p.Now.Sub(w.start), limit: p.Limit, got: len(items), lease: p.LeaseFor})
	}
	for _, it := range items {
		until := p.Now.Add(p.LeaseFor)
		if it.LeaseExpiresAt != nil {
			until = *it.LeaseExpiresAt
		}
		w.until[it.ID] = until
		w.claimAt[it.ID] = p.Now
	}
	return items, nil
}

func (w *leaseWatch) RenewLeases(ctx context.Context, p *engine.RenewLeasesParams) (int, error) {
	w.mu.Lock()
	for _, id := range p.ItemIDs {
		if u, ok := w.until[id]; ok && p.Now.After(u) {
			w.lapsed++
		}
	}
	w.mu.Unlock()
	n, err := w.Store.RenewLeases(ctx, p)
	if err != nil {
		return n, err
	}
	w.mu.Lock()
	w.renews++
	for _, id := range p.ItemIDs {
		if _, ok := w.until[id]; ok {
			w.until[id] = p.Now.Add(p.LeaseFor)
		}
	}
	w.mu.Unlock()
	return n, nil
}

func (w *leaseWatch) ReleaseItems(ctx context.Context, p *engine.ReleaseItemsParams) (int, error) {
	n, err := w.Store.ReleaseItems(ctx, p)
	if err == nil {
		w.mu.Lock()
		w.releases = append(w.releases, releaseSeen{at: p.Now.Sub(w.start), items: n})
		w.mu.Unlock()
	}
	return n, err
}

// processed is called by the processor wrapper when an item's attempt ends.
func (w *leaseWatch) processed(id int64, end time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if u, ok := w.until[id]; ok && end.After(u) {
		w.expiredWorked++
	}
	if at, ok := w.claimAt[id]; ok && !w.mark.IsZero() && at.Before(w.mark) && end.After(w.lastOldDone) {
		w.lastOldDone = end
	}
}

// watchedProc reports the end of every attempt to a leaseWatch.
type watchedProc struct {
	engine.Processor
	w *leaseWatch
}

func (p watchedProc) Process(ctx context.Context, t *engine.Task) (json.RawMessage, error) {
	res, err := p.Processor.Process(ctx, t)
	p.w.processed(t.Item.ID, time.Now())
	return res, err
}

// controlSample is the claim controller's state at one moment.
type controlSample struct {
	at        time.Duration
	size      int // the size the next claim would take (look-ahead applied)
	avgItemMs float64
}

// effectiveClaim is the size of the runner's next claim as it computes it:
// the controller's size capped to LookAhead (default 500 ms) of work over
// the workers, at least one item per worker (engine/runner_claim.go).
func effectiveClaim(s adapt.ClaimSnapshot, lookAhead time.Duration) int {
	if s.AvgItemMs <= 0 {
		return s.Size
	}
	n := int(float64(lookAhead.Milliseconds()) * float64(s.Concurrency) / s.AvgItemMs)
	return min(s.Size, max(n, s.Concurrency))
}

// latencyJump: http items against an unlimited simulator whose latency
// jumps from jumpFrom to jumpTo mid-run; how fast the claim size, the
// average item time and the lease follow, and whether any lease ran out
// while its item was in hand.
func (b *bench) latencyJump(ctx context.Context, o *procOpts) (benchResult, error) {
	env, err := b.openEnv(ctx, "latencyjump")
	if err != nil {
		return benchResult{}, err
	}
	defer env.Close()
	sim := vendorsim.New(vendorsim.Config{Latency: o.jumpFrom, Seed: 11})
	defer sim.Close()
	watch := newLeaseWatch(env.Store)
	lim := hostlimit.New(hostlimit.Config{})
	httpFactory := httpproc.NewFactory(lim)
	env.Registry.Register(httpproc.Kind, func(cfg json.RawMessage) (engine.Processor, error) {
		p, err := httpFactory(cfg)
		if err != nil {
			return nil, err
		}
		return watchedProc{Processor: p, w: watch}, nil
	})
	if err := putHTTPPipeline(ctx, env, "bench-latencyjump", sim.URL()); err != nil {
		return benchResult{}, err
	}
	// Enough for the whole run at the concurrency the fast phase allows.
	conc := env.Tuning.Concurrency
	if conc == 0 {
		conc = 8
	}
	n := int(1.5*float64(conc)*(o.jumpBefore.Seconds()/o.jumpFrom.Seconds()+o.jumpAfter.Seconds()/o.jumpTo.Seconds())) + 1000
	if err := enqueueSKUs(ctx, env, "bench-latencyjump", n); err != nil {
		return benchResult{}, err
	}
	r, err := runnerOn(env, watch)
	if err != nil {
		return benchResult{}, err
	}
	const lookAhead = 500 * time.Millisecond // the runner's default LookAhead
	watch.start = time.Now()
	rn := startRunner(ctx, r)
	var samples []controlSample
	var jumpAt time.Duration
	var doneAtJump int64
	tick := time.NewTicker(100 * time.Millisecond)
	end := watch.start.Add(o.jumpBefore + o.jumpAfter)
	for now := time.Now(); now.Before(end); now = time.Now() {
		if jumpAt == 0 && now.Sub(watch.start) >= o.jumpBefore {
			sim.SetLatency(o.jumpTo)
			jumpAt = time.Since(watch.start)
			watch.mu.Lock()
			watch.mark = time.Now()
			watch.mu.Unlock()
			doneAtJump = r.Summary().Completed
		}
		s := r.ClaimController().Snapshot()
		samples = append(samples, controlSample{at: time.Since(watch.start), size: effectiveClaim(s, lookAhead), avgItemMs: s.AvgItemMs})
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		if ctx.Err() != nil {
			break
		}
	}
	tick.Stop()
	sum, err := rn.stop()
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return benchResult{}, err
	}
	if doneAtJump == 0 || sum.Completed <= doneAtJump {
		return benchResult{}, fmt.Errorf("no items completed before or after the jump (%d, %d)", doneAtJump, sum.Completed)
	}

	// Before: the last 5 s (or half) of the fast phase; after: its last half.
	span := min(5*time.Second, o.jumpBefore/2)
	var beforeSize, afterSize []int
	var beforeAvg, afterAvg []float64
	for _, s := range samples {
		switch {
		case s.at < jumpAt && s.at >= jumpAt-span:
			beforeSize, beforeAvg = append(beforeSize, s.size), append(beforeAvg, s.avgItemMs)
		case s.at >= jumpAt+o.jumpAfter/2:
			afterSize, afterAvg = append(afterSize, s.size), append(afterAvg, s.avgItemMs)
		}
	}
	sizeBefore, sizeAfter := medianInt(beforeSize), medianInt(afterSize)
	// Give-backs while the run lasted (the runner also releases what is
	// still queued when it stops).
	watch.mu.Lock()
	givenBack, firstGiveBackMs := 0, -1.0
	var relTrace []string
	for _, rel := range watch.releases {
		relTrace = append(relTrace, fmt.Sprintf("%.1fs:%d", rel.at.Seconds(), rel.items))
		if rel.at >= jumpAt && rel.at < jumpAt+o.jumpAfter {
			givenBack += rel.items
			if firstGiveBackMs < 0 {
				firstGiveBackMs = float64((rel.at - jumpAt).Milliseconds())
			}
		}
	}
	watch.mu.Unlock()
	// How long after the jump the controller's size was first at most half
	// the size before, and first within 25% of where it settled.
	halfMs, settleMs := -1.0, -1.0
	for _, s := range samples {
		if s.at < jumpAt {
			continue
		}
		if halfMs < 0 && s.size*2 <= sizeBefore {
			halfMs = float64((s.at - jumpAt).Milliseconds())
		}
		if settleMs < 0 && float64(s.size) <= 1.25*float64(sizeAfter) {
			settleMs = float64((s.at - jumpAt).Milliseconds())
		}
	}
	watch.mu.Lock()
	claims := slices.Clone(watch.claims)
	lapsed, expired, renews := watch.lapsed, watch.expiredWorked, watch.renews
	lastOld := watch.lastOldDone
	mark := watch.mark
	watch.mu.Unlock()
	var claimsBefore, claimsAfter []int
	var leaseBefore, leaseAfter []float64
	firstClaimAfterMs, firstSmallClaimMs := -1.0, -1.0
	for _, c := range claims {
		switch {
		case c.at < jumpAt && c.at >= jumpAt-span:
			claimsBefore = append(claimsBefore, c.limit)
			leaseBefore = append(leaseBefore, c.lease.Seconds())
		case c.at >= jumpAt:
			if firstClaimAfterMs < 0 {
				firstClaimAfterMs = float64((c.at - jumpAt).Milliseconds())
			}
			if firstSmallClaimMs < 0 && c.limit*2 <= sizeBefore {
				firstSmallClaimMs = float64((c.at - jumpAt).Milliseconds())
			}
			claimsAfter = append(claimsAfter, c.limit)
			leaseAfter = append(leaseAfter, c.lease.Seconds())
		}
	}
	oldDrainedMs := -1.0
	if !lastOld.IsZero() {
		oldDrainedMs = float64(lastOld.Sub(mark).Milliseconds())
	}
	slice := env.Tuning.Claim.TargetSlice
	figures := map[string]float64{
		"fromMs": float64(o.jumpFrom.Milliseconds()), "toMs": float64(o.jumpTo.Milliseconds()), "jumpAtS": round1(jumpAt.Seconds()),
		"claimSizeBefore": float64(sizeBefore), "claimSizeAfter": float64(sizeAfter),
		"avgItemMsBefore": round1(medianF(beforeAvg)), "avgItemMsAfter": round1(medianF(afterAvg)),
		"sizeHalvedAfterMs": halfMs, "sizeSettledAfterMs": settleMs,
		"claimsBefore": float64(len(claimsBefore)), "claimsAfter": float64(len(claimsAfter)),
		"medianClaimBefore": float64(medianInt(claimsBefore)), "medianClaimAfter": float64(medianInt(claimsAfter)),
		"firstClaimAfterJumpMs": firstClaimAfterMs, "firstSmallClaimAfterMs": firstSmallClaimMs,
		"preJumpBacklogDoneAfterMs": oldDrainedMs,
		"leaseBeforeS":              round1(medianF(leaseBefore)), "leaseAfterS": round1(medianF(leaseAfter)),
		"renewals": float64(renews), "leaseExpiredWhileWorked": float64(expired), "renewedAfterExpiry": float64(lapsed),
		"reaped": float64(sum.Reaped), "stale": float64(sum.Stale), "released": float64(sum.Released),
		"givenBackAfterJump": float64(givenBack), "firstGiveBackAfterMs": firstGiveBackMs,
		"itemsBefore": float64(doneAtJump), "itemsAfter": float64(sum.Completed - doneAtJump),
		"sliceMs": float64(slice.Milliseconds()),
	}
	shrunk := halfMs >= 0 && halfMs <= float64((2*slice).Milliseconds())
	pass := shrunk && expired == 0 && lapsed == 0 && sum.Reaped == 0 && sum.Stale == 0
	return benchResult{
		Name: "latencyjump", Figures: figures, Pass: boolp(pass),
		Target: fmt.Sprintf("claim size shrinks within two slices (%s); no lease expires while its item is worked", 2*slice),
		Note: "claimSize*: the size the runner's next claim takes (controller capped to 500 ms of look-ahead), sampled every 100 ms; " +
			"*Claim*: claims actually made; preJumpBacklogDoneAfterMs: when the last item claimed before the jump finished; " +
			"givenBack*: queued items the runner released before the run's end (released also counts those released at the end); " +
			"releases (time since start:items): " + strings.Join(relTrace, " "),
	}, nil
}

// ---- stages -----------------------------------------------------------------

// stages: stageItems items through the 1-stage noop pipeline and through a
// 3-stage noop pipeline, alternating, each on a fresh database; then every
// 3-stage item is checked to have run each stage exactly once.
func (b *bench) stages(ctx context.Context, o *procOpts) (benchResult, error) {
	if o.stageItems < 1 || o.stageItems > engine.MaxEnqueueRows {
		return benchResult{}, usagef("--stage-items: must be 1..%d", engine.MaxEnqueueRows)
	}
	three := &engine.Pipeline{Name: "bench-3stages", Stages: []engine.Stage{
		{Name: "one", Processor: "noop"}, {Name: "two", Processor: "noop"}, {Name: "three", Processor: "noop"}}}
	run := func(name string, round int, pl *engine.Pipeline, noHandOff bool) (*engine.RunSummary, error) {
		env, err := b.openEnv(ctx, fmt.Sprintf("stages-%s-%d", name, round))
		if err != nil {
			return nil, err
		}
		defer env.Close()
		pipeline := engine.DefaultPipeline
		if pl != nil {
			if _, err := env.Store.PutPipeline(ctx, &engine.PutPipelineParams{Pipeline: pl, Now: time.Now()}); err != nil {
				return nil, err
			}
			pipeline = pl.Name
		}
		if err := enqueueSKUs(ctx, env, pipeline, o.stageItems); err != nil {
			return nil, err
		}
		syscall.Sync()
		r, err := engine.NewRunner(env.runnerConfig(engine.RunnerConfig{Drain: true, NoHandOff: noHandOff,
			ReapInterval: env.Tuning.ReapInterval, StaleIngestAfter: env.Tuning.StaleIngestAfter}))
		if err != nil {
			return nil, err
		}
		sum, err := r.Run(ctx)
		if err != nil {
			return nil, err
		}
		if pl != nil && round == 0 {
			if err := checkStagesOnce(ctx, env.Store, len(pl.Stages), o.stageItems); err != nil {
				return nil, err
			}
		}
		return sum, nil
	}
	// Each round runs the 1-stage pipeline, the 3-stage one, and the
	// 3-stage one again with every stage claimed (no hand-off), in turn,
	// so that the drift of a shared machine hits all three alike.
	var single, triple, claimed []float64
	var rounds []string
	var stale, reaped int64
	for round := range max(o.stageRounds, 1) {
		s1, err := run("single", round, nil, false)
		if err != nil {
			return benchResult{}, err
		}
		s3, err := run("three", round, three, false)
		if err != nil {
			return benchResult{}, err
		}
		sc, err := run("three-claims", round, three, true)
		if err != nil {
			return benchResult{}, err
		}
		for _, s := range []*engine.RunSummary{s1, s3, sc} {
			if s.ByStatus["DONE"] != int64(o.stageItems) {
				return benchResult{}, fmt.Errorf("round %d: %d items DONE of %d", round, s.ByStatus["DONE"], o.stageItems)
			}
			stale += s.Stale
			reaped += s.Reaped
		}
		per := func(s *engine.RunSummary) float64 { return float64(o.stageItems) / s.Busy.Seconds() }
		single, triple, claimed = append(single, per(s1)), append(triple, per(s3)), append(claimed, per(sc))
		rounds = append(rounds, fmt.Sprintf("%.0f/%.0f/%.0f (claims %d/%d/%d, commits %d/%d/%d, handed off %d)",
			per(s1), per(s3), per(sc), s1.Claims, s3.Claims, sc.Claims, s1.Commits, s3.Commits, sc.Commits, s3.HandedOff))
	}
	one, three3 := medianF(single), medianF(triple)
	ratio := three3 / one
	return benchResult{
		Name: "stages",
		Figures: map[string]float64{"items": float64(o.stageItems), "rounds": float64(len(single)),
			"singleItemsPerSec": round1(one), "threeStageItemsPerSec": round1(three3), "ratio": round3(ratio),
			"threeStageClaimedItemsPerSec": round1(medianF(claimed)), "claimedRatio": round3(medianF(claimed) / one),
			"stale": float64(stale), "reaped": float64(reaped)},
		Target: "3-stage ≥ 1/3 of 1-stage noop throughput; every item through every stage exactly once",
		Pass:   boolp(ratio >= 1.0/3 && stale == 0 && reaped == 0),
		Note: "items/s, first claim to last durable outcome, median of the rounds; 1-stage/3-stage/3-stage with every stage claimed " +
			"(the comparison: no hand-off) per round: " + strings.Join(rounds, ", ") +
			"; exactly-once checked on the first round of both 3-stage runs (attempt records)",
	}, nil
}

// checkStagesOnce verifies that every item of the store's jobs is DONE at
// its last stage with exactly one attempt record per stage.
func checkStagesOnce(ctx context.Context, s engine.Store, stages, n int) error {
	jobs, err := s.ListJobs(ctx, &engine.ListJobsParams{Limit: 100})
	if err != nil {
		return err
	}
	seen := 0
	for _, j := range jobs {
		err := s.ScanItems(ctx, &engine.ScanItemsParams{JobID: j.ID}, func(it *engine.Item) error {
			seen++
			if it.Status != engine.ItemDone || it.Stage != stages-1 {
				return fmt.Errorf("item %d: %s at stage %d, want DONE at stage %d", it.ID, it.Status, it.Stage, stages-1)
			}
			at, err := s.ListAttempts(ctx, it.ID)
			if err != nil {
				return err
			}
			if len(at) != stages {
				return fmt.Errorf("item %d: %d attempts for %d stages", it.ID, len(at), stages)
			}
			for i, a := range at {
				if a.Stage != i || a.AttemptNo != 1 {
					return fmt.Errorf("item %d: attempt %d ran stage %d as its attempt %d", it.ID, i+1, a.Stage, a.AttemptNo)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if seen != n {
		return fmt.Errorf("%d items, want %d", seen, n)
	}
	return nil
}

// ---- images -----------------------------------------------------------------

// images: o.images camera-sized JPEGs (with EXIF) ingested and processed
// by `sluice ingest DIR --wait` in a child process, so that wall time and
// peak RSS are its own.
func (b *bench) images(ctx context.Context, o *procOpts) (benchResult, error) {
	w, h, err := parseSize(o.imageSize)
	if err != nil {
		return benchResult{}, usagef("--image-size: %v", err)
	}
	if o.images < 1 {
		return benchResult{}, usagef("--images: must be ≥ 1")
	}
	dir := filepath.Join(b.dir, "images")
	t0 := time.Now()
	bytesOut, err := writeBenchJPEGs(dir, o.images, w, h)
	if err != nil {
		return benchResult{}, err
	}
	genSecs := time.Since(t0).Seconds()
	syscall.Sync()
	exe, err := os.Executable()
	if err != nil {
		return benchResult{}, err
	}
	data := filepath.Join(b.dir, "images-data")
	t0 = time.Now()
	cmd := exec.CommandContext(ctx, exe, "--data", data, "--log-level", "error", "--sqlite-sync", b.g.sync, "ingest", dir, "--wait", "--json")
	cmd.Stderr = b.g.stderr
	out, err := cmd.Output()
	if err != nil {
		return benchResult{}, fmt.Errorf("sluice ingest --wait: %w", err)
	}
	secs := time.Since(t0).Seconds()
	var res ingestOut
	if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
		return benchResult{}, fmt.Errorf("sluice ingest output %q: %w", out, err)
	}
	figures := map[string]float64{"images": float64(o.images), "width": float64(w), "height": float64(h),
		"mb": round1(float64(bytesOut) / 1e6), "generateSeconds": round1(genSecs),
		"seconds": round1(secs), "imagesPerSec": round1(float64(o.images) / secs), "ingestSeconds": float64(int(res.Seconds*1000)) / 1000}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		figures["peakRssMB"] = round1(float64(ru.Maxrss) / 1024)
		figures["cpuSeconds"] = round1(time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds())
	}
	thumbs, err := checkImageResults(ctx, data, res.JobID, o.images, w, h)
	if err != nil {
		return benchResult{}, err
	}
	figures["thumbnails"] = float64(thumbs)
	return benchResult{
		Name: "images", Figures: figures,
		Target: "metadata + thumbnails for all, peak RSS ≤ 300 MB",
		Pass:   boolp(thumbs == o.images && figures["peakRssMB"] <= 300),
		Note:   "wall time and peak RSS of `sluice ingest DIR --wait` (ingest + processing, 8 workers, 128 MiB decode budget)",
	}, nil
}

func parseSize(s string) (int, int, error) {
	ws, hs, ok := strings.Cut(strings.ToLower(s), "x")
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if !ok || err1 != nil || err2 != nil || w < 8 || h < 8 || w > 20000 || h > 20000 {
		return 0, 0, fmt.Errorf("%q is not WIDTHxHEIGHT (8..20000 each)", s)
	}
	return w, h, nil
}

// checkImageResults checks that every item of the job is DONE with the
// image's size, a hash and a stored thumbnail, and returns how many distinct
// thumbnails there are.
func checkImageResults(ctx context.Context, data string, jobID int64, n, w, h int) (int, error) {
	s, err := sqlite.Open(ctx, filepath.Join(data, DBFile), sqlite.Options{})
	if err != nil {
		return 0, err
	}
	defer s.Close()
	job, err := s.GetJob(ctx, jobID)
	if err != nil {
		return 0, err
	}
	if job.Counts.Done != int64(n) {
		return 0, fmt.Errorf("image job %d: %+v, want %d DONE", jobID, job.Counts, n)
	}
	thumbs := map[string]bool{}
	err = s.ScanItems(ctx, &engine.ScanItemsParams{JobID: jobID}, func(it *engine.Item) error {
		var r imageproc.Result
		if err := json.Unmarshal(it.Result, &r); err != nil {
			return fmt.Errorf("item %d: result: %w", it.ID, err)
		}
		if r.Width != w || r.Height != h || r.SHA256 == "" || r.PHash == "" || r.Camera == "" || r.ExifDate == "" {
			return fmt.Errorf("item %d: incomplete result %s", it.ID, it.Result)
		}
		if _, err := s.StatBlob(ctx, r.Thumbnail); err != nil {
			return fmt.Errorf("item %d: thumbnail: %w", it.ID, err)
		}
		thumbs[r.Thumbnail] = true
		return nil
	})
	return len(thumbs), err
}

// benchBases is how many different pictures the generated JPEGs are made
// of; every file still differs (its EXIF date), so each has its own sha256
// and thumbnail.
const benchBases = 6

// writeBenchJPEGs writes n w×h JPEGs with EXIF (camera, date, orientation)
// into dir and returns their total size.
func writeBenchJPEGs(dir string, n, w, h int) (int64, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	bases := make([][]byte, min(n, benchBases))
	var wg sync.WaitGroup
	errs := make([]error, len(bases))
	for i := range bases {
		wg.Go(func() {
			var buf bytes.Buffer
			errs[i] = jpeg.Encode(&buf, benchPicture(w, h, uint64(i+1)), &jpeg.Options{Quality: 90})
			bases[i] = buf.Bytes()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	var total int64
	when := time.Date(2024, 6, 1, 9, 0, 0, 0, time.UTC)
	for i := range n {
		base := bases[i%len(bases)]
		app1 := exifAPP1("Sluice", fmt.Sprintf("Bench %d", i%len(bases)), when.Add(time.Duration(i)*time.Minute))
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("IMG_%05d.jpg", i+1)))
		if err != nil {
			return 0, err
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		bw.Write(base[:2]) // SOI
		bw.Write(app1)
		bw.Write(base[2:])
		err = bw.Flush()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, err
		}
		total += int64(len(base) + len(app1))
	}
	return total, nil
}

// benchPicture draws a photo-like w×h picture (4:2:0, like a camera's):
// soft gradients, a few discs, and sensor-like noise, so that it compresses
// to a few MB at quality 90 as camera pictures do.
func benchPicture(w, h int, seed uint64) *image.YCbCr {
	img := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio420)
	x := seed*0x9e3779b97f4a7c15 | 1
	next := func() uint64 { // xorshift64
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x
	}
	type disc struct{ cx, cy, r2, dy int }
	var discs []disc
	for range 12 {
		r := int(next()%uint64(max(h/6, 1))) + h/20 + 1
		discs = append(discs, disc{int(next() % uint64(w)), int(next() % uint64(h)), r * r, int(next()%120) - 60})
	}
	for y := range h {
		row := img.Y[y*img.YStride : y*img.YStride+w]
		for xx := range w {
			v := 40 + 150*xx/w/2 + 150*y/h/2 + int(seed*17%40)
			for _, d := range discs {
				if dx, dy := xx-d.cx, y-d.cy; dx*dx+dy*dy < d.r2 {
					v += d.dy
				}
			}
			r := next()
			v += int(r%25) - 12 // noise
			row[xx] = uint8(min(max(v, 0), 255))
		}
	}
	cw, ch := (w+1)/2, (h+1)/2
	for y := range ch {
		for xx := range cw {
			i := y*img.CStride + xx
			n := int(next() % 7)
			img.Cb[i] = uint8(min(max(100+60*xx/cw+n-3+int(seed*29%30), 0), 255))
			img.Cr[i] = uint8(min(max(160-50*y/ch+n-3, 0), 255))
		}
	}
	return img
}

// exifAPP1 returns a JPEG APP1 segment holding a little-endian TIFF with
// Make, Model, Orientation (1), DateTime and, in the Exif IFD,
// DateTimeOriginal.
func exifAPP1(camMake, model string, when time.Time) []byte {
	const (
		ascii, short, long = 2, 3, 4
		ifd0At             = 8
		ifd0Entries        = 5
		exifAt             = ifd0At + 2 + ifd0Entries*12 + 4
		dataAt             = exifAt + 2 + 12 + 4
	)
	date := when.Format("2006:01:02 15:04:05") + "\x00"
	makeZ, modelZ := camMake+"\x00", model+"\x00"
	le := binary.LittleEndian
	var data []byte
	place := func(s string) uint32 { // offset of s in the TIFF
		at := uint32(dataAt + len(data))
		data = append(data, s...)
		return at
	}
	type entry struct {
		tag, typ     uint16
		count, value uint32
	}
	ifd0 := []entry{
		{0x010F, ascii, uint32(len(makeZ)), place(makeZ)},
		{0x0110, ascii, uint32(len(modelZ)), place(modelZ)},
		{0x0112, short, 1, 1},
		{0x0132, ascii, uint32(len(date)), place(date)},
		{0x8769, long, 1, exifAt},
	}
	exif := []entry{{0x9003, ascii, uint32(len(date)), place(date)}}
	tiff := []byte{'I', 'I', 42, 0}
	tiff = le.AppendUint32(tiff, ifd0At)
	for _, ifd := range [][]entry{ifd0, exif} {
		tiff = le.AppendUint16(tiff, uint16(len(ifd)))
		for _, e := range ifd {
			tiff = le.AppendUint16(tiff, e.tag)
			tiff = le.AppendUint16(tiff, e.typ)
			tiff = le.AppendUint32(tiff, e.count)
			tiff = le.AppendUint32(tiff, e.value)
		}
		tiff = le.AppendUint32(tiff, 0) // no next IFD
	}
	tiff = append(tiff, data...)
	seg := []byte{0xFF, 0xE1, 0, 0}
	binary.BigEndian.PutUint16(seg[2:], uint16(2+6+len(tiff)))
	seg = append(seg, "Exif\x00\x00"...)
	return append(seg, tiff...)
}
