package adapt_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine/adapt"
)

func TestLease(t *testing.T) {
	t.Parallel()
	s := time.Second
	tests := []struct {
		name        string
		cfg         adapt.LeaseConfig
		avg         time.Duration
		claimed     int
		concurrency int
		want        time.Duration
	}{
		// Defaults: floor 30s, cap 10m.
		{name: "no measurement gives the floor", avg: 0, claimed: 10, concurrency: 1, want: 30 * s},
		{name: "nothing claimed gives the floor", avg: s, claimed: 0, concurrency: 1, want: 30 * s},
		{name: "short work is raised to the floor", avg: s, claimed: 10, concurrency: 1, want: 30 * s},
		{name: "one worker waits for every item", avg: s, claimed: 100, concurrency: 1, want: 200 * s},
		{name: "spread over workers", avg: s, claimed: 100, concurrency: 4, want: 50 * s},
		{name: "rounds up per worker", avg: s, claimed: 101, concurrency: 4, want: 52 * s},
		{name: "fewer items than workers", avg: 20 * s, claimed: 3, concurrency: 8, want: 40 * s},
		{name: "capped", avg: time.Minute, claimed: 100, concurrency: 1, want: 10 * time.Minute},
		{name: "huge values saturate at the cap", avg: time.Duration(math.MaxInt64), claimed: math.MaxInt32, concurrency: 1, want: 10 * time.Minute},
		{name: "concurrency below 1 counts as 1", avg: s, claimed: 40, concurrency: 0, want: 80 * s},
		{name: "custom bounds", cfg: adapt.LeaseConfig{Floor: s, Cap: 5 * s}, avg: 100 * time.Millisecond, claimed: 12, concurrency: 1, want: 2400 * time.Millisecond},
		{name: "custom cap", cfg: adapt.LeaseConfig{Floor: s, Cap: 5 * s}, avg: s, claimed: 12, concurrency: 1, want: 5 * s},
		{name: "floor wins over an invalid cap", cfg: adapt.LeaseConfig{Floor: time.Minute, Cap: s}, avg: s, claimed: 1, concurrency: 1, want: time.Minute},
		{name: "non-positive bounds take defaults", cfg: adapt.LeaseConfig{Floor: -s, Cap: -s}, avg: 0, claimed: 1, concurrency: 1, want: 30 * s},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, adapt.Lease(tt.cfg, tt.avg, tt.claimed, tt.concurrency))
		})
	}
}

func TestRenewAfter(t *testing.T) {
	t.Parallel()
	require.Equal(t, 15*time.Second, adapt.RenewAfter(30*time.Second))
	require.Equal(t, 5*time.Minute, adapt.RenewAfter(10*time.Minute))
	require.Zero(t, adapt.RenewAfter(0))
	require.Zero(t, adapt.RenewAfter(-time.Second))
}
