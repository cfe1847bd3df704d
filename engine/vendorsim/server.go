// Package vendorsim is a simulated vendor API for tests and benchmarks: a
// real HTTP server on 127.0.0.1 that rate-limits (429 with Retry-After),
// fails at random (500/503), is slow on demand, does not know some keys
// (404), answers some with broken JSON, and serves recorded answers.
//
// Endpoints:
//
//	GET  /lookup?sku=KEY          {"product":{"sku":KEY,"name":"Name KEY","price":12.5}}
//	POST /lookup  {"sku":KEY}     the same
//	GET  any recorded path+query  the recorded body
package vendorsim

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes how the simulated vendor behaves. The zero value is a
// fast, unlimited vendor that knows every key.
type Config struct {
	// RatePerSec is the sustained request rate the vendor accepts (a token
	// bucket); beyond it requests get 429 with a Retry-After header. 0 means
	// unlimited.
	RatePerSec float64
	// Burst is the bucket's size; 0 means one second's worth (at least 1).
	Burst int
	// RetryAfterDate makes 429 answers carry Retry-After as an HTTP date
	// instead of a number of seconds.
	RetryAfterDate bool
	// Err5xxRate is the fraction (0..1) of accepted requests answered with
	// a random 500 or 503.
	Err5xxRate float64
	// Latency delays every answer by this much.
	Latency time.Duration
	// LatencyFunc, when set, replaces Latency: it is called once per request
	// with the server's seeded random source (use it for distributions).
	LatencyFunc func(rnd *rand.Rand) time.Duration
	// NotFoundKeys are answered with 404.
	NotFoundKeys []string
	// MalformedKeys are answered with 200 and a body that is not JSON.
	MalformedKeys []string
	// StatusKeys answer the given keys with a fixed status (400, 500, ...)
	// and a small JSON error body.
	StatusKeys map[string]int
	// Echo adds a "request" object to product answers holding the request's
	// headers and raw query, so that tests can see what was sent.
	Echo bool
	// Records are recorded answers: request path plus query (for example
	// "/w/api.php?action=wbsearchentities&search=Berlin") → JSON body served
	// with 200. Query parameters are compared in any order. Records serve
	// any path; paths other than /lookup without a record get 404.
	Records map[string]string
	// Seed makes the random choices (5xx, latency) repeatable; 0 means 1.
	Seed uint64
	// Now is the clock of the rate limiter; nil means time.Now.
	Now func() time.Time
}

// set returns a lookup set of keys.
func set(keys []string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// Server is a running simulated vendor. Its methods are safe for concurrent
// use.
type Server struct {
	cfg       Config
	srv       *httptest.Server
	bucket    *bucket
	notFound  map[string]bool
	malformed map[string]bool
	records   map[string]string
	counts    counters
	log       *requestLog
	latency   atomic.Int64 // ns; -1 = use cfg.LatencyFunc
	rndMu     sync.Mutex
	rnd       *rand.Rand
}

// New starts a server on 127.0.0.1 with an ephemeral port. Close it when
// done.
func New(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = 1
	}
	s := &Server{
		cfg:       cfg,
		bucket:    newBucket(cfg.RatePerSec, cfg.Burst, cfg.Now()),
		notFound:  set(cfg.NotFoundKeys),
		malformed: set(cfg.MalformedKeys),
		records:   make(map[string]string, len(cfg.Records)),
		log:       newRequestLog(),
		rnd:       rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	for k, v := range cfg.Records {
		s.records[recordKey(k)] = v
	}
	s.latency.Store(int64(cfg.Latency))
	if cfg.LatencyFunc != nil {
		s.latency.Store(-1)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL returns the server's base URL, such as http://127.0.0.1:41234.
func (s *Server) URL() string { return s.srv.URL }

// Close shuts the server down, waiting for requests in flight. Requests
// still waiting out their latency end as soon as their client gives up.
func (s *Server) Close() { s.srv.Close() }

// SetLatency replaces the latency (and any LatencyFunc) from now on.
func (s *Server) SetLatency(d time.Duration) { s.latency.Store(int64(d)) }

// SetRate replaces the rate limit (requests per second, 0 = unlimited) and
// burst (0 = one second's worth) from now on.
func (s *Server) SetRate(perSec float64, burst int) {
	s.bucket.setRate(perSec, burst, s.cfg.Now())
}

// float returns a random number in [0,1) from the seeded source.
func (s *Server) float() float64 {
	s.rndMu.Lock()
	defer s.rndMu.Unlock()
	return s.rnd.Float64()
}

// delay is this request's latency.
func (s *Server) delay() time.Duration {
	d := time.Duration(s.latency.Load())
	if d >= 0 {
		return d
	}
	s.rndMu.Lock()
	defer s.rndMu.Unlock()
	return s.cfg.LatencyFunc(s.rnd)
}

// serve answers one request.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.counts.requests.Add(1)
	req, err := readRequest(r)
	if err != nil {
		s.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	s.log.record(req.key, r.Header)
	if d := s.delay(); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return // the client gave up; nobody reads the answer
		}
	}
	if ok, wait := s.bucket.take(s.cfg.Now()); !ok {
		s.tooMany(w, wait)
		return
	}
	if code, ok := s.cfg.StatusKeys[req.key]; ok {
		s.fail(w, code, fmt.Sprintf("status %d configured for key %q", code, req.key))
		return
	}
	if s.cfg.Err5xxRate > 0 {
		if f := s.float(); f < s.cfg.Err5xxRate {
			code := http.StatusInternalServerError
			if f < s.cfg.Err5xxRate/2 {
				code = http.StatusServiceUnavailable
			}
			s.fail(w, code, "simulated server error")
			return
		}
	}
	if body, ok := s.records[req.record]; ok {
		s.write(w, http.StatusOK, []byte(body))
		return
	}
	switch {
	case !req.lookup:
		s.fail(w, http.StatusNotFound, "no such endpoint or record")
	case s.notFound[req.key]:
		s.fail(w, http.StatusNotFound, fmt.Sprintf("no product %q", req.key))
	case s.malformed[req.key]:
		s.counts.malformed.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = fmt.Fprintf(w, `{"product":{"sku":%q,"name":`, req.key)
	default:
		s.write(w, http.StatusOK, s.product(req.key, r))
	}
}
