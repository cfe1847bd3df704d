package app_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/app/api"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/hostlimit"
	"github.com/sluicehq/sluice/storage/sqlite"
)

// TestStatsLocal: `sluice stats` reads the queue and the learned host
// rates from the data directory.
func TestStatsLocal(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("ingest", c.file("p.csv", "sku\na\nb\nc\n"))
	c.saveHostRate(engine.HostRate{Host: "api.example.com", Rate: 12, Ceiling: 20, Concurrency: 3}, time.Now())

	var got struct {
		Queue     engine.QueueSummary `json:"queue"`
		HostRates []engine.HostRate   `json:"hostRates"`
	}
	out := c.ok("stats", "--json")
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Equal(t, int64(3), got.Queue.Due)
	require.Len(t, got.HostRates, 1)
	require.Equal(t, 12.0, got.HostRates[0].Rate)

	out = c.ok("stats")
	require.Contains(t, out, "DUE")
	require.Regexp(t, `(?m)^3\s+0\s+0\s+0\s+-`, out)
	require.Regexp(t, `api\.example\.com\s+12\.0\s+20\.0\s+3`, out)

	code, _, errs := c.run("stats", "--series")
	require.Equal(t, 2, code, errs)
}

// TestStatsServer: `sluice stats --url` asks a running server.
func TestStatsServer(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "sluice.db"), sqlite.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	hosts := hostlimit.New(hostlimit.Config{})
	hosts.Seed("api.example.com", 40, 6)
	srv, err := api.New(api.Config{Store: st, Hosts: hosts})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv.Start(ctx)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.Close(); ts.Close() })
	_, token, err := api.CreateUser(t.Context(), st, "admin", true, "", time.Now())
	require.NoError(t, err)

	c := newCLI(t)
	out := c.ok("stats", "--url", ts.URL, "--token", token)
	require.Contains(t, out, "no runner in the server process")
	require.Regexp(t, `api\.example\.com\s+40\.0\s+40\.0\s+6`, out)
	require.NotContains(t, out, "SERIES")

	// The server samples once a second.
	var got struct {
		Series struct {
			QueueDue []json.RawMessage `json:"queueDue"`
		} `json:"series"`
	}
	require.Eventually(t, func() bool {
		out := c.ok("stats", "--url", ts.URL, "--token", token, "--series", "--json")
		require.NoError(t, json.Unmarshal([]byte(out), &got), out)
		return len(got.Series.QueueDue) > 0
	}, 10*time.Second, 200*time.Millisecond)

	out = c.ok("stats", "--url", ts.URL, "--token", token, "--series")
	require.Regexp(t, `queueDue\s+\d+\s+0\.0`, out)
	require.Regexp(t, `host api\.example\.com rate\s+\d+\s+40\.0`, out)

	code, _, errs := c.run("stats", "--url", ts.URL)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "401")
	code, _, _ = c.run("stats", "--url", "ftp://x")
	require.Equal(t, 2, code)
}
