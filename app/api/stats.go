package api

import (
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/adapt"
	"github.com/sluicehq/sluice/engine/hostlimit"
)

// statsOut is what the adaptive controllers look like now (GET /api/stats).
type statsOut struct {
	At     time.Time             `json:"at"`
	Queue  *engine.QueueSummary  `json:"queue"`
	Runner *engine.RunSummary    `json:"runner,omitempty"`
	Claim  *adapt.ClaimSnapshot  `json:"claim,omitempty"`
	Hosts  []hostlimit.HostState `json:"hosts"`
	// LastIngest describes the adaptive batches of the last upload.
	LastIngest *ingestStats `json:"lastIngest,omitempty"`
	// Series is the last minutes of samples, with ?series=1.
	Series *seriesOut `json:"series,omitempty"`
}

type ingestStats struct {
	JobID      int64     `json:"jobId"`
	Rows       int64     `json:"rows"`
	Batches    int       `json:"batches"`
	FinalBatch int       `json:"finalBatch"`
	Ms         float64   `json:"ms"`
	At         time.Time `json:"at"`
}

// lastIngest remembers the newest upload's batching.
type lastIngest struct {
	mu sync.Mutex
	v  *ingestStats
}

func (l *lastIngest) set(v *ingestStats) {
	l.mu.Lock()
	l.v = v
	l.mu.Unlock()
}

func (l *lastIngest) get() *ingestStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.v
}

func (s *Server) snapshot(r *http.Request) (*statsOut, error) {
	q, err := s.store.QueueSummary(r.Context(), s.now())
	if err != nil {
		return nil, err
	}
	out := &statsOut{At: s.now(), Queue: q, Hosts: []hostlimit.HostState{}, LastIngest: s.ingests.get()}
	if s.cfg.Runner != nil {
		out.Runner = s.cfg.Runner.Summary()
		snap := s.cfg.Runner.ClaimController().Snapshot()
		out.Claim = &snap
	}
	if s.cfg.Hosts != nil {
		out.Hosts = append(out.Hosts, s.cfg.Hosts.Snapshot()...)
	}
	return out, nil
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request, _ *caller) error {
	out, err := s.snapshot(r)
	if err != nil {
		return err
	}
	if v := r.URL.Query().Get("series"); v != "" && v != "0" && v != "false" {
		var since time.Time
		if v := r.URL.Query().Get("since"); v != "" {
			if since, err = time.Parse(time.RFC3339Nano, v); err != nil {
				return engine.FieldErrorf("since", "%q is not a time such as 2026-11-26T08:00:00.123Z (the t of the last point you have)", v)
			}
		}
		out.Series = s.series.snapshot(since)
	}
	return writeJSON(w, http.StatusOK, out)
}
