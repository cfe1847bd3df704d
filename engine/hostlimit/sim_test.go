package hostlimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// vendor is a simulated API allowing limit requests per (fixed, simulated)
// second and answering RateLimited beyond.
type vendor struct {
	limit   int
	second  int64
	count   int
	ok, rl  map[int64]int // per simulated second since start
	started time.Time
}

func newVendor(limit int, start time.Time) *vendor {
	return &vendor{limit: limit, second: -1, ok: map[int64]int{}, rl: map[int64]int{}, started: start}
}

func (v *vendor) answer(now time.Time) Outcome {
	sec := int64(now.Sub(v.started) / time.Second)
	if sec != v.second {
		v.second, v.count = sec, 0
	}
	v.count++
	if v.count > v.limit {
		v.rl[sec]++
		return RateLimited
	}
	v.ok[sec]++
	return OK
}

// totals sums OK and RateLimited answers over seconds [from, to).
func (v *vendor) totals(from, to int64) (ok, rl int) {
	for s := from; s < to; s++ {
		ok += v.ok[s]
		rl += v.rl[s]
	}
	return ok, rl
}

func TestSimulationLearnsVendorLimit(t *testing.T) {
	t.Parallel()
	l, clk := newTestLimiter(Config{}, true)
	v := newVendor(50, clk.Now())
	drive(t, l, clk, "api", 30*time.Second, v.answer)

	ok, rl := v.totals(10, 30)
	share := float64(rl) / float64(ok+rl)
	s := state(t, l, "api")
	var trace string
	for sec := int64(0); sec < 30; sec++ {
		trace += fmt.Sprintf("%d:%d/%d ", sec, v.ok[sec], v.rl[sec])
	}
	t.Logf("ok/s after 10s=%.1f 429 share=%.4f state=%+v\n%s", float64(ok)/20, share, s, trace)
	require.Less(t, share, 0.05)
	require.GreaterOrEqual(t, float64(ok)/20, 35.0, "sustained throughput")
	require.InDelta(t, 50, s.Ceiling, 10, "learned ceiling")
	require.GreaterOrEqual(t, s.Rate, 20.0)
	require.LessOrEqual(t, s.Rate, 60.0)
}

func TestSimulationRestartStartsNearLearnedRate(t *testing.T) {
	t.Parallel()
	l, clk := newTestLimiter(Config{}, true)
	v := newVendor(50, clk.Now())
	drive(t, l, clk, "api", 30*time.Second, v.answer)
	learned := state(t, l, "api")

	l2, clk2 := newTestLimiter(Config{}, true)
	l2.Seed("api", learned.Rate, learned.Concurrency)
	v2 := newVendor(50, clk2.Now())
	drive(t, l2, clk2, "api", 10*time.Second, v2.answer)
	ok, rl := v2.totals(0, 10)
	t.Logf("after restart: ok/s=%.1f 429=%d", float64(ok)/10, rl)
	require.GreaterOrEqual(t, float64(ok)/10, 35.0)
	require.Less(t, float64(rl)/float64(ok+rl), 0.05)
}

func TestSimulationFollowsLoweredLimit(t *testing.T) {
	t.Parallel()
	l, clk := newTestLimiter(Config{}, true)
	v := newVendor(50, clk.Now())
	drive(t, l, clk, "api", 20*time.Second, v.answer)
	v.limit = 20 // the vendor tightens its quota
	drive(t, l, clk, "api", 20*time.Second, v.answer)

	ok, rl := v.totals(30, 40)
	s := state(t, l, "api")
	t.Logf("after the drop: ok/s=%.1f 429=%d state=%+v", float64(ok)/10, rl, s)
	require.GreaterOrEqual(t, float64(ok)/10, 14.0)
	require.Less(t, float64(rl)/float64(ok+rl), 0.05)
	require.InDelta(t, 20, s.Ceiling, 5)
}
