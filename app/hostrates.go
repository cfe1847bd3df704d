package app

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/hostlimit"
)

// Learned host rates: a process that runs workers restores its per-host
// limiter (Env.Hosts) from the store when it starts and saves what the
// limiter learns while it runs, so that the next process resumes near the
// learned pace instead of from slow start (5 req/s).
const (
	// hostRatesEvery is how often a running process saves the rates.
	hostRatesEvery = 10 * time.Second
	// hostRatesMaxAge: older rates are ignored on start; a host's limit
	// may have changed since, and slow start finds it again.
	hostRatesMaxAge = 24 * time.Hour
	// hostRatesSaveTimeout bounds the save at shutdown.
	hostRatesSaveTimeout = 5 * time.Second
)

// hostRateKeeper moves learned rates between a limiter and the store.
type hostRateKeeper struct {
	store  engine.HostRateStore
	hosts  *hostlimit.Limiter
	log    *slog.Logger
	now    func() time.Time
	maxAge time.Duration

	mu sync.Mutex
	// last is each host's state when last saved or restored: a host is
	// saved again only once it has seen requests since.
	last map[string]hostlimit.HostState
}

func newHostRateKeeper(store engine.HostRateStore, hosts *hostlimit.Limiter, log *slog.Logger) *hostRateKeeper {
	return &hostRateKeeper{store: store, hosts: hosts, log: log, now: time.Now, maxAge: hostRatesMaxAge,
		last: map[string]hostlimit.HostState{}}
}

// restore seeds the limiter with every stored rate younger than maxAge,
// at its restart rate (engine.HostRate.RestartRate) and with its ceiling
// and concurrency. It returns the rates restored.
func (k *hostRateKeeper) restore(ctx context.Context) ([]engine.HostRate, error) {
	rates, err := k.store.LoadHostRates(ctx)
	if err != nil {
		return nil, err
	}
	now := k.now()
	var out []engine.HostRate
	for _, r := range rates {
		if now.Sub(r.UpdatedAt) > k.maxAge {
			continue
		}
		k.hosts.Restore(r.Host, r.RestartRate(), r.Ceiling, r.Concurrency)
		out = append(out, r)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.hosts.Snapshot() {
		k.last[s.Host] = s
	}
	return out, nil
}

// save writes the state of every host that saw requests since its last
// save (none: no write) and returns how many it wrote.
func (k *hostRateKeeper) save(ctx context.Context) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var rates []engine.HostRate
	var states []hostlimit.HostState
	for _, s := range k.hosts.Snapshot() {
		prev, seen := k.last[s.Host]
		used := s.OK+s.RateLimited+s.Errors > 0
		if !used || (seen && prev.OK == s.OK && prev.RateLimited == s.RateLimited && prev.Errors == s.Errors &&
			prev.Rate == s.Rate && prev.Ceiling == s.Ceiling && prev.Concurrency == s.Concurrency) {
			continue
		}
		rates = append(rates, engine.HostRate{Host: s.Host, Rate: s.Rate, Ceiling: s.Ceiling, Concurrency: s.Concurrency})
		states = append(states, s)
	}
	if len(rates) == 0 {
		return 0, nil
	}
	if err := k.store.SaveHostRates(ctx, rates, k.now()); err != nil {
		return 0, err
	}
	for _, s := range states {
		k.last[s.Host] = s
	}
	return len(rates), nil
}

// run saves every interval until ctx ends.
func (k *hostRateKeeper) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := k.save(ctx); err != nil && ctx.Err() == nil {
				k.log.Warn("saving learned host rates failed", "err", err)
			}
		}
	}
}

// keepHostRates restores e.Hosts from the stored rates, then saves what it
// learns every 10 s in the background until ctx ends. The returned stop
// ends the saving and saves once more (the last requests of a clean
// shutdown count); call it after the workers have stopped. Failures are
// logged, never fatal: without stored rates a host starts from slow start.
// Processes that run workers call it: `defer env.keepHostRates(ctx)()`.
func (e *Env) keepHostRates(ctx context.Context) (stop func()) {
	return e.keepHostRatesEvery(ctx, hostRatesEvery)
}

func (e *Env) keepHostRatesEvery(ctx context.Context, every time.Duration) (stop func()) {
	k := newHostRateKeeper(e.Store, e.Hosts, e.Log)
	restored, err := k.restore(ctx)
	if err != nil {
		e.Log.Warn("loading learned host rates failed; hosts start from slow start", "err", err)
	}
	for _, r := range restored {
		e.Log.Info("host rate restored", "host", r.Host, "rate", round2(r.RestartRate()), "saved_rate", round2(r.Rate),
			"ceiling", round2(r.Ceiling), "concurrency", r.Concurrency, "saved_at", r.UpdatedAt)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.run(rctx, every)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
			sctx, cancelSave := context.WithTimeout(context.WithoutCancel(ctx), hostRatesSaveTimeout)
			defer cancelSave()
			if _, err := k.save(sctx); err != nil {
				e.Log.Warn("saving learned host rates failed", "err", err)
			}
		})
	}
}
