package vendorsim

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// Stats counts the requests a Server answered, by outcome.
type Stats struct {
	// Requests is every request received.
	Requests int64 `json:"requests"`
	// OK counts 200 answers with well-formed JSON.
	OK int64 `json:"ok"`
	// NotFound counts 404 answers.
	NotFound int64 `json:"notFound"`
	// TooMany counts 429 answers (rate limited).
	TooMany int64 `json:"tooMany"`
	// ServerErrors counts 5xx answers.
	ServerErrors int64 `json:"serverErrors"`
	// ClientErrors counts 4xx answers other than 404 and 429.
	ClientErrors int64 `json:"clientErrors"`
	// Malformed counts 200 answers with broken JSON.
	Malformed int64 `json:"malformed"`
}

// counters is the live, concurrently updated form of Stats.
type counters struct {
	requests, ok, notFound, tooMany, serverErrors, clientErrors, malformed atomic.Int64
}

// snapshot copies the counters.
func (c *counters) snapshot() Stats {
	return Stats{
		Requests:     c.requests.Load(),
		OK:           c.ok.Load(),
		NotFound:     c.notFound.Load(),
		TooMany:      c.tooMany.Load(),
		ServerErrors: c.serverErrors.Load(),
		ClientErrors: c.clientErrors.Load(),
		Malformed:    c.malformed.Load(),
	}
}

// count records one answer's status.
func (c *counters) count(status int) {
	switch {
	case status == http.StatusOK:
		c.ok.Add(1)
	case status == http.StatusNotFound:
		c.notFound.Add(1)
	case status == http.StatusTooManyRequests:
		c.tooMany.Add(1)
	case status >= 500:
		c.serverErrors.Add(1)
	case status >= 400:
		c.clientErrors.Add(1)
	}
}

// requestLog remembers, per key, the headers of the last request and how
// many requests there were.
type requestLog struct {
	mu      sync.Mutex
	headers map[string]http.Header
	hits    map[string]int
}

func newRequestLog() *requestLog {
	return &requestLog{headers: map[string]http.Header{}, hits: map[string]int{}}
}

// record stores a request's headers under key.
func (l *requestLog) record(key string, h http.Header) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.headers[key] = h.Clone()
	l.hits[key]++
}

// LastHeaders returns a copy of the headers of the last request for key (the
// sku, or the path and query of a request without one), or nil.
func (s *Server) LastHeaders(key string) http.Header {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	return s.log.headers[key].Clone()
}

// Hits returns the number of requests received for key.
func (s *Server) Hits(key string) int {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	return s.log.hits[key]
}

// Stats returns the counters so far.
func (s *Server) Stats() Stats { return s.counts.snapshot() }
