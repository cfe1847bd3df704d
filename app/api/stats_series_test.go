package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/adapt"
	"github.com/sluicehq/sluice/engine/hostlimit"
)

type statsSeriesAnswer struct {
	Queue  *engine.QueueSummary `json:"queue"`
	Series *seriesOut           `json:"series"`
}

func values(ps []adapt.Point) []float64 {
	out := make([]float64, len(ps))
	for i, p := range ps {
		out[i] = p.V
	}
	return out
}

// TestStatsSeries: each sample adds a point to every line the server can
// sample; ?series=1 returns them oldest first, without it the answer is
// unchanged.
func TestStatsSeries(t *testing.T) {
	t.Parallel()
	lease := adapt.LeaseConfig{Floor: 2 * time.Second, Cap: time.Minute}
	var runner *engine.Runner
	hosts := hostlimit.New(hostlimit.Config{})
	hosts.Seed("api.example.com", 40, 6)
	h := newHarness(t, noHub, func(s *harnessSetup) {
		var err error
		runner, err = s.NewRunner(engine.RunnerConfig{Drain: true, Concurrency: 2})
		require.NoError(t, err)
		s.Runner, s.Hosts, s.Lease = runner, hosts, lease
	})

	// Before any sample: the lines are empty and left out.
	resp, body := h.get("/api/stats?series=1", h.ownerTok)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	got := decode[statsSeriesAnswer](t, body)
	require.NotNil(t, got.Series)
	require.Equal(t, int64(1000), got.Series.EveryMs)
	require.Equal(t, 600, got.Series.Capacity)
	require.Empty(t, got.Series.QueueDue)
	require.Empty(t, got.Series.Hosts)

	resp, body = h.upload(h.ownerTok, nil, namedFile{"a.csv", csvOf(5)})
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	require.NoError(t, h.srv.sampleStats(t.Context()))

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := runner.Run(ctx)
	require.NoError(t, err)
	require.NoError(t, h.srv.sampleStats(t.Context()))

	resp, body = h.get("/api/stats", h.ownerTok)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, string(body), `"series"`)

	resp, body = h.get("/api/stats?series=1", h.ownerTok)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	s := decode[statsSeriesAnswer](t, body).Series
	require.Equal(t, []float64{5, 0}, values(s.QueueDue))
	require.Equal(t, []float64{0, 0}, values(s.QueueProcessing))
	require.Len(t, s.ClaimSize, 2)
	require.Len(t, s.AvgItemMs, 2)
	require.Len(t, s.IngestBatchRows, 2)
	require.Positive(t, s.IngestBatchRows[0].V)
	// items/s needs a previous sample: one point, 5 items since the first.
	require.Len(t, s.ItemsPerSec, 1)
	require.Positive(t, s.ItemsPerSec[0].V)
	// The lease follows the claim controller within the configured bounds.
	snap := runner.ClaimController().Snapshot()
	want := adapt.Lease(lease, runner.ClaimController().AvgItem(), snap.Size, snap.Concurrency)
	require.Len(t, s.LeaseMs, 2)
	require.InDelta(t, float64(want)/float64(time.Millisecond), s.LeaseMs[1].V, 0.001)
	require.GreaterOrEqual(t, s.LeaseMs[0].V, 2000.0)
	hs := s.Hosts["api.example.com"]
	require.Equal(t, []float64{40, 40}, values(hs.Rate))
	require.Equal(t, []float64{6, 6}, values(hs.Concurrency))
	require.False(t, s.QueueDue[0].T.After(s.QueueDue[1].T), "oldest first")
}

// TestStatsSeriesWithoutRunner: a server whose workers run elsewhere
// samples the queue only.
func TestStatsSeriesWithoutRunner(t *testing.T) {
	t.Parallel()
	h := newHarness(t, noHub)
	h.ownerJob(3)
	require.NoError(t, h.srv.sampleStats(t.Context()))
	_, body := h.get("/api/stats?series=1", h.ownerTok)
	s := decode[statsSeriesAnswer](t, body).Series
	require.Equal(t, []float64{3}, values(s.QueueDue))
	require.Nil(t, s.ClaimSize)
	require.Nil(t, s.LeaseMs)
	require.Nil(t, s.ItemsPerSec)
	require.NotContains(t, string(body), `"leaseMs"`)
}

// TestStatsSeriesRing: the ring keeps the newest capacity samples.
func TestStatsSeriesRing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, noHub)
	for range seriesCapacity + 5 {
		require.NoError(t, h.srv.sampleStats(t.Context()))
	}
	require.Len(t, h.srv.series.snapshot(time.Time{}).QueueDue, seriesCapacity)
}

// TestStatsSeriesSinceAndErrors: since= returns only the points after the
// one a client has; failed attempts become a rate per error class.
func TestStatsSeriesSinceAndErrors(t *testing.T) {
	t.Parallel()
	var runner *engine.Runner
	h := newHarness(t, noHub, func(s *harnessSetup) {
		var err error
		runner, err = s.NewRunner(engine.RunnerConfig{Drain: true, Concurrency: 2})
		require.NoError(t, err)
		s.Runner = runner
	})
	_, err := h.st.PutPipeline(t.Context(), &engine.PutPipelineParams{Now: time.Now(), Pipeline: &engine.Pipeline{
		Name: "broken", Stages: []engine.Stage{{Processor: "noop", Config: []byte(`{"permanentEvery":1}`)}}}})
	require.NoError(t, err)
	rows := []json.RawMessage{[]byte(`{"a":"1"}`), []byte(`{"a":"2"}`), []byte(`{"a":"3"}`)}
	_, err = h.ing.Enqueue(t.Context(), engine.EnqueueRequest{UserID: h.owner.ID, Pipeline: "broken", Name: "b", Source: "api", Rows: rows})
	require.NoError(t, err)
	require.NoError(t, h.srv.sampleStats(t.Context()))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = runner.Run(ctx)
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond) // two samples at distinct times
	require.NoError(t, h.srv.sampleStats(t.Context()))

	_, body := h.get("/api/stats?series=1", h.ownerTok)
	all := decode[statsSeriesAnswer](t, body).Series
	require.Len(t, all.QueueDue, 2)
	perm := all.ErrorsPerSec[string(engine.ClassPermanent)]
	require.Len(t, perm, 1, "a rate needs a previous sample")
	require.Positive(t, perm[0].V)

	since := all.QueueDue[0].T.Format(time.RFC3339Nano)
	resp, body := h.get("/api/stats?series=1&since="+url.QueryEscape(since), h.ownerTok)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	later := decode[statsSeriesAnswer](t, body).Series
	require.Equal(t, all.QueueDue[1:], later.QueueDue)
	require.Len(t, later.ErrorsPerSec[string(engine.ClassPermanent)], 1)

	resp, body = h.get("/api/stats?series=1&since="+url.QueryEscape(all.QueueDue[1].T.Format(time.RFC3339Nano)), h.ownerTok)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Empty(t, decode[statsSeriesAnswer](t, body).Series.QueueDue)

	resp, body = h.get("/api/stats?series=1&since=yesterday", h.ownerTok)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(body))
	require.Equal(t, "since", decode[errorBody](t, body).Error.Field)
}
