package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/app/api"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/frontend"
)

// serveFlags are the flags of `sluice --serve` and `sluice serve`.
type serveFlags struct {
	serve       bool
	addr        string
	concurrency int
	maxUploadMB int64
	pendingView bool
	noWorkers   bool
}

func (f *serveFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", envOr("SLUICE_ADDR", "127.0.0.1:8080"), "address to listen on (env SLUICE_ADDR); a non-loopback address needs an admin with a password")
	fl.IntVar(&f.concurrency, "concurrency", 0, "items processed at once by this server's workers (default SLUICE_CONCURRENCY or 8)")
	fl.Int64Var(&f.maxUploadMB, "max-upload-mb", envInt64("SLUICE_MAX_UPLOAD_MB", 2048), "largest upload accepted, in MiB (env SLUICE_MAX_UPLOAD_MB)")
	fl.BoolVar(&f.pendingView, "pending-view", envOr("SLUICE_PENDING_VIEW", "1") != "0", "serve the global pending view /api/pending (env SLUICE_PENDING_VIEW=0 turns it off)")
	fl.BoolVar(&f.noWorkers, "no-workers", false, "run no workers in this process (separate 'sluice worker' processes do the work)")
}

func envInt64(name string, def int64) int64 {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return def
}

const serveLong = `Run Sluice as a server: the engine's workers, the HTTP API under /api, health
(/healthz, /readyz), Prometheus metrics (/metrics) and the UI, in one process,
on the embedded SQLite store in --data.

Every request is authenticated: API clients send "Authorization: Bearer TOKEN"
(tokens come from 'sluice user add' or 'sluice user token'); browsers sign in
with a password or a one-time sign-in link. On the first start, while no
account has a password and no API token exists, the server prints such a
link: open it and you are signed in as the local admin. Listening on an
address other than loopback needs an admin with a password first:
  sluice user add NAME --admin --password-stdin

SIGINT or SIGTERM: stop taking requests and claiming items, let running items
finish (or give their leases back), then exit.

Environment: SLUICE_ADDR, SLUICE_MAX_UPLOAD_MB, SLUICE_PENDING_VIEW, and every
variable of 'sluice --help'.`

func newServeCmd(g *globals) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:     "serve",
		Short:   "Run the server: workers, HTTP API and UI (same as sluice --serve)",
		Long:    serveLong,
		Example: "  sluice serve --addr 127.0.0.1:8080 --data ./sluice-data",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd, g, &f)
		},
	}
	f.register(cmd)
	return cmd
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func runServe(cmd *cobra.Command, g *globals, f *serveFlags) error {
	if f.concurrency < 0 {
		return usagef("--concurrency: must be ≥ 1")
	}
	if f.maxUploadMB <= 0 {
		return usagef("--max-upload-mb: must be ≥ 1")
	}
	host, _, err := net.SplitHostPort(f.addr)
	if err != nil {
		return usagef("--addr: %q is not host:port (%v)", f.addr, err)
	}
	g.defaultLevel = "info"
	ctx, env, err := g.env(cmd)
	if err != nil {
		return err
	}
	defer env.Close()
	defer env.keepHostRates(ctx)()
	if !isLoopback(host) {
		ok, err := api.HasAdminWithPassword(ctx, env.Store)
		if err != nil {
			return err
		}
		if !ok {
			return engine.Errorf(engine.EINVALID, "refusing to listen on %s (reachable from other machines) without an admin who has a password; create one with: sluice user add NAME --admin --password-stdin", f.addr)
		}
	}
	parts, err := startParts(ctx, env, f, nil)
	if err != nil {
		return err
	}
	defer parts.stop()
	srv, runner := parts.srv, parts.runner
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", f.addr, err)
	}
	base := "http://" + ln.Addr().String()
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	srvCtx, stopSrv := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSrv()
	srv.Start(srvCtx)

	// The serving line and the sign-in link go out in one write, so that a
	// reader of the first line has the link as well.
	intro := fmt.Sprintf("sluice %s serving %s (data in %s)\n", Version, base, env.Data)
	first, err := api.NeedsFirstSignIn(ctx, env.Store)
	if err != nil {
		return err
	}
	if first {
		link, err := api.CreateSignInLink(ctx, env.Store, 1, base, time.Now())
		if err != nil {
			return err
		}
		intro += fmt.Sprintf("No account can sign in yet. Open this one-time link to sign in as the local admin:\n  %s\n", link)
	}
	fmt.Fprint(g.stdout, intro)

	errCh := make(chan error, 2)
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errCh <- fmt.Errorf("http server: %w", err)
		}
	}()
	runDone := make(chan struct{})
	if runner != nil {
		go func() {
			defer close(runDone)
			if _, err := runner.Run(ctx); err != nil {
				errCh <- fmt.Errorf("workers: %w", err)
			}
		}()
	} else {
		close(runDone)
	}
	select {
	case <-ctx.Done():
	case err = <-errCh:
	}
	env.Log.Info("shutting down: no new requests or claims; running items finish")
	srv.Close()
	shutCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if serr := hs.Shutdown(shutCtx); serr != nil {
		env.Log.Warn("some requests did not finish in time", "err", serr)
	}
	stopSrv()
	if err != nil {
		return err
	}
	<-runDone
	env.Log.Info("stopped")
	return nil
}

// parts are what `sluice --serve` and the desktop window share: on one
// env, the ingester, the sources (watched folders), this process's
// workers and the API server with the embedded UI.
type parts struct {
	ing    *engine.Ingester
	runner *engine.Runner // nil with --no-workers
	srv    *api.Server
	// stop stops the triggers, the scheduler, the heartbeat and the
	// watched folders.
	stop func()
}

// startParts builds the parts and starts the sources; the caller runs the
// runner and starts the server. onFinished, when set, is told of every job
// this process's workers finish.
func startParts(ctx context.Context, env *Env, f *serveFlags, onFinished func(int64)) (*parts, error) {
	ing, err := env.Ingester()
	if err != nil {
		return nil, err
	}
	p := &parts{ing: ing}
	if !f.noWorkers {
		if p.runner, err = env.Runner(f.concurrency, false, onFinished); err != nil {
			return nil, err
		}
	}
	p.srv, err = api.New(api.Config{
		Store: env.Store, Ingester: ing, Runner: p.runner, Hosts: env.Hosts, Lease: env.Tuning.Lease, Notifier: env.Notifier, Log: env.Log,
		Registry: env.Registry, DataDir: env.Data, MaxUploadBytes: f.maxUploadMB << 20, PendingView: f.pendingView,
		PoolStats:  env.poolStats(),
		ScanSource: func(ctx context.Context, name string) (any, error) { return env.scanSource(ctx, ing, name) },
		UI:         frontend.Handler(),
		NewRunner:  env.KickoffRunner,
	})
	if err != nil {
		return nil, err
	}
	stopSources := env.runSources(ctx, ing)            // watched folders: files dropped become jobs
	stopAutomation := env.runAutomation(ctx, p.runner) // triggers, scheduler, heartbeat
	p.stop = func() {
		stopAutomation()
		stopSources()
	}
	return p, nil
}
