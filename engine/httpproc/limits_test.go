package httpproc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/hostlimit"
	"github.com/sluicehq/sluice/engine/httpproc"
	"github.com/sluicehq/sluice/engine/vendorsim"
	"github.com/sluicehq/sluice/storage/sqlite"
)

// TestHostLimitsPaceRequests: with the shared per-host limiter, a job
// against a vendor limited to 20 req/s ends with every item DONE, and the
// limiter has seen every answer the vendor gave, 429s included.
func TestHostLimitsPaceRequests(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := sim(t, vendorsim.Config{RatePerSec: 20, Seed: 5})
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })

	limits := hostlimit.New(hostlimit.Config{InitialRate: 10})
	reg := engine.NewRegistry()
	reg.Register(httpproc.Kind, httpproc.NewFactory(limits))
	config := strings.ReplaceAll(`{"url":"$URL/lookup?sku={{.sku}}","map":{"name":"product.name"}}`, "$URL", s.URL())
	fast := []engine.Duration{engine.Duration(10 * time.Millisecond)}
	pl := &engine.Pipeline{Name: "paced", Stages: []engine.Stage{{Processor: httpproc.Kind, Config: json.RawMessage(config)}},
		Retry: engine.RetryPolicy{RateLimited: engine.ClassPolicy{MaxAttempts: 50, Delays: fast}}}
	_, err = store.PutPipeline(ctx, &engine.PutPipelineParams{Pipeline: pl, Now: time.Now()})
	require.NoError(t, err)
	g, err := engine.NewIngester(engine.IngesterConfig{Store: store})
	require.NoError(t, err)
	const n = 40
	rows := make([]json.RawMessage, n)
	for i := range rows {
		rows[i] = json.RawMessage(fmt.Sprintf(`{"sku":"P%d"}`, i+1))
	}
	job, err := g.Enqueue(ctx, engine.EnqueueRequest{Pipeline: "paced", Rows: rows})
	require.NoError(t, err)

	r, err := engine.NewRunner(engine.RunnerConfig{Store: store, Registry: reg, Drain: true,
		PollInterval: 5 * time.Millisecond, Concurrency: 16, Seed: 1})
	require.NoError(t, err)
	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	_, err = r.Run(runCtx)
	require.NoError(t, err)
	require.NoError(t, runCtx.Err())

	got, err := store.GetJob(ctx, job.ID)
	require.NoError(t, err)
	require.Equal(t, engine.ItemCounts{Done: n}, got.Counts)

	u, err := url.Parse(s.URL())
	require.NoError(t, err)
	snap := limits.Snapshot()
	require.Len(t, snap, 1)
	require.Equal(t, u.Host, snap[0].Host)
	st := s.Stats()
	require.Equal(t, st.OK, snap[0].OK, "every success went through the limiter")
	require.Equal(t, st.TooMany, snap[0].RateLimited, "every 429 went through the limiter")
	require.Zero(t, snap[0].InFlight)
}
