package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClaimWindow: the producer claims while at most one claim's worth is
// ahead of the workers and at most two are in flight in all; processed
// items awaiting their group commit are in flight but not ahead, and
// items parked on a bounded stage count up to one claim's worth.
func TestClaimWindow(t *testing.T) {
	const size = 1000
	r := &Runner{inflight: map[int64]*inflightItem{}}
	var next int64
	hold := func(n int) {
		for range n {
			next++
			r.inflight[next] = &inflightItem{}
		}
	}
	open, all := r.claimWindow(size)
	require.True(t, open, "nothing in flight")
	require.Zero(t, all)

	hold(size)
	open, _ = r.claimWindow(size)
	require.True(t, open, "one claim's worth ahead of the workers")

	hold(size)
	open, all = r.claimWindow(size)
	require.False(t, open, "two claims' worth ahead of the workers")
	require.Equal(t, 2*size, all)

	// The first claim's items are processed and wait for their commit.
	r.awaiting.Store(size)
	open, _ = r.claimWindow(size)
	require.True(t, open, "the outcomes awaiting their commit do not hold the next claim back")

	// A commit wrote 993 of them: 1,007 in flight, 7 awaiting.
	for id := int64(1); id <= 993; id++ {
		delete(r.inflight, id)
	}
	r.awaiting.Store(7)
	open, _ = r.claimWindow(size)
	require.True(t, open, "1,000 ahead, 1,007 in flight")

	// Three claims' worth in flight, most of it processed: still no claim.
	hold(2 * size)
	r.awaiting.Store(int64(len(r.inflight) - size/2))
	open, _ = r.claimWindow(size)
	require.False(t, open, "more than two claims' worth in flight")

	// Parked items count toward the window only past one claim's worth.
	r = &Runner{inflight: map[int64]*inflightItem{}}
	hold(size + 300)
	r.gates.addParked(300)
	open, _ = r.claimWindow(size)
	require.True(t, open, "300 parked of 1,300: 1,000 ahead")
	r.gates.addParked(size)
	hold(size)
	open, _ = r.claimWindow(size)
	require.False(t, open, "1,300 parked count as 1,000: 1,300 ahead")
}
