package adapt_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine/adapt"
)

func TestClaimSize(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name     string
		cfg      adapt.ClaimConfig
		items    []time.Duration
		pressure float64 // 0 leaves the pressure untouched
		want     int
	}{
		// Defaults: 5s slice, safety 0.7, one worker, bounds [1, 1000].
		{name: "100ms items", items: []time.Duration{100 * ms}, want: 35},
		{name: "10ms items", items: []time.Duration{10 * ms}, want: 350},
		{name: "1s items round down", items: []time.Duration{time.Second}, want: 3},
		{name: "1ms items hit Max", items: []time.Duration{ms}, want: 1000},
		{name: "10s items hit Min", items: []time.Duration{10 * time.Second}, want: 1},
		{name: "zero-length items give Max", items: []time.Duration{0, 0}, want: 1000},
		{name: "sub-microsecond items give Max", items: []time.Duration{100 * time.Nanosecond}, want: 1000},
		{name: "negative durations count as zero", items: []time.Duration{-time.Second}, want: 1000},
		{name: "concurrency multiplies", cfg: adapt.ClaimConfig{Concurrency: 4}, items: []time.Duration{100 * ms}, want: 140},
		{name: "safety scales", cfg: adapt.ClaimConfig{Safety: 1}, items: []time.Duration{100 * ms}, want: 50},
		{name: "target slice scales", cfg: adapt.ClaimConfig{TargetSlice: time.Second}, items: []time.Duration{100 * ms}, want: 7},
		{name: "custom Max", cfg: adapt.ClaimConfig{Max: 20}, items: []time.Duration{100 * ms}, want: 20},
		{name: "custom Min", cfg: adapt.ClaimConfig{Min: 10}, items: []time.Duration{10 * time.Second}, want: 10},
		{name: "pressure halves", items: []time.Duration{100 * ms}, pressure: 0.5, want: 17},
		{name: "pressure above 1 is clamped", items: []time.Duration{100 * ms}, pressure: 3, want: 35},
		{name: "tiny pressure is clamped but Min holds", items: []time.Duration{100 * ms}, pressure: -1, want: 1},
		{name: "NaN pressure is ignored", items: []time.Duration{100 * ms}, pressure: math.NaN(), want: 35},
		{name: "pressure with concurrency", cfg: adapt.ClaimConfig{Concurrency: 8}, items: []time.Duration{100 * ms}, pressure: 0.25, want: 70},
		{name: "average of items", items: []time.Duration{100 * ms, 200 * ms}, want: 31}, // avg 110ms → 31.8
		// Before any observation: one item per worker.
		{name: "initial size", want: 1},
		{name: "initial size is one per worker", cfg: adapt.ClaimConfig{Concurrency: 8}, want: 8},
		{name: "initial size within Max", cfg: adapt.ClaimConfig{Concurrency: 8, Max: 4}, want: 4},
		{name: "initial size within Min", cfg: adapt.ClaimConfig{Min: 16}, want: 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := adapt.NewClaim(tt.cfg)
			for _, d := range tt.items {
				c.ObserveItem(d)
			}
			if tt.pressure != 0 {
				c.SetPressure(tt.pressure)
			}
			require.Equal(t, tt.want, c.Size())
			require.Equal(t, tt.want, c.Snapshot().Size)
		})
	}
}

func TestClaimAvgItem(t *testing.T) {
	t.Parallel()
	c := adapt.NewClaim(adapt.ClaimConfig{})
	require.Zero(t, c.AvgItem())
	c.ObserveItem(100 * time.Millisecond)
	require.Equal(t, 100*time.Millisecond, c.AvgItem())
	c.ObserveItem(200 * time.Millisecond) // alpha 0.1
	require.InDelta(t, float64(110*time.Millisecond), float64(c.AvgItem()), float64(time.Microsecond))
}

func TestClaimPressureClamp(t *testing.T) {
	t.Parallel()
	c := adapt.NewClaim(adapt.ClaimConfig{})
	require.InDelta(t, 1, c.Snapshot().Pressure, 0)
	c.SetPressure(0)
	require.InDelta(t, adapt.MinPressure, c.Snapshot().Pressure, 0)
	c.SetPressure(0.6)
	require.InDelta(t, 0.6, c.Snapshot().Pressure, 0)
	c.SetPressure(7)
	require.InDelta(t, 1, c.Snapshot().Pressure, 0)
}

func TestClaimSetConcurrency(t *testing.T) {
	t.Parallel()
	c := adapt.NewClaim(adapt.ClaimConfig{})
	c.ObserveItem(100 * time.Millisecond)
	require.Equal(t, 35, c.Size())
	c.SetConcurrency(2)
	require.Equal(t, 70, c.Size())
	c.SetConcurrency(0)
	require.Equal(t, 35, c.Size())
	require.Equal(t, 1, c.Snapshot().Concurrency)
}

func TestClaimSnapshotJSON(t *testing.T) {
	t.Parallel()
	c := adapt.NewClaim(adapt.ClaimConfig{Concurrency: 2})
	c.ObserveItem(250 * time.Millisecond)
	c.SetPressure(0.5)
	b, err := json.Marshal(c.Snapshot())
	require.NoError(t, err)
	require.JSONEq(t, `{"size":14,"avgItemMs":250,"pressure":0.5,"observed":1,
		"min":1,"max":1000,"concurrency":2,"targetSliceMs":5000}`, string(b))
}

func TestClaimRepairsInvalidConfig(t *testing.T) {
	t.Parallel()
	c := adapt.NewClaim(adapt.ClaimConfig{TargetSlice: -time.Second, Min: 50, Max: 10, Safety: 9, Concurrency: -3})
	s := c.Snapshot()
	require.Equal(t, 50, s.Min)
	require.Equal(t, 50, s.Max)
	require.Equal(t, 1, s.Concurrency)
	require.InDelta(t, 5000, s.TargetSliceMs, 0)
	require.Equal(t, 50, s.Size)
}
