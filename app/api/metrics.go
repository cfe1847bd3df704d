package api

import (
	"context"
	"database/sql"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/engine"
)

// metrics are the server's own instruments; the engine's figures are read
// at scrape time by engineCollector.
type metrics struct {
	requests      *prometheus.HistogramVec
	exportSeconds *prometheus.HistogramVec
	ingestSeconds prometheus.Histogram
	handler       http.Handler
}

func newMetrics(s *Server, reg *prometheus.Registry) *metrics {
	m := &metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_http_request_duration_seconds", Help: "API request latency by route.",
			Buckets: []float64{.001, .0025, .005, .01, .015, .025, .05, .1, .25, .5, 1, 2.5, 10},
		}, []string{"route"}),
		exportSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_export_seconds", Help: "Time to export a job, by format.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 8),
		}, []string{"format"}),
		ingestSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sluice_ingest_seconds", Help: "Time from upload start until every row was durable (ingest_ms).",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 8),
		}),
	}
	reg.MustRegister(m.requests, m.exportSeconds, m.ingestSeconds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&engineCollector{s: s})
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) observeRequest(route string, d time.Duration) {
	m.requests.WithLabelValues(route).Observe(d.Seconds())
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, _ *caller) error {
	s.metrics.handler.ServeHTTP(w, r)
	return nil
}

var (
	descQueue      = prometheus.NewDesc("sluice_queue_depth", "Items left to do in runnable jobs: due now, due later, being processed.", []string{"state"}, nil)
	descIngesting  = prometheus.NewDesc("sluice_jobs_ingesting", "Jobs whose rows are still being stored.", nil, nil)
	descClaimed    = prometheus.NewDesc("sluice_items_claimed_total", "Items claimed by this process's workers.", nil, nil)
	descClaims     = prometheus.NewDesc("sluice_claims_total", "Claim transactions that returned items.", nil, nil)
	descCompleted  = prometheus.NewDesc("sluice_items_completed_total", "Outcomes written, by the item's new status.", []string{"status"}, nil)
	descErrors     = prometheus.NewDesc("sluice_item_errors_total", "Failed attempts by error class.", []string{"class"}, nil)
	descRetries    = prometheus.NewDesc("sluice_item_retries_total", "Attempts that will be retried later.", nil, nil)
	descReaped     = prometheus.NewDesc("sluice_leases_reaped_total", "Items whose lease expired and were handed out again.", nil, nil)
	descStale      = prometheus.NewDesc("sluice_outcomes_stale_total", "Outcomes dropped because the item's lease was lost.", nil, nil)
	descRate       = prometheus.NewDesc("sluice_items_per_second", "Outcomes per second since the previous scrape (items_sec).", nil, nil)
	descClaimSize  = prometheus.NewDesc("sluice_claim_size", "Current adaptive claim size.", nil, nil)
	descAvgItem    = prometheus.NewDesc("sluice_avg_item_ms", "Smoothed time per item (EWMA) that sizes claims and leases.", nil, nil)
	descDBLatency  = prometheus.NewDesc("sluice_db_latency_ewma_ms", "Smoothed commit latency of the last upload's ingest batches.", nil, nil)
	descPoolWait   = prometheus.NewDesc("sluice_db_pool_wait_seconds_total", "Time spent waiting for a database connection, by pool.", []string{"pool"}, nil)
	descHostRate   = prometheus.NewDesc("sluice_host_rate", "Current request rate allowed per host (requests/s).", []string{"host"}, nil)
	descHostConc   = prometheus.NewDesc("sluice_host_concurrency", "Current in-flight limit per host.", []string{"host"}, nil)
	descHostThrott = prometheus.NewDesc("sluice_host_throttled_total", "Answers 429 (rate limited) per host (api_throttle_rate).", []string{"host"}, nil)
	descHostReqs   = prometheus.NewDesc("sluice_host_requests_total", "Requests per host by outcome.", []string{"host", "outcome"}, nil)
)

// engineCollector reads the engine's counters and controllers at scrape
// time.
type engineCollector struct {
	s        *Server
	mu       sync.Mutex
	lastDone int64
	lastAt   time.Time
}

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueue, descIngesting, descClaimed, descClaims, descCompleted, descErrors, descRetries,
		descReaped, descStale, descRate, descClaimSize, descAvgItem, descDBLatency, descPoolWait, descHostRate, descHostConc, descHostThrott, descHostReqs} {
		ch <- d
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if q, err := s.store.QueueSummary(ctx, s.now()); err == nil {
		gauge(descQueue, float64(q.Due), "due")
		gauge(descQueue, float64(q.Later), "later")
		gauge(descQueue, float64(q.Processing), "processing")
		gauge(descIngesting, float64(q.Ingesting))
	} else {
		s.log.Warn("metrics: reading the queue failed", "err", err)
	}
	if r := s.cfg.Runner; r != nil {
		sum := r.Summary()
		counter(descClaimed, float64(sum.Claimed))
		counter(descClaims, float64(sum.Claims))
		for _, st := range engine.ItemStatuses {
			counter(descCompleted, float64(sum.ByStatus[string(st)]), string(st))
		}
		for class, n := range sum.ByClass {
			counter(descErrors, float64(n), class)
		}
		counter(descRetries, float64(sum.Retried))
		counter(descReaped, float64(sum.Reaped))
		counter(descStale, float64(sum.Stale))
		c.mu.Lock()
		now := time.Now()
		rate := 0.0
		if !c.lastAt.IsZero() {
			if el := now.Sub(c.lastAt).Seconds(); el > 0 {
				rate = float64(sum.Completed-c.lastDone) / el
			}
		}
		c.lastDone, c.lastAt = sum.Completed, now
		c.mu.Unlock()
		gauge(descRate, rate)
		snap := r.ClaimController().Snapshot()
		gauge(descClaimSize, float64(snap.Size))
		gauge(descAvgItem, snap.AvgItemMs)
	}
	if li := s.ingests.get(); li != nil && li.Batches > 0 {
		gauge(descDBLatency, li.Ms/float64(li.Batches))
	}
	if s.cfg.PoolStats != nil {
		for pool, st := range s.cfg.PoolStats() {
			counter(descPoolWait, st.WaitDuration.Seconds(), pool)
		}
	}
	if s.cfg.Hosts != nil {
		for _, h := range s.cfg.Hosts.Snapshot() {
			gauge(descHostRate, h.Rate, h.Host)
			gauge(descHostConc, float64(h.Concurrency), h.Host)
			counter(descHostThrott, float64(h.RateLimited), h.Host)
			counter(descHostReqs, float64(h.OK), h.Host, "ok")
			counter(descHostReqs, float64(h.RateLimited), h.Host, "rate_limited")
			counter(descHostReqs, float64(h.Errors), h.Host, "error")
		}
	}
}

// PoolStats returns the database pools' statistics by pool name.
type PoolStats func() map[string]sql.DBStats
