package hostlimit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeClock is a manual clock for tests. In auto mode After advances the
// clock by d and returns a ready channel, so a single goroutine can drive
// simulated time without blocking. Otherwise timers fire on Advance, and
// every timer armed is announced on armed.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	auto   bool
	timers []fakeTimer
	armed  chan time.Duration
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock(auto bool) *fakeClock {
	return &fakeClock{
		now:   time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		auto:  auto,
		armed: make(chan time.Duration, 1024),
	}
}

// Now returns the fake time.
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After arms a timer (or, in auto mode, advances the clock by d).
func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if c.auto {
		c.now = c.now.Add(d)
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), ch: ch})
	select {
	case c.armed <- d:
	default:
	}
	return ch
}

// Advance moves the clock forward and fires the timers that are due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	keep := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			keep = append(keep, t)
			continue
		}
		t.ch <- c.now
	}
	c.timers = keep
}

// waitArmed returns the duration of the next timer armed, failing the test
// if none is armed within a generous real-time limit.
func (c *fakeClock) waitArmed(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-c.armed:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("no timer armed")
		return 0
	}
}

// newTestLimiter returns a Limiter on a fake clock with cfg's other fields.
func newTestLimiter(cfg Config, auto bool) (*Limiter, *fakeClock) {
	clk := newFakeClock(auto)
	cfg.Now, cfg.After = clk.Now, clk.After
	return New(cfg), clk
}

// state returns the snapshot of one host.
func state(t *testing.T, l *Limiter, host string) HostState {
	t.Helper()
	for _, s := range l.Snapshot() {
		if s.Host == host {
			return s
		}
	}
	t.Fatalf("host %q not in snapshot", host)
	return HostState{}
}

// drive acquires and releases requests to host back to back until the fake
// (auto) clock has moved by d, reporting outcome(now) for each one.
func drive(t *testing.T, l *Limiter, clk *fakeClock, host string, d time.Duration, outcome func(now time.Time) Outcome) {
	t.Helper()
	end := clk.Now().Add(d)
	for clk.Now().Before(end) {
		release, err := l.Acquire(context.Background(), host)
		require.NoError(t, err)
		release(outcome(clk.Now()))
	}
}

// result is what a background Acquire returned.
type result struct {
	release func(Outcome)
	err     error
}

// acquireAsync runs Acquire in a goroutine and delivers its result.
func acquireAsync(ctx context.Context, l *Limiter, host string) <-chan result {
	ch := make(chan result, 1)
	go func() {
		r, err := l.Acquire(ctx, host)
		ch <- result{r, err}
	}()
	return ch
}

// slotWaited reports whether an Acquire of host is or was waiting for a
// concurrency slot in the current window.
func slotWaited(l *Limiter, host string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.hosts[host]
	return h != nil && h.slotWaited
}
