// Package api is Sluice's HTTP control plane: the REST API under /api, the
// sign-in flow, server-sent events, health and Prometheus metrics. The
// browser UI and the desktop window both talk to it; nothing in it holds
// business logic the engine does not already have.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/adapt"
	"github.com/sluicehq/sluice/engine/export"
	"github.com/sluicehq/sluice/engine/hostlimit"
)

// Config is what a Server needs.
type Config struct {
	Store    engine.Store
	Ingester *engine.Ingester
	// Runner is the runner of this process, for stats and metrics; nil
	// when workers run elsewhere.
	Runner *engine.Runner
	// Hosts is the per-host limiter the http stages share (stats).
	Hosts *hostlimit.Limiter
	// Lease is the Runner's lease bounds, for the lease series of
	// GET /api/stats?series=1; zero fields take their defaults.
	Lease adapt.LeaseConfig
	// NewRunner makes a runner for a kickoff slice.
	NewRunner func(cfg engine.RunnerConfig) (*engine.Runner, error)
	Notifier  *engine.Notifier
	// PoolStats reports the store's connection pools (metrics); optional.
	PoolStats PoolStats
	// ScanSource looks at a source now (POST /api/sources/{name}/scan);
	// nil when this server runs no sources.
	ScanSource func(ctx context.Context, name string) (any, error)
	// Registry validates pipelines.
	Registry *engine.Registry
	Log      *slog.Logger
	// DataDir is where uploads are kept (uploads/) for image jobs.
	DataDir string
	// MaxUploadBytes bounds one upload; default 2 GiB.
	MaxUploadBytes int64
	// PendingView enables GET /api/pending (seed 000's feature flag).
	PendingView bool
	// SecureCookies marks session cookies Secure (set behind TLS).
	SecureCookies bool
	// SessionTTL is how long a browser session lasts; default 7 days.
	SessionTTL time.Duration
	// UI serves everything outside /api (the embedded frontend); nil
	// serves nothing there.
	UI http.Handler
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Server is the HTTP API.
type Server struct {
	cfg     Config
	store   engine.Store
	log     *slog.Logger
	now     func() time.Time
	mux     *http.ServeMux
	metrics *metrics
	reg     *prometheus.Registry
	logins  *loginLimiter
	events  *hub
	ingests lastIngest
	// series keeps the last minutes of the stats (stats_series.go).
	series *statsRecorder
	// colCache keeps grid columns between requests.
	colCache jobCache[[]export.Column]
	// markCache keeps the grids' position indexes (?at=).
	markCache jobCache[*engine.ItemMarks]
	// touched remembers when a token's last use was last written, so a
	// busy script does not write on every request.
	touchMu sync.Mutex
	touched map[int64]time.Time
	// done is closed by Close: long streams end.
	done      chan struct{}
	closeOnce sync.Once
}

// New builds the server and its routes.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("api: no store")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = 2 << 30
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 7 * 24 * time.Hour
	}
	s := &Server{
		cfg: cfg, store: cfg.Store, log: cfg.Log, now: cfg.Now, mux: http.NewServeMux(),
		logins: newLoginLimiter(), touched: map[int64]time.Time{}, done: make(chan struct{}),
		series: newStatsRecorder(),
	}
	s.colCache.limit, s.markCache.limit = columnsCacheLimit, marksCacheLimit
	s.reg = prometheus.NewRegistry()
	s.metrics = newMetrics(s, s.reg)
	s.events = newHub(s)
	for _, rt := range s.routes() {
		s.mux.Handle(rt.Method+" "+rt.Pattern, s.wrap(rt))
	}
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, engine.Errorf(engine.ENOTFOUND, "no API route %s %s", r.Method, r.URL.Path))
	})
	if cfg.UI != nil {
		s.mux.Handle("/", cfg.UI)
	}
	return s, nil
}

// Handler returns the root handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Close ends the event streams, so that an http.Server's Shutdown does
// not wait for them.
func (s *Server) Close() { s.closeOnce.Do(func() { close(s.done) }) }

// Start runs the background parts (the event hub, the stats recorder)
// until ctx ends.
func (s *Server) Start(ctx context.Context) {
	go s.events.run(ctx)
	go s.recordStats(ctx)
	go s.sweepTokens(ctx)
}

