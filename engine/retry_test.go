package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

var retryNow = time.Date(2030, time.January, 2, 3, 4, 5, 0, time.UTC)

func fixedRand() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

// requireDelay checks that d is RunAt-now within ±jitter of want.
func requireDelay(t *testing.T, d engine.Decision, want time.Duration, jitter float64) {
	t.Helper()
	require.True(t, d.Retry, "expected a retry")
	got := d.RunAt.Sub(retryNow)
	lo := time.Duration(float64(want) * (1 - jitter))
	hi := time.Duration(float64(want) * (1 + jitter))
	require.GreaterOrEqual(t, got, lo, "delay %s below %s-%.0f%%", got, want, jitter*100)
	require.LessOrEqual(t, got, hi, "delay %s above %s+%.0f%%", got, want, jitter*100)
}

func TestDecideTransientBacksOffThenErrors(t *testing.T) {
	t.Parallel()
	p := engine.RetryPolicy{}
	rnd := fixedRand()
	err := engine.Transient(errors.New("timeout"))
	want := []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute}
	for i, w := range want {
		d := p.Decide(err, i+1, 0, 0, retryNow, rnd)
		requireDelay(t, d, w, 0.2)
		require.Equal(t, 0, d.NextStrategy)
	}
	d := p.Decide(err, 5, 0, 0, retryNow, rnd)
	require.False(t, d.Retry)
	require.Equal(t, engine.ItemError, d.Status)
	d = p.Decide(err, 9, 0, 0, retryNow, rnd)
	require.False(t, d.Retry)
	require.Equal(t, engine.ItemError, d.Status)
}

func TestDecideJitterSpreadsDelays(t *testing.T) {
	t.Parallel()
	p := engine.RetryPolicy{}
	rnd := fixedRand()
	seen := map[time.Duration]bool{}
	for range 50 {
		d := p.Decide(errors.New("x"), 1, 0, 0, retryNow, rnd)
		requireDelay(t, d, time.Second, 0.2)
		seen[d.RunAt.Sub(retryNow)] = true
	}
	require.Greater(t, len(seen), 10, "delays are not jittered")

	// No random source: the delay is exact.
	d := p.Decide(errors.New("x"), 2, 0, 0, retryNow, nil)
	require.Equal(t, retryNow.Add(5*time.Second), d.RunAt)
}

func TestDecideSameSeedSameDecision(t *testing.T) {
	t.Parallel()
	p := engine.RetryPolicy{}
	a := p.Decide(errors.New("x"), 3, 0, 0, retryNow, fixedRand())
	b := p.Decide(errors.New("x"), 3, 0, 0, retryNow, fixedRand())
	require.Equal(t, a, b)
}

func TestDecideLastDelayRepeats(t *testing.T) {
	t.Parallel()
	p := engine.RetryPolicy{Transient: engine.ClassPolicy{MaxAttempts: 10,
		Delays: []engine.Duration{engine.Duration(time.Second), engine.Duration(time.Minute)}}}
	for attempts := 2; attempts < 10; attempts++ {
		d := p.Decide(errors.New("x"), attempts, 0, 0, retryNow, fixedRand())
		requireDelay(t, d, time.Minute, 0.2)
	}
	require.Equal(t, engine.ItemError, p.Decide(errors.New("x"), 10, 0, 0, retryNow, fixedRand()).Status)
}

func TestDecidePermanentAndPoisonErrorAtOnce(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		engine.Permanent(errors.New("bad input")),
		&engine.Failure{Class: engine.ClassPoison, Err: errors.New("crashed")},
		fmt.Errorf("wrapped: %w", engine.Permanent(errors.New("bad"))),
	} {
		d := engine.RetryPolicy{}.Decide(err, 1, 2, 3, retryNow, fixedRand())
		require.False(t, d.Retry, "%v", err)
		require.Equal(t, engine.ItemError, d.Status, "%v", err)
		require.Equal(t, 2, d.NextStrategy, "strategy kept")
	}
}

