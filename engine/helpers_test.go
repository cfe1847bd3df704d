package engine_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/storage/sqlite"
)

// newStore opens a fresh SQLite store in the test's temporary directory.
func newStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "s.db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// newIngester returns an ingester on s that wakes n (which may be nil).
func newIngester(t *testing.T, s engine.Store, n *engine.Notifier) *engine.Ingester {
	t.Helper()
	g, err := engine.NewIngester(engine.IngesterConfig{Store: s, Notifier: n})
	require.NoError(t, err)
	return g
}

// putPipeline stores a pipeline after checking that it validates against
// testRegistry.
func putPipeline(t *testing.T, s engine.Store, p *engine.Pipeline) {
	t.Helper()
	require.NoError(t, p.Validate(testRegistry()))
	_, err := s.PutPipeline(t.Context(), &engine.PutPipelineParams{Pipeline: p, Now: time.Now()})
	require.NoError(t, err)
}

// noopPipeline is a one-stage noop pipeline with the given config whose
// retries come due after a few milliseconds.
func noopPipeline(name, config string) *engine.Pipeline {
	st := engine.Stage{Processor: "noop"}
	if config != "" {
		st.Config = json.RawMessage(config)
	}
	return &engine.Pipeline{Name: name, Stages: []engine.Stage{st}, Retry: fastRetry()}
}

// fastRetry is a retry policy whose delays are tiny, so that drains finish
// quickly.
func fastRetry() engine.RetryPolicy {
	d := []engine.Duration{engine.Duration(10 * time.Millisecond)}
	return engine.RetryPolicy{
		Transient:   engine.ClassPolicy{Delays: d},
		RateLimited: engine.ClassPolicy{Delays: d},
		NotFound:    engine.ClassPolicy{Delays: d},
	}
}

// rows returns n JSON objects {"Name":" item i ","N":"i"} (untrimmed names,
// so that input and normalised input differ).
func rows(n int) []json.RawMessage {
	out := make([]json.RawMessage, n)
	for i := range out {
		out[i] = json.RawMessage(fmt.Sprintf(`{"Name":" item %d ","N":"%d"}`, i+1, i+1))
	}
	return out
}

// enqueue stores a job of n rows on the pipeline. (With a runner already
// running the returned job may already be RUNNING: it is read back after the
// commit.)
func enqueue(t *testing.T, g *engine.Ingester, pipeline string, n int) *engine.Job {
	t.Helper()
	job, err := g.Enqueue(t.Context(), engine.EnqueueRequest{Pipeline: pipeline, Name: fmt.Sprintf("%s-%d", pipeline, n), Rows: rows(n)})
	require.NoError(t, err)
	require.Equal(t, int64(n), job.TotalItems)
	return job
}

// csvRows returns a CSV with a header and n data rows.
func csvRows(n int) string {
	var b strings.Builder
	b.WriteString("Product Name,Price\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "product %d,%d.50\n", i, i)
	}
	return b.String()
}

// scanItems returns every item of a job, sorted by seq, with its input.
func scanItems(t *testing.T, s engine.Store, jobID int64) []*engine.Item {
	t.Helper()
	var out []*engine.Item
	err := s.ScanItems(t.Context(), &engine.ScanItemsParams{JobID: jobID, WithInput: true}, func(it *engine.Item) error {
		out = append(out, it)
		return nil
	})
	require.NoError(t, err)
	slices.SortFunc(out, func(a, b *engine.Item) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// getJob reads a job.
func getJob(t *testing.T, s engine.Store, id int64) *engine.Job {
	t.Helper()
	j, err := s.GetJob(t.Context(), id)
	require.NoError(t, err)
	return j
}

// newRunner returns a runner on s with a short poll; cfg fields that are set
// are kept.
func newRunner(t *testing.T, s engine.Store, cfg engine.RunnerConfig) *engine.Runner {
	t.Helper()
	cfg.Store = s
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 5 * time.Millisecond
	}
	if cfg.WorkerID == "" {
		cfg.WorkerID = "test-" + t.Name()
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	r, err := engine.NewRunner(cfg)
	require.NoError(t, err)
	return r
}

// drain runs a draining runner until nothing is left and returns its summary.
func drain(t *testing.T, s engine.Store, cfg engine.RunnerConfig) *engine.RunSummary {
	t.Helper()
	cfg.Drain = true
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sum, err := newRunner(t, s, cfg).Run(ctx)
	require.NoError(t, err)
	require.NoError(t, ctx.Err(), "drain did not finish in time")
	return sum
}

// requireNoProcessing checks that no item of the store is left PROCESSING.
func requireNoProcessing(t *testing.T, s engine.Store) {
	t.Helper()
	page, err := s.ListItems(t.Context(), &engine.ListItemsParams{Statuses: []engine.ItemStatus{engine.ItemProcessing}, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, page.Items, "items left PROCESSING")
	q, err := s.QueueSummary(t.Context(), time.Now())
	require.NoError(t, err)
	require.Zero(t, q.Processing)
}

// watchedStore wraps a Store, counts what the runner claims and completes,
// and signals after each claim and completion, so tests wait on events
// rather than sleep (and never read Runner.Summary while Run is running).
type watchedStore struct {
	engine.Store
	claimed     atomic.Int64 // items claimed
	emptyClaims atomic.Int64 // claims that found nothing
	completed   atomic.Int64 // outcomes applied
	changed     chan struct{}
}

func watch(s engine.Store) *watchedStore {
	return &watchedStore{Store: s, changed: make(chan struct{}, 1)}
}

func (w *watchedStore) signal() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *watchedStore) ClaimItems(ctx context.Context, p *engine.ClaimItemsParams) ([]*engine.Item, error) {
	items, err := w.Store.ClaimItems(ctx, p)
	if err == nil {
		w.claimed.Add(int64(len(items)))
		if len(items) == 0 {
			w.emptyClaims.Add(1)
		}
		w.signal()
	}
	return items, err
}

func (w *watchedStore) CompleteItems(ctx context.Context, p *engine.CompleteItemsParams) (*engine.CompleteItemsResult, error) {
	res, err := w.Store.CompleteItems(ctx, p)
	if err == nil {
		w.completed.Add(int64(res.Applied))
		w.signal()
	}
	return res, err
}

// waitFor waits until cond holds, checking after each claim or completion.
func (w *watchedStore) waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for !cond() {
		select {
		case <-w.changed:
		case <-timeout:
			t.Fatal("condition not reached in 20s")
		}
	}
}