// sweepTokens removes expired sessions and sign-in links now and then.
func (s *Server) sweepTokens(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if _, err := s.store.DeleteExpiredTokens(ctx, s.now()); err != nil && ctx.Err() == nil {
			s.log.Warn("removing expired sessions failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// access says who may call a route.
type access int

const (
	public access = iota // anyone, signed in or not
	signedIn
	adminOnly
)

// route is one endpoint: the mux pattern, who may call it and its handler.
// The same table feeds the mux and the OpenAPI check.
type route struct {
	Method  string
	Pattern string
	Access  access
	Handle  func(w http.ResponseWriter, r *http.Request, c *caller) error
}

func (s *Server) routes() []route {
	return []route{
		{"GET", "/healthz", public, s.healthz},
		{"GET", "/readyz", public, s.readyz},
		{"GET", "/metrics", signedIn, s.serveMetrics},
		{"GET", "/api/openapi.json", public, s.openapi},
		{"GET", "/signin", public, s.signInLink},
		{"POST", "/api/login", public, s.login},
		{"POST", "/api/logout", signedIn, s.logout},
		{"GET", "/api/me", signedIn, s.me},
		{"GET", "/api/tokens", signedIn, s.listTokens},
		{"POST", "/api/tokens", signedIn, s.createToken},
		{"DELETE", "/api/tokens/{id}", signedIn, s.deleteToken},
		{"GET", "/api/users", adminOnly, s.listUsers},
		{"POST", "/api/users", adminOnly, s.createUser},
		{"GET", "/api/audit", signedIn, s.listAudit},
		{"POST", "/api/jobs", signedIn, s.createJob},
		{"GET", "/api/jobs", signedIn, s.listJobs},
		{"GET", "/api/jobs/{id}", signedIn, s.getJob},
		{"DELETE", "/api/jobs/{id}", signedIn, s.deleteJob},
		{"GET", "/api/jobs/{id}/columns", signedIn, s.jobColumns},
		{"GET", "/api/jobs/{id}/items", signedIn, s.jobItems},
		{"GET", "/api/jobs/{id}/export", signedIn, s.exportJob},
		{"POST", "/api/jobs/{id}/pause", signedIn, s.control("pause")},
		{"POST", "/api/jobs/{id}/resume", signedIn, s.control("resume")},
		{"POST", "/api/jobs/{id}/cancel", signedIn, s.control("cancel")},
		{"POST", "/api/jobs/{id}/reprocess", signedIn, s.reprocess},
		{"POST", "/api/jobs/{id}/kickoff", signedIn, s.kickoff},
		{"GET", "/api/items/{id}", signedIn, s.getItem},
		{"GET", "/api/items/{id}/thumbnail", signedIn, s.itemThumbnail},
		{"GET", "/api/items/{id}/image", signedIn, s.itemImage},
		{"GET", "/api/pending", signedIn, s.pending},
		{"GET", "/api/pipelines", signedIn, s.listPipelines},
		{"GET", "/api/pipelines/{name}", signedIn, s.getPipeline},
		{"PUT", "/api/pipelines/{name}", adminOnly, s.putPipeline},
		{"GET", "/api/sources", signedIn, s.listSources},
		{"GET", "/api/sources/{name}", signedIn, s.getSource},
		{"POST", "/api/sources/{name}/scan", adminOnly, s.scanSource},
		{"GET", "/api/definitions", signedIn, s.listDefinitions},
		{"POST", "/api/definitions", adminOnly, s.putDefinition},
		{"PUT", "/api/definitions/{key}", adminOnly, s.putDefinition},
		{"POST", "/api/definitions/{key}/run", adminOnly, s.runDefinition},
		{"GET", "/api/triggers", signedIn, s.listTriggers},
		{"POST", "/api/triggers", adminOnly, s.createTrigger},
		{"PATCH", "/api/triggers/{name}", adminOnly, s.patchTrigger},
		{"DELETE", "/api/triggers/{name}", adminOnly, s.deleteTrigger},
		{"GET", "/api/workers", signedIn, s.listWorkers},
		{"GET", "/api/stats", signedIn, s.stats},
		{"GET", "/api/events", signedIn, s.serveEvents},
	}
}

// wrap authenticates, checks access and CSRF, runs the handler and turns
// its error into a JSON error answer.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.now()
		w = &statusWriter{ResponseWriter: w}
		c, err := s.authenticate(r)
		if err == nil {
			err = s.authorize(rt, r, c)
		}
		if err == nil {
			err = rt.Handle(w, r, c)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
		s.metrics.observeRequest(rt.Method+" "+rt.Pattern, s.now().Sub(start))
	})
}

func (s *Server) authorize(rt route, r *http.Request, c *caller) error {
	if rt.Access == public {
		return nil
	}
	if c == nil {
		return engine.Errorf(engine.EUNAUTHORIZED, "sign in first: send Authorization: Bearer TOKEN or sign in at /")
	}
	if rt.Access == adminOnly && !c.user.IsAdmin() {
		return engine.Errorf(engine.EFORBIDDEN, "only an admin may do this")
	}
	if c.viaCookie && !safeMethod(r.Method) && !s.validCSRF(c, r.Header.Get("X-CSRF-Token")) {
		return engine.Errorf(engine.EFORBIDDEN, "missing or wrong X-CSRF-Token header (a browser session must send the token /api/me returns)")
	}
	return nil
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ *caller) error {
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 when the store answers.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request, _ *caller) error {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if _, err := s.store.QueueSummary(ctx, s.now()); err != nil {
		s.log.Warn("not ready", "err", err)
		return writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "store not reachable"})
	}
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}
