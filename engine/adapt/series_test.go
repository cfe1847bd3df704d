package adapt_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine/adapt"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

func TestSeries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		capacity int
		add      int // samples at(i) with value i, for i in [0, add)
		want     []float64
	}{
		{name: "empty", capacity: 3, add: 0, want: []float64{}},
		{name: "partly filled", capacity: 3, add: 2, want: []float64{0, 1}},
		{name: "exactly full", capacity: 3, add: 3, want: []float64{0, 1, 2}},
		{name: "wraps once", capacity: 3, add: 4, want: []float64{1, 2, 3}},
		{name: "wraps many times", capacity: 3, add: 11, want: []float64{8, 9, 10}},
		{name: "capacity below 1 keeps one", capacity: 0, add: 5, want: []float64{4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := adapt.NewSeries(tt.capacity)
			for i := range tt.add {
				s.Add(at(i), float64(i))
			}
			pts := s.Points()
			require.NotNil(t, pts)
			got := make([]float64, 0, len(pts))
			for _, p := range pts {
				require.Equal(t, at(int(p.V)), p.T, "timestamp travels with its value")
				got = append(got, p.V)
			}
			require.Equal(t, tt.want, got)
			require.Equal(t, len(tt.want), s.Len())
			require.Equal(t, max(tt.capacity, 1), s.Cap())
		})
	}
}

func TestSeriesIgnoresNonFinite(t *testing.T) {
	t.Parallel()
	s := adapt.NewSeries(4)
	s.Add(at(0), math.NaN())
	s.Add(at(1), math.Inf(1))
	s.Add(at(2), 2)
	require.Equal(t, []adapt.Point{{T: at(2), V: 2}}, s.Points())
}

func TestSeriesPointsIsACopy(t *testing.T) {
	t.Parallel()
	s := adapt.NewSeries(2)
	s.Add(at(0), 1)
	pts := s.Points()
	pts[0].V = 99
	require.InDelta(t, 1, s.Points()[0].V, 0)
}

func TestSeriesSnapshotJSON(t *testing.T) {
	t.Parallel()
	s := adapt.NewSeries(2)
	s.Add(at(0), 1.5)
	b, err := json.Marshal(s.Snapshot())
	require.NoError(t, err)
	require.JSONEq(t, `{"capacity":2,"points":[{"t":"2025-01-02T03:04:05Z","v":1.5}]}`, string(b))

	b, err = json.Marshal(adapt.NewSeries(2).Snapshot())
	require.NoError(t, err)
	require.JSONEq(t, `{"capacity":2,"points":[]}`, string(b))
}
