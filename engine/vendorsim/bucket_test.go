package vendorsim

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBucketRefusesBeyondBurstAndRefills(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	b := newBucket(10, 2, now)
	for range 2 {
		ok, _ := b.take(now)
		require.True(t, ok)
	}
	ok, wait := b.take(now)
	require.False(t, ok)
	require.Equal(t, 100*time.Millisecond, wait)

	ok, _ = b.take(now.Add(100 * time.Millisecond))
	require.True(t, ok, "one token earned after 1/rate")
	ok, _ = b.take(now.Add(100 * time.Millisecond))
	require.False(t, ok)

	// A long pause refills only up to the burst.
	later := now.Add(time.Hour)
	for range 2 {
		ok, _ = b.take(later)
		require.True(t, ok)
	}
	ok, _ = b.take(later)
	require.False(t, ok)
}

func TestBucketUnlimitedAndRateChange(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	b := newBucket(0, 0, now)
	for range 1000 {
		ok, _ := b.take(now)
		require.True(t, ok)
	}
	b.setRate(1, 1, now)
	ok, _ := b.take(now)
	require.True(t, ok, "the bucket keeps its tokens, capped to the new burst")
	ok, wait := b.take(now)
	require.False(t, ok)
	require.Equal(t, time.Second, wait)
}

func TestDefaultBurst(t *testing.T) {
	t.Parallel()
	require.Equal(t, 1, defaultBurst(0.5))
	require.Equal(t, 50, defaultBurst(50))
	require.Equal(t, 3, defaultBurst(2.5))
}

func TestBucketConcurrentTakesNeverExceedTheBurst(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	b := newBucket(5, 10, now)
	var wg sync.WaitGroup
	var granted atomic.Int64
	for range 50 {
		wg.Go(func() {
			if ok, _ := b.take(now); ok {
				granted.Add(1)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(10), granted.Load())
}

func TestBucketFractionalRateWait(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	b := newBucket(0.25, 1, now)
	ok, _ := b.take(now)
	require.True(t, ok)
	ok, wait := b.take(now.Add(time.Second))
	require.False(t, ok)
	require.Equal(t, 3*time.Second, wait, "a quarter token earned, three quarters to go")
}
