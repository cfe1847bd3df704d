package httpproc_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/httpproc"
	"github.com/sluicehq/sluice/engine/vendorsim"
	"github.com/sluicehq/sluice/storage/sqlite"
)

// TestRunnerDrainsAnHTTPPipeline wires the processor into a real runner and
// store: mapped results for known keys, NOT_FOUND for the others (after the
// query variant), transient 5xx retried away.
func TestRunnerDrainsAnHTTPPipeline(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	missing := map[string]bool{"SKU-3": true, "SKU-7": true}
	s := sim(t, vendorsim.Config{
		NotFoundKeys: []string{"SKU-3", "SKU-7", "alt-SKU-3", "alt-SKU-7"},
		Err5xxRate:   0.2,
		Seed:         3,
	})
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, store.Close()) })

	reg := engine.NewRegistry()
	reg.Register(httpproc.Kind, httpproc.New)
	config := strings.ReplaceAll(`{"url":"$URL/lookup?sku={{.sku}}","map":{"name":"product.name","price":"product.price"},
		"variants":[{"url":"$URL/lookup?sku=alt-{{.sku}}"}]}`, "$URL", s.URL())
	fast := []engine.Duration{engine.Duration(10 * time.Millisecond)}
	pl := &engine.Pipeline{Name: "lookup", Stages: []engine.Stage{{Processor: httpproc.Kind, Config: json.RawMessage(config)}},
		Retry: engine.RetryPolicy{
			Transient:   engine.ClassPolicy{MaxAttempts: 20, Delays: fast},
			RateLimited: engine.ClassPolicy{Delays: fast},
			// Attempts count every class, so a 5xx before the 404 would
			// otherwise use up the default "one attempt per variant".
			NotFound: engine.ClassPolicy{MaxAttempts: 20, Delays: fast},
		}}
	require.NoError(t, pl.Validate(reg))
	_, err = store.PutPipeline(ctx, &engine.PutPipelineParams{Pipeline: pl, Now: time.Now()})
	require.NoError(t, err)

	g, err := engine.NewIngester(engine.IngesterConfig{Store: store})
	require.NoError(t, err)
	const n = 20
	rows := make([]json.RawMessage, n)
	for i := range rows {
		rows[i] = json.RawMessage(fmt.Sprintf(`{"SKU":"SKU-%d"}`, i+1))
	}
	job, err := g.Enqueue(ctx, engine.EnqueueRequest{Pipeline: "lookup", Name: "skus", Rows: rows})
	require.NoError(t, err)

	r, err := engine.NewRunner(engine.RunnerConfig{Store: store, Registry: reg, Drain: true,
		PollInterval: 5 * time.Millisecond, Concurrency: 8, Seed: 1, WorkerID: "http-e2e"})
	require.NoError(t, err)
	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	_, err = r.Run(runCtx)
	require.NoError(t, err)
	require.NoError(t, runCtx.Err(), "drain did not finish in time")

	var items []*engine.Item
	require.NoError(t, store.ScanItems(ctx, &engine.ScanItemsParams{JobID: job.ID}, func(it *engine.Item) error {
		items = append(items, it)
		return nil
	}))
	require.Len(t, items, n)
	slices.SortFunc(items, func(a, b *engine.Item) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, it := range items {
		sku := fmt.Sprintf("SKU-%d", it.Seq)
		if missing[sku] {
			require.Equal(t, engine.ItemNotFound, it.Status, sku)
			require.GreaterOrEqual(t, s.Hits("alt-"+sku), 1, "%s: the variant was tried", sku)
			continue
		}
		require.Equal(t, engine.ItemDone, it.Status, "%s: %s", sku, it.LastError)
		require.JSONEq(t, fmt.Sprintf(`{"name":"Name %s","price":12.5}`, sku), string(it.Result), sku)
		// A successful attempt is recorded with its detail too.
		att, err := store.ListAttempts(ctx, it.ID)
		require.NoError(t, err)
		var ok httpproc.Detail
		require.NoError(t, json.Unmarshal(att[len(att)-1].Detail, &ok), "%s: detail %s", sku, att[len(att)-1].Detail)
		require.Equal(t, 200, ok.Status, sku)
		require.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, ok.Traceparent, sku)
	}
	st := s.Stats()
	require.Positive(t, st.ServerErrors, "the 5xx rate was exercised")
	require.Equal(t, st.Requests, st.OK+st.NotFound+st.ServerErrors)

	attempts, err := store.ListAttempts(ctx, items[2].ID)
	require.NoError(t, err)
	require.NotEmpty(t, attempts)
	var d httpproc.Detail
	last := attempts[len(attempts)-1]
	require.NoError(t, json.Unmarshal(last.Detail, &d), "detail %s", last.Detail)
	require.Equal(t, 404, d.Status)
	require.Equal(t, 1, d.Variant)
	require.Equal(t, s.URL()+"/lookup?sku=alt-SKU-3", d.URL)
}
