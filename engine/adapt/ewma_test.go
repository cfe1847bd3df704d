package adapt_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine/adapt"
)

func TestEWMA(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		alpha float64
		obs   []float64
		want  float64
		count int64
	}{
		{name: "empty", alpha: 0.2, obs: nil, want: 0, count: 0},
		{name: "first observation sets the value", alpha: 0.2, obs: []float64{10}, want: 10, count: 1},
		{name: "blends later observations", alpha: 0.2, obs: []float64{10, 20}, want: 12, count: 2},
		{name: "three observations", alpha: 0.5, obs: []float64{0, 8, 4}, want: 4, count: 3},
		{name: "alpha one follows the last value", alpha: 1, obs: []float64{3, 9, 7}, want: 7, count: 3},
		{name: "non-finite values are ignored", alpha: 0.2, obs: []float64{math.NaN(), 10, math.Inf(1), math.Inf(-1)}, want: 10, count: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := adapt.NewEWMA(tt.alpha)
			for _, v := range tt.obs {
				a.Observe(v)
			}
			require.InDelta(t, tt.want, a.Value(), 1e-9)
			require.Equal(t, tt.count, a.Count())
		})
	}
}

func TestEWMASet(t *testing.T) {
	t.Parallel()
	a := adapt.NewEWMA(0.5)
	a.Set(100)
	require.InDelta(t, 100, a.Value(), 1e-9)
	require.Zero(t, a.Count(), "Set is not an observation")
	a.Observe(50) // blended with the seeded value, not replacing it
	require.InDelta(t, 75, a.Value(), 1e-9)
	require.EqualValues(t, 1, a.Count())
	a.Set(math.NaN())
	require.InDelta(t, 75, a.Value(), 1e-9)
}

func TestEWMABadAlphaPanics(t *testing.T) {
	t.Parallel()
	for _, alpha := range []float64{0, -0.1, 1.01, math.NaN()} {
		require.Panics(t, func() { adapt.NewEWMA(alpha) }, "alpha %v", alpha)
	}
}

func TestEWMASnapshotJSON(t *testing.T) {
	t.Parallel()
	a := adapt.NewEWMA(0.25)
	a.Observe(4)
	b, err := json.Marshal(a.Snapshot())
	require.NoError(t, err)
	require.JSONEq(t, `{"value":4,"count":1,"alpha":0.25}`, string(b))
}