func TestDecideNotFoundWithoutVariantsIsFinal(t *testing.T) {
	t.Parallel()
	d := engine.RetryPolicy{}.Decide(engine.NotFoundf("no match"), 1, 0, 0, retryNow, fixedRand())
	require.False(t, d.Retry)
	require.Equal(t, engine.ItemNotFound, d.Status)
}

func TestDecideNotFoundRotatesVariants(t *testing.T) {
	t.Parallel()
	p := engine.RetryPolicy{}
	rnd := fixedRand()
	err := engine.NotFoundf("no match")
	d := p.Decide(err, 1, 0, 3, retryNow, rnd)
	requireDelay(t, d, 30*time.Second, 0.2)
	require.Equal(t, 1, d.NextStrategy)
	d = p.Decide(err, 2, 1, 3, retryNow, rnd)
	requireDelay(t, d, 5*time.Minute, 0.2)
	require.Equal(t, 2, d.NextStrategy)
	d = p.Decide(err, 3, 2, 3, retryNow, rnd)
	require.False(t, d.Retry, "variants exhausted")
	require.Equal(t, engine.ItemNotFound, d.Status)
	require.Equal(t, 2, d.NextStrategy)
}

func TestDecideNotFoundMaxAttemptsCapsVariants(t *testing.T) {
	t.Parallel()
	p := engine.RetryPolicy{NotFound: engine.ClassPolicy{MaxAttempts: 2}}
	d := p.Decide(engine.NotFoundf("x"), 1, 0, 5, retryNow, fixedRand())
	require.True(t, d.Retry)
	d = p.Decide(engine.NotFoundf("x"), 2, 1, 5, retryNow, fixedRand())
	require.False(t, d.Retry)
	require.Equal(t, engine.ItemNotFound, d.Status)
}

func TestDecideRateLimitedHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	p := engine.RetryPolicy{}
	rnd := fixedRand()
	// Retry-After larger than the policy delay (2s ± 20%) wins exactly.
	d := p.Decide(engine.RateLimited(errors.New("429"), time.Minute), 1, 0, 0, retryNow, rnd)
	require.True(t, d.Retry)
	require.Equal(t, retryNow.Add(time.Minute), d.RunAt)
	// Retry-After smaller than the policy delay: the policy delay.
	d = p.Decide(engine.RateLimited(errors.New("429"), time.Millisecond), 1, 0, 0, retryNow, rnd)
	requireDelay(t, d, 2*time.Second, 0.2)
	d = p.Decide(engine.RateLimited(errors.New("429"), 0), 3, 0, 0, retryNow, rnd)
	requireDelay(t, d, 30*time.Second, 0.2)
	// Its budget (20 by default) is larger than the transient one.
	d = p.Decide(engine.RateLimited(errors.New("429"), 0), 19, 0, 0, retryNow, rnd)
	requireDelay(t, d, 5*time.Minute, 0.2)
	d = p.Decide(engine.RateLimited(errors.New("429"), time.Hour), 20, 0, 0, retryNow, rnd)
	require.False(t, d.Retry)
	require.Equal(t, engine.ItemError, d.Status)

	capped := engine.RetryPolicy{RateLimited: engine.ClassPolicy{MaxAttempts: 3}}
	require.True(t, capped.Decide(engine.RateLimited(errors.New("429"), 0), 2, 0, 0, retryNow, rnd).Retry)
	require.Equal(t, engine.ItemError, capped.Decide(engine.RateLimited(errors.New("429"), 0), 3, 0, 0, retryNow, rnd).Status)
}

func TestDecideUnclassifiedIsTransient(t *testing.T) {
	t.Parallel()
	require.Equal(t, engine.ClassTransient, engine.ClassOf(errors.New("boom")))
	require.Equal(t, engine.ClassTransient, engine.ClassOf(&engine.Failure{Err: errors.New("no class")}))
	p := engine.RetryPolicy{}
	d := p.Decide(errors.New("boom"), 1, 0, 0, retryNow, fixedRand())
	requireDelay(t, d, time.Second, 0.2)
	require.Equal(t, engine.ItemError, p.Decide(errors.New("boom"), 5, 0, 0, retryNow, fixedRand()).Status)
}

