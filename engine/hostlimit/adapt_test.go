package hostlimit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func always(o Outcome) func(time.Time) Outcome { return func(time.Time) Outcome { return o } }

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := Config{}.withDefaults()
	require.Equal(t, 5.0, c.InitialRate)
	require.Equal(t, 0.5, c.MinRate)
	require.Equal(t, 1000.0, c.MaxRate)
	require.Equal(t, 0.5, c.AdditiveStep)
	require.Equal(t, time.Second, c.Window)
	require.Equal(t, []int{4, 1, 64}, []int{c.InitialConcurrency, c.MinConcurrency, c.MaxConcurrency})
	require.Equal(t, 2.0, Config{InitialRate: 20}.withDefaults().AdditiveStep)
	c = Config{InitialRate: 5000, MinRate: 10, MaxRate: 1, InitialConcurrency: 100, MaxConcurrency: 8}.withDefaults()
	require.Equal(t, 10.0, c.MaxRate)
	require.Equal(t, 10.0, c.InitialRate)
	require.Equal(t, 8, c.InitialConcurrency)
}

func TestSlowStartGrowsMultiplicatively(t *testing.T) {
	t.Parallel()
	l, clk := newTestLimiter(Config{InitialRate: 4}, true)
	drive(t, l, clk, "h", 3*time.Second, always(OK))
	require.InDelta(t, 4*1.5*1.5*1.5, state(t, l, "h").Rate, 0.01)
}

func TestAdditiveIncreaseOverHealthyWindows(t *testing.T) {
	t.Parallel()
	l, clk := newTestLimiter(Config{AdditiveStep: 1}, true)
	l.Seed("h", 10, 4) // seeded hosts skip slow start
	drive(t, l, clk, "h", 5*time.Second, always(OK))
	require.InDelta(t, 15, state(t, l, "h").Rate, 0.01)

	// ClientError is neutral: windows of 404s still count as healthy.
	drive(t, l, clk, "h", 2*time.Second, always(ClientError))
	require.InDelta(t, 17, state(t, l, "h").Rate, 0.01)
}

func TestNoIncreaseWhenIdleOrUnderused(t *testing.T) {
	t.Parallel()
	l, clk := newTestLimiter(Config{}, false)
	l.Seed("h", 100, 4)
	for range 5 {
		r, err := l.Acquire(context.Background(), "h")
		require.NoError(t, err)
		r(OK)
		clk.Advance(time.Second)
	}
	s := state(t, l, "h")
	require.Equal(t, 100.0, s.Rate, "one request per second does not use a 100/s limit")
	require.Equal(t, 4, s.Concurrency, "one request at a time does not use 4 slots")
}

func TestRateLimitedHalvesOncePerWindow(t *testing.T) {
	t.Parallel()
	l, clk := newTestLimiter(Config{}, false)
	l.Seed("h", 40, 8)
	for range 3 {
		r, err := l.Acquire(context.Background(), "h")
		require.NoError(t, err)
		r(RateLimited)
	}
	s := state(t, l, "h")
	require.Equal(t, 20.0, s.Rate)
	require.Equal(t, 4, s.Concurrency)
	require.Equal(t, 40.0, s.Ceiling)
	require.Equal(t, int64(3), s.RateLimited)

	clk.Advance(time.Second)
	r, err := l.Acquire(context.Background(), "h")
	require.NoError(t, err)
	r(RateLimited)
	s = state(t, l, "h")
	require.Equal(t, 10.0, s.Rate)
	require.Equal(t, 2, s.Concurrency)
	require.Equal(t, 20.0, s.Ceiling)
}

func TestServerErrorsShrinkByShare(t *testing.T) {
	t.Parallel()
	for _, o := range []Outcome{ServerError, Timeout, NetworkError} {
		l, clk := newTestLimiter(Config{}, true)
		l.Seed("h", 10, 10)
		n := 0
		// 1 in 5 fails: above the 10% share, so ×0.7 once per window.
		drive(t, l, clk, "h", time.Second, func(time.Time) Outcome {
			n++
			if n%5 == 0 {
				return o
			}
			return OK
		})
		s := state(t, l, "h")
		require.InDelta(t, 7, s.Rate, 0.01, o.String())
		require.Equal(t, 7, s.Concurrency, o.String())
		require.Positive(t, s.Errors)
	}
}

func TestRareServerErrorsHold(t *testing.T) {
	t.Parallel()
	l, clk := newTestLimiter(Config{}, true)
	l.Seed("h", 40, 4)
	n := 0
	drive(t, l, clk, "h", 3*time.Second, func(time.Time) Outcome {
		n++
		if n%30 == 0 { // about 3%: hold, neither up nor down
			return ServerError
		}
		return OK
	})
	require.Equal(t, 40.0, state(t, l, "h").Rate)
}

func TestBounds(t *testing.T) {
	t.Parallel()
	l, clk := newTestLimiter(Config{MinRate: 2, MaxRate: 12, InitialConcurrency: 2, MaxConcurrency: 3}, true)
	ctx := context.Background()
	for range 10 {
		r, err := l.Acquire(ctx, "h")
		require.NoError(t, err)
		r(RateLimited)
		clk.Advance(time.Second)
	}
	s := state(t, l, "h")
	require.Equal(t, 2.0, s.Rate)
	require.Equal(t, 1, s.Concurrency)

	// Healthy windows that use every slot and the whole bucket grow both,
	// up to the bounds.
	for range 20 {
		var rs []func(Outcome)
		for range state(t, l, "h").Concurrency {
			r, err := l.Acquire(ctx, "h")
			require.NoError(t, err)
			rs = append(rs, r)
		}
		for _, r := range rs {
			r(OK)
		}
		drive(t, l, clk, "h", time.Second, always(OK))
	}
	s = state(t, l, "h")
	require.Equal(t, 12.0, s.Rate)
	require.Equal(t, 3, s.Concurrency)

	l.Seed("h", 1e6, 1e6)
	s = state(t, l, "h")
	require.Equal(t, 12.0, s.Rate)
	require.Equal(t, 3, s.Concurrency)
	l.Seed("h", 0.001, -1)
	s = state(t, l, "h")
	require.Equal(t, 2.0, s.Rate)
	require.Equal(t, 3, s.Concurrency, "a non-positive concurrency leaves it unchanged")
}

func TestOutcomeForStatus(t *testing.T) {
	t.Parallel()
	cases := map[int]Outcome{200: OK, 204: OK, 304: OK, 400: ClientError, 404: ClientError,
		408: Timeout, 429: RateLimited, 500: ServerError, 503: ServerError, 504: Timeout}
	for code, want := range cases {
		require.Equal(t, want, OutcomeForStatus(code), code)
	}
	require.Equal(t, "rate_limited", RateLimited.String())
	require.Equal(t, "network_error", NetworkError.String())
	require.Equal(t, "unknown", Outcome(99).String())
}
