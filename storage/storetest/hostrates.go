package storetest

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// hostRateTests cover the learned per-host rates.
var hostRateTests = []subtest{
	{"SaveAndLoad", testHostRatesSaveAndLoad},
	{"Upsert", testHostRatesUpsert},
	{"Invalid", testHostRatesInvalid},
	{"Delete", testHostRatesDelete},
}

func (e *env) hostRates() []engine.HostRate {
	e.t.Helper()
	got, err := e.s.LoadHostRates(e.ctx)
	require.NoError(e.t, err, "LoadHostRates")
	return got
}

func testHostRatesSaveAndLoad(t *testing.T, e *env) {
	require.Empty(t, e.hostRates(), "a new store has no rates")
	require.NoError(t, e.s.SaveHostRates(e.ctx, nil, e.now()), "saving nothing is fine")

	err := e.s.SaveHostRates(e.ctx, []engine.HostRate{
		{Host: "vendor.example:8443", Rate: 42.75, Ceiling: 61.5, Concurrency: 5},
		{Host: "api.example", Rate: 3, Concurrency: 2, UpdatedAt: e.now().Add(-time.Hour)},
	}, e.now())
	require.NoError(t, err)
	got := e.hostRates()
	require.Len(t, got, 2)
	require.Equal(t, "api.example", got[0].Host, "ordered by host")
	require.Equal(t, 3.0, got[0].Rate)
	require.Zero(t, got[0].Ceiling)
	require.Equal(t, 2, got[0].Concurrency)
	requireTime(t, e.now(), got[0].UpdatedAt, "UpdatedAt is the save's now, not the value passed")
	require.Equal(t, "vendor.example:8443", got[1].Host)
	require.Equal(t, 42.75, got[1].Rate)
	require.Equal(t, 61.5, got[1].Ceiling)
	require.Equal(t, 5, got[1].Concurrency)
	requireTime(t, e.now(), got[1].UpdatedAt)
}

func testHostRatesUpsert(t *testing.T, e *env) {
	t0 := e.now()
	require.NoError(t, e.s.SaveHostRates(e.ctx, []engine.HostRate{
		{Host: "a", Rate: 10, Ceiling: 20, Concurrency: 4},
		{Host: "b", Rate: 7, Concurrency: 3},
	}, t0))
	t1 := e.advance(10 * time.Second)
	require.NoError(t, e.s.SaveHostRates(e.ctx, []engine.HostRate{{Host: "a", Rate: 5, Concurrency: 2}}, t1))
	got := e.hostRates()
	require.Len(t, got, 2, "a save replaces its hosts and keeps the others")
	require.Equal(t, engine.HostRate{Host: "a", Rate: 5, Concurrency: 2, UpdatedAt: got[0].UpdatedAt}, got[0],
		"every field is replaced, the ceiling too")
	requireTime(t, t1, got[0].UpdatedAt)
	require.Equal(t, 7.0, got[1].Rate)
	requireTime(t, t0, got[1].UpdatedAt, "hosts not saved again keep their time")
}

func testHostRatesInvalid(t *testing.T, e *env) {
	for name, r := range map[string]engine.HostRate{
		"no host":          {Rate: 1, Concurrency: 1},
		"zero rate":        {Host: "h", Concurrency: 1},
		"negative rate":    {Host: "h", Rate: -1},
		"NaN rate":         {Host: "h", Rate: math.NaN()},
		"infinite rate":    {Host: "h", Rate: math.Inf(1)},
		"negative ceiling": {Host: "h", Rate: 1, Ceiling: -1},
		"negative conc":    {Host: "h", Rate: 1, Concurrency: -1},
	} {
		err := e.s.SaveHostRates(e.ctx, []engine.HostRate{{Host: "ok", Rate: 1, Concurrency: 1}, r}, e.now())
		require.Error(t, err, name)
		require.Equal(t, engine.EINVALID, engine.ErrorCode(err), "%s: %v", name, err)
	}
	require.Empty(t, e.hostRates(), "an invalid rate saves none of its batch")
}

func testHostRatesDelete(t *testing.T, e *env) {
	save := func() {
		require.NoError(t, e.s.SaveHostRates(e.ctx, []engine.HostRate{
			{Host: "a", Rate: 1, Concurrency: 1}, {Host: "b", Rate: 2, Concurrency: 1}, {Host: "c", Rate: 3, Concurrency: 1},
		}, e.now()))
	}
	save()
	n, err := e.s.DeleteHostRates(e.ctx, "b", "nope")
	require.NoError(t, err)
	require.Equal(t, 1, n, "only existing hosts count")
	got := e.hostRates()
	require.Len(t, got, 2)
	require.Equal(t, "a", got[0].Host)
	require.Equal(t, "c", got[1].Host)

	n, err = e.s.DeleteHostRates(e.ctx, "nope")
	require.NoError(t, err, "deleting a host without a rate is not an error")
	require.Zero(t, n)

	save()
	n, err = e.s.DeleteHostRates(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n, "no host: every host")
	require.Empty(t, e.hostRates())
}