func TestClassOfFindsWrappedFailure(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("stage 2: %w", engine.NotFoundf("nothing for %q", "x"))
	require.Equal(t, engine.ClassNotFound, engine.ClassOf(err))
	require.Equal(t, `stage 2: nothing for "x"`, err.Error())
	require.Equal(t, "rate_limited", (&engine.Failure{Class: engine.ClassRateLimited}).Error())
	inner := errors.New("inner")
	require.ErrorIs(t, engine.Transient(inner), inner)
}

func TestRetryPolicyWithDefaultsFillsOnlyZeroFields(t *testing.T) {
	t.Parallel()
	def := engine.DefaultRetryPolicy()
	require.Equal(t, def, engine.RetryPolicy{}.WithDefaults())
	require.Equal(t, 5, def.Transient.MaxAttempts)
	require.Equal(t, 20, def.RateLimited.MaxAttempts)
	require.Zero(t, def.NotFound.MaxAttempts, "not-found: one attempt per variant")
	require.Equal(t, 0.2, *def.Jitter)

	mine := []engine.Duration{engine.Duration(time.Millisecond)}
	p := engine.RetryPolicy{
		Transient: engine.ClassPolicy{MaxAttempts: 2},
		NotFound:  engine.ClassPolicy{Delays: mine},
		Jitter:    new(0.5),
	}.WithDefaults()
	require.Equal(t, 2, p.Transient.MaxAttempts)
	require.Equal(t, def.Transient.Delays, p.Transient.Delays)
	require.Equal(t, def.RateLimited, p.RateLimited)
	require.Equal(t, mine, p.NotFound.Delays)
	require.Zero(t, p.NotFound.MaxAttempts)
	require.Equal(t, 0.5, *p.Jitter)
}

func TestDecideUsesConfiguredDelaysAndJitter(t *testing.T) {
	t.Parallel()
	p := engine.RetryPolicy{Transient: engine.ClassPolicy{MaxAttempts: 3,
		Delays: []engine.Duration{engine.Duration(100 * time.Millisecond)}}, Jitter: new(0.01)}
	d := p.Decide(errors.New("x"), 1, 0, 0, retryNow, fixedRand())
	requireDelay(t, d, 100*time.Millisecond, 0.01)
	require.Equal(t, engine.ItemError, p.Decide(errors.New("x"), 3, 0, 0, retryNow, fixedRand()).Status)
}

// TestDecideZeroJitterIsExact: an explicit jitter of 0 switches it off.
func TestDecideZeroJitterIsExact(t *testing.T) {
	t.Parallel()
	p := engine.RetryPolicy{Jitter: new(0.0)}
	now := time.Unix(1000, 0)
	d := p.Decide(errors.New("boom"), 1, 0, 0, now, rand.New(rand.NewPCG(1, 2)))
	require.True(t, d.Retry)
	require.Equal(t, now.Add(time.Second), d.RunAt)
}

// TestDecideNotFoundAfterTransientStillRotates: a transient failure before
// the first NOT_FOUND does not use up a query variant.
func TestDecideNotFoundAfterTransientStillRotates(t *testing.T) {
	t.Parallel()
	p := engine.RetryPolicy{}
	now := time.Unix(1000, 0)
	// Attempt 1 failed transiently; attempt 2 (strategy 0) finds nothing;
	// the second of two variants remains.
	d := p.Decide(engine.NotFoundf("no match"), 2, 0, 2, now, fixedRand())
	require.True(t, d.Retry)
	require.Equal(t, 1, d.NextStrategy)
	d = p.Decide(engine.NotFoundf("no match"), 3, 1, 2, now, fixedRand())
	require.False(t, d.Retry)
	require.Equal(t, engine.ItemNotFound, d.Status)
}
