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
	// ErrorsPerSec are the runner's failed attempts per second between
	// samples, by error class (a class appears once it has failed).
	ErrorsPerSec map[string][]adapt.Point `json:"errorsPerSec,omitempty"`
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

	mu     sync.Mutex
	hosts  map[string]hostSeries
	errors map[string]*adapt.Series
	// prevCompleted, prevByClass and prevAt are the runner's counters at
	// the previous sample (the rates are the differences).
	prevCompleted int64
	prevByClass   map[string]int64
	prevAt        time.Time
}

func newStatsRecorder() *statsRecorder {
	n := func() *adapt.Series { return adapt.NewSeries(seriesCapacity) }
	return &statsRecorder{
		claimSize: n(), avgItemMs: n(), leaseMs: n(), itemsPerSec: n(),
		queueDue: n(), queueLater: n(), queueProcessing: n(), ingestRows: n(),
		hosts: map[string]hostSeries{}, errors: map[string]*adapt.Series{},
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
		sum := r.Summary()
		rec.mu.Lock()
		if !rec.prevAt.IsZero() {
			if dt := now.Sub(rec.prevAt).Seconds(); dt > 0 {
				rec.itemsPerSec.Add(now, float64(sum.Completed-rec.prevCompleted)/dt)
				for class, n := range sum.ByClass {
					es, ok := rec.errors[class]
					if !ok {
						es = adapt.NewSeries(seriesCapacity)
						rec.errors[class] = es
					}
					es.Add(now, float64(n-rec.prevByClass[class])/dt)
				}
			}
		}
		rec.prevCompleted, rec.prevByClass, rec.prevAt = sum.Completed, sum.ByClass, now
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

// snapshot copies every line's points taken after since (every point
// when since is zero).
func (rec *statsRecorder) snapshot(since time.Time) *seriesOut {
	p := func(s *adapt.Series) []adapt.Point { return s.PointsSince(since) }
	out := &seriesOut{
		EveryMs: seriesEvery.Milliseconds(), Capacity: seriesCapacity,
		ClaimSize: p(rec.claimSize), AvgItemMs: p(rec.avgItemMs), LeaseMs: p(rec.leaseMs),
		ItemsPerSec: p(rec.itemsPerSec), QueueDue: p(rec.queueDue), QueueLater: p(rec.queueLater),
		QueueProcessing: p(rec.queueProcessing), IngestBatchRows: p(rec.ingestRows),
		Hosts: map[string]hostSeriesOut{}, ErrorsPerSec: map[string][]adapt.Point{},
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for host, hs := range rec.hosts {
		out.Hosts[host] = hostSeriesOut{Rate: p(hs.rate), Concurrency: p(hs.concurrency)}
	}
	for class, es := range rec.errors {
		out.ErrorsPerSec[class] = p(es)
	}
	return out
}
