package engine_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

func TestEnqueueStoresQueuedJob(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	n := engine.NewNotifier()
	wake, unsub := n.Subscribe()
	defer unsub()
	g := newIngester(t, s, n)
	job, err := g.Enqueue(t.Context(), engine.EnqueueRequest{Name: "api", Source: "api", SourceRef: "req-1", Rows: rows(3)})
	require.NoError(t, err)
	require.Equal(t, engine.JobQueued, job.State)
	require.Equal(t, engine.DefaultPipeline, job.Pipeline)
	require.Equal(t, int64(3), job.TotalItems)
	require.Equal(t, engine.ItemCounts{Pending: 3}, job.Counts)
	require.Equal(t, "api", job.Source)
	require.Equal(t, "req-1", job.SourceRef)
	select {
	case <-wake:
	default:
		t.Fatal("Enqueue did not notify the workers")
	}

	items := scanItems(t, s, job.ID)
	require.Len(t, items, 3)
	for i, it := range items {
		require.Equal(t, int64(i+1), it.Seq)
		require.Equal(t, engine.ItemPending, it.Status)
		require.JSONEq(t, string(rows(3)[i]), string(it.Input))
	}
	require.JSONEq(t, `{"name":"item 2","n":"2"}`, string(items[1].Normalized))
}

func TestEnqueueNoRowsIsDone(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	g := newIngester(t, s, nil)
	job, err := g.Enqueue(t.Context(), engine.EnqueueRequest{})
	require.NoError(t, err)
	require.Equal(t, engine.JobDone, job.State)
	require.Zero(t, job.TotalItems)
}

func TestEnqueueRefusesTooManyRows(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	g := newIngester(t, s, nil)
	many := make([]json.RawMessage, engine.MaxEnqueueRows+1)
	for i := range many {
		many[i] = json.RawMessage(`{}`)
	}
	_, err := g.Enqueue(t.Context(), engine.EnqueueRequest{Rows: many})
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
	require.Contains(t, engine.ErrorMessage(err), "items:")

	job, err := g.Enqueue(t.Context(), engine.EnqueueRequest{Rows: many[:engine.MaxEnqueueRows]})
	require.NoError(t, err, "exactly the maximum is accepted")
	require.Equal(t, int64(engine.MaxEnqueueRows), job.TotalItems)
}

func TestEnqueueRefusesNonObjectRows(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	g := newIngester(t, s, nil)
	for _, bad := range []string{`[1,2]`, `"text"`, `null`, `42`, `{"unterminated":`} {
		_, err := g.Enqueue(t.Context(), engine.EnqueueRequest{Rows: []json.RawMessage{json.RawMessage(`{"a":1}`), json.RawMessage(bad)}})
		require.Equal(t, engine.EINVALID, engine.ErrorCode(err), bad)
		require.Contains(t, engine.ErrorMessage(err), "items[1]", bad)
	}
	jobs, err := s.ListJobs(t.Context(), &engine.ListJobsParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, jobs, "a refused request stores nothing")
}

func TestEnqueueUnknownPipeline(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	g := newIngester(t, s, nil)
	_, err := g.Enqueue(t.Context(), engine.EnqueueRequest{Pipeline: "ghost", Rows: rows(1)})
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
	require.Contains(t, engine.ErrorMessage(err), `"ghost"`)
}

func TestNormalizeObject(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{`{"Product Name":"  Widget ","Price (€)":" 9.99 "}`, `{"price":"9.99","product_name":"Widget"}`},
		{`{"n":12345678901234567890,"f":1.50,"b":true,"z":null}`, `{"b":true,"f":1.50,"n":12345678901234567890,"z":null}`},
		{`{"Nested":{"  a ":" x "},"List":[" y "]}`, `{"list":[" y "],"nested":{"  a ":" x "}}`},
		{`{"tab":"\t x\n"}`, `{"tab":"x"}`},
		{`{}`, `{}`},
	}
	for _, tc := range cases {
		got, err := engine.NormalizeObject(json.RawMessage(tc.in))
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, string(got), tc.in)
	}
}

func TestNormalizeObjectKeyCollisions(t *testing.T) {
	t.Parallel()
	got, err := engine.NormalizeObject(json.RawMessage(`{"A b":"1","a_b":"2","a-b":"3","???":"4"}`))
	require.NoError(t, err)
	var m map[string]string
	require.NoError(t, json.Unmarshal(got, &m))
	require.Len(t, m, 4, "no value is lost: %s", got)
	require.ElementsMatch(t, []string{"1", "2", "3", "4"}, []string{m["a_b"], m["a_b_2"], m["a_b_3"], m["column_1"]})
	// Sorted keys decide who keeps the plain name: "???" < "A b" < "a-b" < "a_b".
	require.Equal(t, "4", m["column_1"])
	require.Equal(t, "1", m["a_b"])
}

func TestNormalizeObjectRejectsNonObjects(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{`[]`, `null`, `"s"`, `1`, ``, `{`} {
		_, err := engine.NormalizeObject(json.RawMessage(bad))
		require.Error(t, err, "%q", bad)
	}
}

// fakeClock is a Clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestIngesterRereadsPipelinesAfterTheirTTL(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	p := noopPipeline("prio", "")
	p.Priority = 1
	putPipeline(t, s, p)
	clock := &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	g, err := engine.NewIngester(engine.IngesterConfig{Store: s, Clock: clock})
	require.NoError(t, err)
	req := engine.EnqueueRequest{Pipeline: "prio", Rows: rows(1)}

	job, err := g.Enqueue(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, 1, job.Priority)
	require.Equal(t, clock.Now(), job.CreatedAt, "the ingester's clock dates the job")

	// The ingester may cache pipelines for a few seconds (pipelineTTL),
	// not longer.
	p.Priority = 5
	putPipeline(t, s, p)
	clock.advance(6 * time.Second)
	job, err = g.Enqueue(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, 5, job.Priority, "a changed pipeline is seen once the cache entry expired")
}
