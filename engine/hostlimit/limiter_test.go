package hostlimit

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConcurrencyLimitBlocksUntilRelease(t *testing.T) {
	t.Parallel()
	l, _ := newTestLimiter(Config{InitialRate: 100, InitialConcurrency: 2}, false)
	ctx := context.Background()
	r1, err := l.Acquire(ctx, "h")
	require.NoError(t, err)
	_, err = l.Acquire(ctx, "h")
	require.NoError(t, err)

	third := acquireAsync(ctx, l, "h")
	require.Eventually(t, func() bool { return slotWaited(l, "h") }, 5*time.Second, time.Millisecond)
	select {
	case <-third:
		t.Fatal("third Acquire returned while both slots were taken")
	default:
	}
	require.Equal(t, 2, state(t, l, "h").InFlight)

	r1(OK)
	r1(OK) // a second call is ignored
	res := <-third
	require.NoError(t, res.err)
	s := state(t, l, "h")
	require.Equal(t, 2, s.InFlight)
	require.Equal(t, int64(1), s.OK)
}

func TestRetryAfterPausesEveryCaller(t *testing.T) {
	t.Parallel()
	l, clk := newTestLimiter(Config{InitialRate: 100}, false)
	ctx := context.Background()
	l.RetryAfter("h", 20*time.Millisecond)
	l.RetryAfter("h", 5*time.Millisecond) // never shortens a pause
	s := state(t, l, "h")
	require.NotNil(t, s.PausedUntil)
	require.Equal(t, clk.Now().Add(20*time.Millisecond), *s.PausedUntil)

	a, b := acquireAsync(ctx, l, "h"), acquireAsync(ctx, l, "h")
	require.Equal(t, 20*time.Millisecond, clk.waitArmed(t))
	require.Equal(t, 20*time.Millisecond, clk.waitArmed(t))
	select {
	case <-a:
		t.Fatal("Acquire returned during the pause")
	case <-b:
		t.Fatal("Acquire returned during the pause")
	default:
	}
	other, err := l.Acquire(ctx, "other") // other hosts are not paused
	require.NoError(t, err)
	other(OK)

	clk.Advance(20 * time.Millisecond)
	for _, ch := range []<-chan result{a, b} {
		res := <-ch
		require.NoError(t, res.err)
		res.release(OK)
	}
	require.Nil(t, state(t, l, "h").PausedUntil)
}

func TestRetryAfterRealClock(t *testing.T) {
	t.Parallel()
	l := New(Config{})
	l.RetryAfter("h", 20*time.Millisecond)
	start := time.Now()
	r, err := l.Acquire(context.Background(), "h")
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
	r(OK)
}

func TestContextCancelUnblocksAcquire(t *testing.T) {
	t.Parallel()
	l, clk := newTestLimiter(Config{InitialRate: 1, InitialConcurrency: 1}, false)

	// Waiting for a slot.
	held, err := l.Acquire(context.Background(), "slot")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ch := acquireAsync(ctx, l, "slot")
	require.Eventually(t, func() bool { return slotWaited(l, "slot") }, 5*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, (<-ch).err, context.Canceled)
	held(OK)

	// Waiting for a token: the slot and the token are given back.
	l.Seed("tok", 1, 2)
	first, err := l.Acquire(context.Background(), "tok")
	require.NoError(t, err)
	ctx, cancel = context.WithCancel(context.Background())
	ch = acquireAsync(ctx, l, "tok")
	require.Equal(t, time.Second, clk.waitArmed(t))
	cancel()
	require.ErrorIs(t, (<-ch).err, context.Canceled)
	require.Equal(t, 1, state(t, l, "tok").InFlight)
	first(OK)

	// Waiting out a pause.
	l.RetryAfter("pause", time.Hour)
	ctx, cancel = context.WithCancel(context.Background())
	ch = acquireAsync(ctx, l, "pause")
	clk.waitArmed(t)
	cancel()
	require.ErrorIs(t, (<-ch).err, context.Canceled)

	// Already ended.
	_, err = l.Acquire(ctx, "pause")
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 0, state(t, l, "pause").InFlight)
}

func TestSnapshotContent(t *testing.T) {
	t.Parallel()
	l, clk := newTestLimiter(Config{}, false)
	ctx := context.Background()
	l.Seed("b.example", 40, 6)
	for _, o := range []Outcome{OK, OK, ClientError, ServerError, RateLimited} {
		r, err := l.Acquire(ctx, "b.example")
		require.NoError(t, err)
		r(o)
	}
	held, err := l.Acquire(ctx, "a.example")
	require.NoError(t, err)
	l.RetryAfter("b.example", 3*time.Second)

	snap := l.Snapshot()
	require.Len(t, snap, 2)
	until := clk.Now().Add(3 * time.Second)
	require.Equal(t, HostState{Host: "a.example", Rate: 5, Concurrency: 4, InFlight: 1}, snap[0])
	require.Equal(t, HostState{Host: "b.example", Rate: 20, Ceiling: 40, Concurrency: 3,
		PausedUntil: &until, OK: 2, RateLimited: 1, Errors: 2}, snap[1])

	js, err := json.Marshal(snap[1])
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(js, &m))
	for _, k := range []string{"host", "rate", "ceiling", "concurrency", "inFlight", "pausedUntil", "ok", "rateLimited", "errors"} {
		require.Contains(t, m, k)
	}
	held(OK)
	js, err = json.Marshal(l.Snapshot()[0])
	require.NoError(t, err)
	require.NotContains(t, string(js), "pausedUntil")
	require.NotContains(t, string(js), "ceiling")
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	l := New(Config{InitialRate: 1e5, MaxRate: 1e6, InitialConcurrency: 3})
	hosts := []string{"a", "b", "c"}
	outcomes := []Outcome{OK, OK, OK, ClientError, ServerError, Timeout, NetworkError, RateLimited}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				h := hosts[(w+i)%len(hosts)]
				r, err := l.Acquire(context.Background(), h)
				if err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 {
					l.RetryAfter(h, 0)
					_ = l.Snapshot()
				}
				r(outcomes[(w*7+i)%len(outcomes)])
			}
		})
	}
	wg.Wait()
	var total int64
	for _, s := range l.Snapshot() {
		require.Equal(t, 0, s.InFlight)
		require.LessOrEqual(t, s.Concurrency, 64)
		total += s.OK + s.RateLimited + s.Errors
	}
	require.Equal(t, int64(8*200), total)
}
