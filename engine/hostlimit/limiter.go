package hostlimit

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Limiter paces requests per host. Create one per process with New and share
// it between all processors that talk to remote hosts; it is safe for
// concurrent use.
type Limiter struct {
	cfg   Config
	mu    sync.Mutex
	hosts map[string]*host
}

// HostState is a snapshot of one host's pacing state, for stats and for
// persisting learned limits.
type HostState struct {
	// Host is the host name as passed to Acquire.
	Host string `json:"host"`
	// Rate is the current rate in requests per second.
	Rate float64 `json:"rate"`
	// Ceiling is the rate at which the host last answered 429 (0 if never).
	Ceiling float64 `json:"ceiling,omitempty"`
	// Concurrency is the current limit on requests in flight.
	Concurrency int `json:"concurrency"`
	// InFlight is the number of acquired, not yet released requests.
	InFlight int `json:"inFlight"`
	// PausedUntil is set while a Retry-After pause is in force.
	PausedUntil *time.Time `json:"pausedUntil,omitempty"`
	// OK, RateLimited and Errors count outcomes since the host was first
	// seen; Errors covers every outcome other than OK and RateLimited.
	OK          int64 `json:"ok"`
	RateLimited int64 `json:"rateLimited"`
	Errors      int64 `json:"errors"`
}

// New returns a Limiter configured by c (zero fields take defaults).
func New(c Config) *Limiter {
	return &Limiter{cfg: c.withDefaults(), hosts: map[string]*host{}}
}

// hostLocked returns the state of name, creating it. l.mu must be held.
func (l *Limiter) hostLocked(name string, now time.Time) *host {
	h := l.hosts[name]
	if h == nil {
		h = newHost(name, &l.cfg, now)
		l.hosts[name] = h
	}
	return h
}

// Acquire waits until host's token bucket, concurrency limit and any
// Retry-After pause allow one request, or ctx ends (then it returns ctx's
// error). On success the caller must call release exactly once with the
// request's outcome; later calls are ignored.
func (l *Limiter) Acquire(ctx context.Context, host string) (release func(o Outcome), err error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		l.mu.Lock()
		now := l.cfg.Now()
		h := l.hostLocked(host, now)
		h.roll(&l.cfg, now)
		if now.Before(h.pausedUntil) {
			wait, ch := h.pausedUntil.Sub(now), h.changed
			l.mu.Unlock()
			if err := l.wait(ctx, wait, ch); err != nil {
				return nil, err
			}
			continue
		}
		if h.inFlight >= h.conc {
			h.slotWaited = true
			ch := h.changed
			l.mu.Unlock()
			if err := l.wait(ctx, -1, ch); err != nil {
				return nil, err
			}
			continue
		}
		h.inFlight++
		h.peakInFlight = max(h.peakInFlight, h.inFlight)
		h.acquired++
		delay := h.bucket.reserve(now)
		if delay > 0 {
			h.bucketWaited = true
		}
		l.mu.Unlock()
		if delay > 0 {
			if err := l.wait(ctx, delay, nil); err != nil {
				l.abandon(h)
				return nil, err
			}
		}
		if err := l.waitPause(ctx, h); err != nil {
			l.abandon(h)
			return nil, err
		}
		return l.releaser(h), nil
	}
}

// waitPause waits, holding the slot and token already taken, until a pause
// set while waiting for the token is over.
func (l *Limiter) waitPause(ctx context.Context, h *host) error {
	for {
		l.mu.Lock()
		now := l.cfg.Now()
		if !now.Before(h.pausedUntil) {
			l.mu.Unlock()
			return nil
		}
		wait, ch := h.pausedUntil.Sub(now), h.changed
		l.mu.Unlock()
		if err := l.wait(ctx, wait, ch); err != nil {
			return err
		}
	}
}

// abandon undoes an acquisition that was given up before it completed.
func (l *Limiter) abandon(h *host) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.cfg.Now()
	h.bucket.unreserve(now)
	h.inFlight--
	if h.acquired > 0 {
		h.acquired--
	}
	h.signal()
}

// releaser returns the release func for one acquired request of h.
func (l *Limiter) releaser(h *host) func(Outcome) {
	var once sync.Once
	return func(o Outcome) {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			now := l.cfg.Now()
			h.roll(&l.cfg, now)
			h.inFlight--
			h.record(&l.cfg, o, now)
			h.signal()
		})
	}
}

// wait blocks until d has passed (d < 0: no deadline), ch is closed, or ctx
// ends; only the last is an error.
func (l *Limiter) wait(ctx context.Context, d time.Duration, ch <-chan struct{}) error {
	var timer <-chan time.Time
	if d >= 0 {
		timer = l.cfg.After(d)
	}
	select {
	case <-timer:
		return nil
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// RetryAfter pauses every request to host until now+d, e.g. after a 429
// with a Retry-After header. A pause never shortens an existing one.
func (l *Limiter) RetryAfter(host string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.cfg.Now()
	h := l.hostLocked(host, now)
	if until := now.Add(d); until.After(h.pausedUntil) {
		h.pausedUntil = until
		h.signal()
	}
}

// Seed sets host's learned rate and concurrency, e.g. restored after a
// restart. Values are clamped to the Config bounds; a value ≤ 0 leaves that
// limit unchanged. The bucket starts full. A seeded host skips slow start and recovers quickly
// towards the seeded rate after a decrease.
func (l *Limiter) Seed(host string, rate float64, concurrency int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.cfg.Now()
	h := l.hostLocked(host, now)
	if rate > 0 {
		h.bucket = newBucket(clampF(rate, l.cfg.MinRate, l.cfg.MaxRate), now)
		h.ceiling = h.bucket.rate
		h.slowStart = false
	}
	if concurrency > 0 {
		h.conc = clampI(concurrency, l.cfg.MinConcurrency, l.cfg.MaxConcurrency)
	}
	h.signal()
}

// Snapshot returns the state of every host seen so far, sorted by host.
func (l *Limiter) Snapshot() []HostState {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.cfg.Now()
	out := make([]HostState, 0, len(l.hosts))
	for _, h := range l.hosts {
		h.roll(&l.cfg, now)
		s := HostState{
			Host: h.name, Rate: h.bucket.rate, Ceiling: h.ceiling,
			Concurrency: h.conc, InFlight: h.inFlight,
			OK: h.totalOK, RateLimited: h.totalRateLimited, Errors: h.totalErrors,
		}
		if now.Before(h.pausedUntil) {
			p := h.pausedUntil
			s.PausedUntil = &p
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}
