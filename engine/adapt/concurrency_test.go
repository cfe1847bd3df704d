package adapt_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine/adapt"
)

// TestConcurrentUse exercises every type from many goroutines; run it with
// -race.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	var (
		e  = adapt.NewEWMA(0.2)
		g  = adapt.NewIngest(adapt.IngestConfig{})
		c  = adapt.NewClaim(adapt.ClaimConfig{Concurrency: 4})
		s  = adapt.NewSeries(16)
		wg sync.WaitGroup
	)
	const workers, rounds = 8, 200
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				d := time.Duration(w*rounds+i) * time.Microsecond
				e.Observe(float64(i))
				_ = e.Value()
				var err error
				if i%17 == 0 {
					err = errBusy
				}
				g.Observe(g.Rows(), 1000, d, err)
				_ = g.MaxBytes()
				c.ObserveItem(d)
				c.SetPressure(float64(i%10+1) / 10)
				_ = adapt.Lease(adapt.LeaseConfig{}, c.AvgItem(), c.Size(), 4)
				s.Add(t0.Add(d), float64(i))
				_ = s.Points()
				for _, v := range []any{e.Snapshot(), g.Snapshot(), c.Snapshot(), s.Snapshot()} {
					_, jerr := json.Marshal(v)
					if jerr != nil {
						t.Error(jerr)
					}
				}
			}
		})
	}
	wg.Wait()

	require.EqualValues(t, workers*rounds, e.Count())
	gs := g.Snapshot()
	require.EqualValues(t, workers*rounds, gs.Commits+gs.Failures)
	require.GreaterOrEqual(t, gs.Rows, gs.MinRows)
	require.LessOrEqual(t, gs.Rows, gs.MaxRows)
	require.EqualValues(t, workers*rounds, c.Snapshot().Observed)
	require.Equal(t, 16, s.Len())
}
