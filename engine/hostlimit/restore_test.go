package hostlimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRestoreKeepsTheCeiling(t *testing.T) {
	t.Parallel()
	l, clk := newTestLimiter(Config{AdditiveStep: 1}, true)
	l.Restore("h", 20, 50, 6)
	s := state(t, l, "h")
	require.Equal(t, 20.0, s.Rate)
	require.Equal(t, 50.0, s.Ceiling)
	require.Equal(t, 6, s.Concurrency)

	// Healthy, busy windows recover half the distance to 90% of the
	// ceiling (45) per window, not one step per window.
	drive(t, l, clk, "h", 2*time.Second, always(OK))
	require.InDelta(t, 20+12.5+6.25, state(t, l, "h").Rate, 0.01)

	// Without a ceiling, Restore is Seed.
	l.Restore("g", 20, 0, 3)
	s = state(t, l, "g")
	require.Equal(t, 20.0, s.Ceiling)
	require.Equal(t, 3, s.Concurrency)
	l.Restore("k", 0, 50, 2)
	require.Zero(t, state(t, l, "k").Ceiling, "no rate: nothing about the rate changes")
	l.Restore("m", 20, 5000, 2)
	require.Equal(t, 1000.0, state(t, l, "m").Ceiling, "clamped to MaxRate")
}
