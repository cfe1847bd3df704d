package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/app"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/vendorsim"
	"github.com/sluicehq/sluice/storage/sqlite"
)

type hostRateJSON struct {
	Host        string    `json:"host"`
	Rate        float64   `json:"rate"`
	Ceiling     float64   `json:"ceiling"`
	Concurrency int       `json:"concurrency"`
	UpdatedAt   time.Time `json:"updatedAt"`
	RestartRate float64   `json:"restartRate"`
	Stale       bool      `json:"stale"`
}

// hostRates is `sluice hosts --json` by host.
func (c *cli) hostRates() map[string]hostRateJSON {
	c.t.Helper()
	var rates []hostRateJSON
	out := c.ok("hosts", "--json")
	require.NoError(c.t, json.Unmarshal([]byte(out), &rates), out)
	m := map[string]hostRateJSON{}
	for _, r := range rates {
		m[r.Host] = r
	}
	return m
}

// saveHostRate stores a learned rate as a process that stopped at saved
// would have left it.
func (c *cli) saveHostRate(r engine.HostRate, saved time.Time) {
	c.t.Helper()
	s, err := sqlite.Open(c.t.Context(), filepath.Join(c.data, app.DBFile), sqlite.Options{})
	require.NoError(c.t, err)
	defer s.Close()
	require.NoError(c.t, s.SaveHostRates(c.t.Context(), []engine.HostRate{r}, saved))
}

// TestHostRatesSurviveRestart: every command that runs workers (worker,
// ingest --wait, --serve) starts the vendor's host at the rate stored by
// an earlier process, not from slow start (5 req/s), and saves what it
// learned when it stops; stale rates are ignored; `hosts reset` forgets.
//
// A restored rate of 200 req/s can only be read back after these short
// runs if it was restored: slow start would need ~10 busy seconds to get
// there. A rate read back saved after the run started shows it was saved.
func TestHostRatesSurviveRestart(t *testing.T) {
	t.Parallel()
	sim := vendorsim.New(vendorsim.Config{})
	t.Cleanup(sim.Close)
	host := strings.TrimPrefix(sim.URL(), "http://")
	c := newCLI(t)
	pl := c.file("lookup.json", fmt.Sprintf(`{"name":"lookup","stages":[{"processor":"http","config":{"url":%q,"map":{"name":"product.name"}}}]}`,
		sim.URL()+"/lookup?sku={{.sku}}"))
	c.ok("pipeline", "apply", pl)
	var rows strings.Builder
	rows.WriteString("sku\n")
	for i := range 20 {
		fmt.Fprintf(&rows, "S%d\n", i)
	}
	csv := c.file("skus.csv", rows.String())

	requireRestored := func(what string, rate float64, since time.Time) {
		t.Helper()
		got, ok := c.hostRates()[host]
		require.True(t, ok, "%s: the host's rate is saved when the process stops", what)
		require.True(t, got.UpdatedAt.After(since), "%s: saved by this run (saved at %s, run from %s)", what, got.UpdatedAt, since)
		require.GreaterOrEqual(t, got.Rate, rate, "%s: the run started from the stored rate", what)
	}

	// A first, cold process: slow start, and its rate is saved at exit.
	start := time.Now().Add(-time.Second)
	c.ok("ingest", csv, "--pipeline", "lookup", "--wait")
	cold := c.hostRates()[host]
	require.True(t, cold.UpdatedAt.After(start), "ingest --wait saves the learned rate")
	require.Less(t, cold.Rate, 50.0, "a cold start is slow start from 5 req/s")
	require.False(t, cold.Stale)

	// ingest --wait
	start = time.Now().Add(-time.Second)
	c.saveHostRate(engine.HostRate{Host: host, Rate: 200, Concurrency: 8}, start)
	c.ok("ingest", csv, "--pipeline", "lookup", "--wait")
	requireRestored("ingest --wait", 200, start)

	// worker --drain, with a ceiling: restarts at 90% of it.
	start = time.Now().Add(-time.Second)
	c.saveHostRate(engine.HostRate{Host: host, Rate: 400, Ceiling: 300, Concurrency: 8}, start)
	require.Equal(t, 270.0, c.hostRates()[host].RestartRate)
	c.ok("ingest", csv, "--pipeline", "lookup")
	c.ok("worker", "--drain")
	requireRestored("worker", 270, start)
	got := c.hostRates()[host]
	require.Less(t, got.Rate, 400.0, "not the saved rate above the ceiling")
	require.Equal(t, 300.0, got.Ceiling, "the ceiling is kept")

	// --serve: ended like SIGTERM (its context ends) once the job is done.
	start = time.Now().Add(-time.Second)
	c.saveHostRate(engine.HostRate{Host: host, Rate: 200, Concurrency: 8}, start)
	c.ok("ingest", csv, "--pipeline", "lookup")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan int, 1)
	var out, errb bytes.Buffer
	go func() {
		done <- app.Main(ctx, []string{"--data", c.data, "--log-level", "error", "--serve", "--addr", "127.0.0.1:0"}, &out, &errb)
	}()
	db := openDB(t, c.data)
	require.Eventually(t, func() bool {
		return count(t, db, `SELECT COUNT(*) FROM job_items WHERE status IN (`+stored(engine.ItemPending)+`, `+stored(engine.ItemProcessing)+`)`) == 0
	}, 30*time.Second, 50*time.Millisecond)
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("--serve did not stop")
	}
	requireRestored("--serve", 200, start)
	require.Equal(t, int64(80), sim.Stats().OK, "every item was looked up once")

	// Stale rates are ignored: the run starts cold again.
	start = time.Now().Add(-time.Second)
	c.saveHostRate(engine.HostRate{Host: host, Rate: 200, Concurrency: 8}, start.Add(-25*time.Hour))
	require.True(t, c.hostRates()[host].Stale)
	c.ok("ingest", csv, "--pipeline", "lookup", "--wait")
	got = c.hostRates()[host]
	require.True(t, got.UpdatedAt.After(start))
	require.Less(t, got.Rate, 50.0, "a stale rate is not restored")

	// Reset forgets.
	require.Contains(t, c.ok("hosts"), host)
	require.Equal(t, "1 host rate(s) reset\n", c.ok("hosts", "reset", host))
	require.Empty(t, c.hostRates())
	code, _, errs := c.run("hosts", "reset", host)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "no learned rate for "+host)
}
