package app

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/hostlimit"
	"github.com/sluicehq/sluice/storage/sqlite"
)

func hostState(lim *hostlimit.Limiter, host string) (hostlimit.HostState, bool) {
	for _, s := range lim.Snapshot() {
		if s.Host == host {
			return s, true
		}
	}
	return hostlimit.HostState{}, false
}

// TestHostRateKeeper: fresh rates are restored below their ceiling, stale
// ones ignored; a save writes only hosts that saw requests since.
func TestHostRateKeeper(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	now := time.Now().Truncate(time.Millisecond)
	require.NoError(t, store.SaveHostRates(ctx, []engine.HostRate{{Host: "fresh", Rate: 72, Ceiling: 61, Concurrency: 5}}, now.Add(-time.Hour)))
	require.NoError(t, store.SaveHostRates(ctx, []engine.HostRate{{Host: "calm", Rate: 12, Concurrency: 3}}, now.Add(-23*time.Hour)))
	require.NoError(t, store.SaveHostRates(ctx, []engine.HostRate{{Host: "stale", Rate: 30, Concurrency: 2}}, now.Add(-25*time.Hour)))

	lim := hostlimit.New(hostlimit.Config{})
	k := newHostRateKeeper(store, lim, slog.New(slog.NewTextHandler(io.Discard, nil)))
	k.now = func() time.Time { return now }
	restored, err := k.restore(ctx)
	require.NoError(t, err)
	require.Len(t, restored, 2)

	s, ok := hostState(lim, "fresh")
	require.True(t, ok)
	require.InDelta(t, 0.9*61, s.Rate, 1e-9, "a saved rate above 90% of the ceiling restarts at 90% of it")
	require.Equal(t, 61.0, s.Ceiling, "the ceiling is restored too")
	require.Equal(t, 5, s.Concurrency)
	s, ok = hostState(lim, "calm")
	require.True(t, ok)
	require.Equal(t, 12.0, s.Rate, "no 429 seen: the saved rate itself")
	_, ok = hostState(lim, "stale")
	require.False(t, ok, "rates older than 24 h are ignored")

	n, err := k.save(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "restored hosts without requests are not saved again (their age stays)")

	for _, h := range []string{"fresh", "new.example:8080"} {
		release, err := lim.Acquire(ctx, h)
		require.NoError(t, err)
		release(hostlimit.OK)
	}
	later := now.Add(time.Minute)
	k.now = func() time.Time { return later }
	n, err = k.save(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	rates, err := store.LoadHostRates(ctx)
	require.NoError(t, err)
	byHost := map[string]engine.HostRate{}
	for _, r := range rates {
		byHost[r.Host] = r
	}
	require.InDelta(t, 0.9*61, byHost["fresh"].Rate, 1e-9)
	require.Equal(t, later.UnixMilli(), byHost["fresh"].UpdatedAt.UnixMilli(), "saved at the save's time")
	require.Equal(t, 5.0, byHost["new.example:8080"].Rate, "a new host is saved at what it has learned")
	require.Equal(t, now.Add(-23*time.Hour).UnixMilli(), byHost["calm"].UpdatedAt.UnixMilli())

	n, err = k.save(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing changed: no write")
}

// TestKeepHostRatesStopSaves: the stop func of keepHostRates saves once
// more, after the periodic saving has ended.
func TestKeepHostRatesStopSaves(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	env := &Env{Store: store, Hosts: hostlimit.New(hostlimit.Config{}), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	stop := env.keepHostRatesEvery(ctx, time.Hour)
	release, err := env.Hosts.Acquire(ctx, "h")
	require.NoError(t, err)
	release(hostlimit.RateLimited)
	cancel() // the process is stopping: its context has ended
	stop()
	stop() // a second call does nothing
	rates, err := store.LoadHostRates(t.Context())
	require.NoError(t, err)
	require.Len(t, rates, 1)
	require.Equal(t, "h", rates[0].Host)
	require.Equal(t, 2.5, rates[0].Rate, "halved by the 429")
	require.Equal(t, 5.0, rates[0].Ceiling)
}
