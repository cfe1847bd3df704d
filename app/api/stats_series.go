package api

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine/adapt"
)

// The stats recorder samples the adaptive controllers once a second and
// keeps the last 10 minutes, so that a client (the UI, `sluice stats
// --series`) can plot how they moved: GET /api/stats?series=1.
const (
	seriesEvery    = time.Second
	seriesCapacity = 600
	// seriesMaxHosts bounds the hosts followed; hosts seen after that many
	// are left out of the series (GET /api/stats still lists them).
	seriesMaxHosts = 64
)

// seriesOut is the "series" field of GET /api/stats?series=1. Each line
// holds its samples oldest first; a line this process cannot sample (no
// runner here, no upload yet) is left out.
type seriesOut struct {
	EveryMs  int64 `json:"everyMs"`
	Capacity int   `json:"capacity"`
	// ClaimSize, AvgItemMs and LeaseMs are the claim controller's size,
	// smoothed item time and the lease a claim of that size takes now.
	ClaimSize []adapt.Point `json:"claimSize,omitempty"`
	AvgItemMs []adapt.Point `json:"avgItemMs,omitempty"`
	LeaseMs   []adapt.Point `json:"leaseMs,omitempty"`
	// ItemsPerSec is the runner's completed items per second between
	// samples.
	ItemsPerSec []adapt.Point `json:"itemsPerSec,omitempty"`
	// QueueDue, QueueLater and QueueProcessing are the queue's depth
	// (every job, every process).
	QueueDue        []adapt.Point `json:"queueDue,omitempty"`
	QueueLater      []adapt.Point `json:"queueLater,omitempty"`
	QueueProcessing []adapt.Point `json:"queueProcessing,omitempty"`
	// IngestBatchRows is the final batch size of the newest upload.
	IngestBatchRows []adapt.Point `json:"ingestBatchRows,omitempty"`
	// Hosts are each remote host's rate (req/s) and concurrency limit.
	Hosts map[string]hostSeriesOut `json:"hosts"`
}

type hostSeriesOut struct {
	Rate        []adapt.Point `json:"rate"`
	Concurrency []adapt.Point `json:"concurrency"`
}

type hostSeries struct{ rate, concurrency *adapt.Series }

// statsRecorder keeps the series; sample adds one point to each line.
type statsRecorder struct {
	claimSize, avgItemMs, leaseMs, itemsPerSec        *adapt.Series
	queueDue, queueLater, queueProcessing, ingestRows *adapt.Series

	mu    sync.Mutex
	hosts map[string]hostSeries
	// prevCompleted and prevAt are the runner's counter at the previous
	// sample (items/s is the difference).
	prevCompleted int64
	prevAt        time.Time
}

func newStatsRecorder() *statsRecorder {
	n := func() *adapt.Series { return adapt.NewSeries(seriesCapacity) }
	return &statsRecorder{
		claimSize: n(), avgItemMs: n(), leaseMs: n(), itemsPerSec: n(),
		queueDue: n(), queueLater: n(), queueProcessing: n(), ingestRows: n(),
		hosts: map[string]hostSeries{},
	}
}

// recordStats samples every seriesEvery until ctx ends.
func (s *Server) recordStats(ctx context.Context) {
	t := time.NewTicker(seriesEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.sampleStats(ctx); err != nil && ctx.Err() == nil {
			s.log.Debug("sampling stats failed", "err", err)
		}
	}
}

// sampleStats adds one point to every line it can sample now.
func (s *Server) sampleStats(ctx context.Context) error {
	rec, now := s.series, s.now()
	if r := s.cfg.Runner; r != nil {
		c := r.ClaimController()
		snap := c.Snapshot()
		rec.claimSize.Add(now, float64(snap.Size))
		rec.avgItemMs.Add(now, snap.AvgItemMs)
		lease := adapt.Lease(s.cfg.Lease, c.AvgItem(), snap.Size, snap.Concurrency)
		rec.leaseMs.Add(now, float64(lease)/float64(time.Millisecond))
		done := r.Summary().Completed
		rec.mu.Lock()
		if !rec.prevAt.IsZero() {
			if dt := now.Sub(rec.prevAt).Seconds(); dt > 0 {
				rec.itemsPerSec.Add(now, float64(done-rec.prevCompleted)/dt)
			}
		}
		rec.prevCompleted, rec.prevAt = done, now
		rec.mu.Unlock()
	}
	if in := s.ingests.get(); in != nil {
		rec.ingestRows.Add(now, float64(in.FinalBatch))
	}
	if s.cfg.Hosts != nil {
		rec.mu.Lock()
		for _, h := range s.cfg.Hosts.Snapshot() {
			hs, ok := rec.hosts[h.Host]
			if !ok {
				if len(rec.hosts) >= seriesMaxHosts {
					continue
				}
				hs = hostSeries{rate: adapt.NewSeries(seriesCapacity), concurrency: adapt.NewSeries(seriesCapacity)}
				rec.hosts[h.Host] = hs
			}
			hs.rate.Add(now, h.Rate)
			hs.concurrency.Add(now, float64(h.Concurrency))
		}
		rec.mu.Unlock()
	}
	q, err := s.store.QueueSummary(ctx, now)
	if err != nil {
		return err
	}
	rec.queueDue.Add(now, float64(q.Due))
	rec.queueLater.Add(now, float64(q.Later))
	rec.queueProcessing.Add(now, float64(q.Processing))
	return nil
}

// snapshot copies every line.
func (rec *statsRecorder) snapshot() *seriesOut {
	out := &seriesOut{
		EveryMs: seriesEvery.Milliseconds(), Capacity: seriesCapacity,
		ClaimSize: rec.claimSize.Points(), AvgItemMs: rec.avgItemMs.Points(), LeaseMs: rec.leaseMs.Points(),
		ItemsPerSec: rec.itemsPerSec.Points(), QueueDue: rec.queueDue.Points(), QueueLater: rec.queueLater.Points(),
		QueueProcessing: rec.queueProcessing.Points(), IngestBatchRows: rec.ingestRows.Points(),
		Hosts: map[string]hostSeriesOut{},
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for host, hs := range rec.hosts {
		out.Hosts[host] = hostSeriesOut{Rate: hs.rate.Points(), Concurrency: hs.concurrency.Points()}
	}
	return out
}
