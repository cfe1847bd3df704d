package app

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/app/api"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/adapt"
	"github.com/sluicehq/sluice/engine/hostlimit"
	"github.com/sluicehq/sluice/engine/httpproc"
	"github.com/sluicehq/sluice/engine/imageproc"
	"github.com/sluicehq/sluice/storage/postgres"
	"github.com/sluicehq/sluice/storage/sqlite"
)

// DBFile is the database file's name inside the data directory.
const DBFile = "sluice.db"

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// defaultDataDir is the user's data directory for Sluice.
func defaultDataDir() string {
	switch runtime.GOOS {
	case "windows":
		if d := os.Getenv("LocalAppData"); d != "" {
			return filepath.Join(d, "Sluice")
		}
	case "darwin":
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, "Library", "Application Support", "Sluice")
		}
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "sluice")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "sluice")
	}
	return "sluice-data"
}

// Tuning holds the adaptive bounds, read from SLUICE_* variables.
type Tuning struct {
	Ingest      adapt.IngestConfig
	Claim       adapt.ClaimConfig
	Lease       adapt.LeaseConfig
	Concurrency int
	// ReapInterval and StaleIngestAfter: see engine.RunnerConfig.
	ReapInterval     time.Duration
	StaleIngestAfter time.Duration
	// MaxInFlightPerJob and MaxInFlightPerUser: see engine.RunnerConfig.
	MaxInFlightPerJob  int
	MaxInFlightPerUser int
	// Pressure shrinks claims under CPU or memory pressure.
	Pressure engine.PressureConfig
}

// TuningFromEnv reads the bounds; a malformed value is an error naming the
// variable.
func TuningFromEnv() (Tuning, error) {
	var t Tuning
	var errs []error
	intVar := func(name string, dst *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				errs = append(errs, fmt.Errorf("%s: %q is not a non-negative whole number", name, v))
				return
			}
			*dst = n
		}
	}
	msVar := func(name string, dst *time.Duration) {
		var n int
		intVar(name, &n)
		if n > 0 {
			*dst = time.Duration(n) * time.Millisecond
		}
	}
	intVar("SLUICE_INGEST_MIN_ROWS", &t.Ingest.MinRows)
	intVar("SLUICE_INGEST_MAX_ROWS", &t.Ingest.MaxRows)
	intVar("SLUICE_INGEST_START_ROWS", &t.Ingest.StartRows)
	intVar("SLUICE_INGEST_MAX_BATCH_BYTES", &t.Ingest.MaxBatchBytes)
	msVar("SLUICE_DB_P50_MS", &t.Ingest.TargetP50)
	msVar("SLUICE_DB_P95_MS", &t.Ingest.TargetP95)
	msVar("SLUICE_WORKER_TARGET_SLICE_MS", &t.Claim.TargetSlice)
	intVar("SLUICE_CLAIM_MIN", &t.Claim.Min)
	intVar("SLUICE_CLAIM_MAX", &t.Claim.Max)
	if v := os.Getenv("SLUICE_SAFETY_FACTOR"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1 {
			errs = append(errs, fmt.Errorf("SLUICE_SAFETY_FACTOR: %q is not a number in (0, 1]", v))
		} else {
			t.Claim.Safety = f
		}
	}
	msVar("SLUICE_LOCK_FLOOR_MS", &t.Lease.Floor)
	msVar("SLUICE_LOCK_CAP_MS", &t.Lease.Cap)
	intVar("SLUICE_CONCURRENCY", &t.Concurrency)
	msVar("SLUICE_REAP_INTERVAL_MS", &t.ReapInterval)
	msVar("SLUICE_STALE_INGEST_MS", &t.StaleIngestAfter)
	intVar("SLUICE_MAX_INFLIGHT_PER_JOB", &t.MaxInFlightPerJob)
	intVar("SLUICE_MAX_INFLIGHT_PER_USER", &t.MaxInFlightPerUser)
	var cpuPct, memMB int
	intVar("SLUICE_CPU_HIGH_PERCENT", &cpuPct)
	intVar("SLUICE_MEMORY_SOFT_MB", &memMB)
	if cpuPct > 0 {
		t.Pressure.CPUHigh = float64(cpuPct) / 100 // 100 or more: CPU never counts
	}
	t.Pressure.MemorySoft = int64(memMB) << 20
	t.Ingest = t.Ingest.WithDefaults()
	t.Claim = t.Claim.WithDefaults()
	t.Lease = t.Lease.WithDefaults()
	errs = append(errs, t.Ingest.Validate(), t.Claim.Validate(), t.Lease.Validate())
	if err := errors.Join(errs...); err != nil {
		return t, usagef("%s", envNames.Replace(oneLine(err.Error())))
	}
	return t, nil
}

// envNames renames the controllers' setting names in their validation
// messages to the variables people set.
var envNames = strings.NewReplacer(
	adapt.FieldIngestStartRows, "SLUICE_INGEST_START_ROWS",
	adapt.FieldIngestMinRows, "SLUICE_INGEST_MIN_ROWS",
	adapt.FieldIngestMaxRows, "SLUICE_INGEST_MAX_ROWS",
	adapt.FieldIngestMaxBatchBytes, "SLUICE_INGEST_MAX_BATCH_BYTES",
	adapt.FieldIngestTargetP50, "SLUICE_DB_P50_MS",
	adapt.FieldIngestTargetP95, "SLUICE_DB_P95_MS",
	adapt.FieldClaimTargetSlice, "SLUICE_WORKER_TARGET_SLICE_MS",
	adapt.FieldClaimMin, "SLUICE_CLAIM_MIN",
	adapt.FieldClaimMax, "SLUICE_CLAIM_MAX",
	adapt.FieldClaimSafety, "SLUICE_SAFETY_FACTOR",
	adapt.FieldClaimConcurrency, "SLUICE_CONCURRENCY",
	adapt.FieldLeaseFloor, "SLUICE_LOCK_FLOOR_MS",
	adapt.FieldLeaseCap, "SLUICE_LOCK_CAP_MS",
)

// Env is an opened data directory with everything the commands need.
type Env struct {
	Data string
	// Store is the data directory's SQLite file, or the PostgreSQL
	// database that --store names.
	Store    engine.Store
	Log      *slog.Logger
	Notifier *engine.Notifier
	Registry *engine.Registry
	// Hosts paces every http stage of this process per host.
	Hosts  *hostlimit.Limiter
	Tuning Tuning
	// Events carries this process's events to its event triggers.
	Events *engine.Events
	// WorkerID names this process in leases, heartbeats and the scheduler
	// lease: host:pid:boot.
	WorkerID string
}

func (g *globals) open(ctx context.Context) (*Env, error) {
	log, err := newLogger(g)
	if err != nil {
		return nil, err
	}
	tuning, err := TuningFromEnv()
	if err != nil {
		return nil, err
	}
	if g.data == "" {
		return nil, usagef("--data: no data directory given")
	}
	if s := strings.ToUpper(g.sync); s != "FULL" && s != "NORMAL" {
		return nil, usagef("--sqlite-sync: %q is not FULL or NORMAL", g.sync)
	}
	if err := os.MkdirAll(g.data, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", g.data, err)
	}
	store, err := g.openStore(ctx)
	if err != nil {
		return nil, err
	}
	reg, hosts := newRegistry(g.data, store)
	env := &Env{Data: g.data, Store: store, Log: log, Notifier: engine.NewNotifier(), Registry: reg, Hosts: hosts, Tuning: tuning,
		Events: engine.NewEvents(), WorkerID: newWorkerID()}
	// A store shared by many processes wakes this process's workers when
	// any of them adds work (PostgreSQL's LISTEN/NOTIFY).
	if w, ok := store.(interface{ WakeOn(*engine.Notifier) }); ok {
		w.WakeOn(env.Notifier)
	}
	if err := env.ensureBuiltins(ctx); err != nil {
		store.Close()
		return nil, err
	}
	return env, nil
}

// openStore opens the store --store names: the data directory's SQLite
// file by default, or a PostgreSQL database (postgres://...).
func (g *globals) openStore(ctx context.Context) (engine.Store, error) {
	switch {
	case g.store == "" || g.store == "sqlite":
		store, err := sqlite.Open(ctx, filepath.Join(g.data, DBFile), sqlite.Options{Synchronous: g.sync})
		if err != nil {
			return nil, fmt.Errorf("open store in %s: %w", g.data, err)
		}
		return store, nil
	case postgres.IsURL(g.store):
		store, err := postgres.Open(ctx, g.store, postgres.Options{})
		if err != nil {
			return nil, fmt.Errorf("open postgres store %s: %w", redactURL(g.store), err)
		}
		return store, nil
	}
	return nil, usagef("--store: %q is neither sqlite nor a postgres:// URL", redactURL(g.store))
}

// redactURL hides the password of a database URL in messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// ensureBuiltins creates the built-in pipelines that are missing (noop
// comes with the schema; image needs the image processor of this binary).
func (e *Env) ensureBuiltins(ctx context.Context) error {
	_, err := e.Store.GetPipeline(ctx, ImagePipeline)
	if err == nil || !engine.IsNotFound(err) {
		return err
	}
	_, err = e.Store.PutPipeline(ctx, &engine.PutPipelineParams{Pipeline: &engine.Pipeline{
		Name: ImagePipeline, Description: "built-in: format, size, EXIF, hashes and a thumbnail per image",
		Stages: []engine.Stage{{Processor: "image"}},
	}, Now: time.Now()})
	return err
}

// newRegistry returns the processors this binary offers; images are read
// from and thumbnails written to the store's blobs (under the data
// directory only without a store).
func newRegistry(data string, store engine.Store) (*engine.Registry, *hostlimit.Limiter) {
	var defs engine.DefinitionGetter
	var blobs engine.BlobStore
	if store != nil {
		defs, blobs = store, store
	}
	reg := engine.NewRegistry()
	// One limiter per process: every http stage to a host shares its pace.
	hosts := hostlimit.New(hostlimit.Config{})
	reg.Register(httpproc.Kind, httpproc.NewFactory(hosts))
	reg.Register("image", imageproc.New(imageproc.Config{Blobs: blobs, ThumbDir: filepath.Join(data, "thumbs")}))
	reg.Register(engine.CommandKind, engine.NewCommandFactory(engine.CommandProcessorConfig{
		Definitions: defs, WorkDir: filepath.Join(data, "commands")}))
	return reg, hosts
}

// env opens the data directory for one command; the caller closes it.
func (g *globals) env(cmd interface{ Context() context.Context }) (context.Context, *Env, error) {
	ctx := cmd.Context()
	env, err := g.open(ctx)
	return ctx, env, err
}

// withEnv opens the data directory, calls fn and closes it again.
func (g *globals) withEnv(cmd interface{ Context() context.Context }, fn func(ctx context.Context, env *Env) error) error {
	ctx, env, err := g.env(cmd)
	if err != nil {
		return err
	}
	defer env.Close()
	return fn(ctx, env)
}

// withJob parses a JOB_ID argument, then runs fn as withEnv does.
func (g *globals) withJob(cmd interface{ Context() context.Context }, arg string, fn func(ctx context.Context, env *Env, id int64) error) error {
	id, err := parseID(arg, "job ID")
	if err != nil {
		return err
	}
	return g.withEnv(cmd, func(ctx context.Context, env *Env) error { return fn(ctx, env, id) })
}

// Close closes the store.
func (e *Env) Close() error { return e.Store.Close() }

// Ingester returns an ingester on this env.
func (e *Env) Ingester() (*engine.Ingester, error) {
	return engine.NewIngester(engine.IngesterConfig{Store: e.Store, Notifier: e.Notifier, Logger: e.Log, Batch: e.Tuning.Ingest,
		Events: e.Events})
}

// Runner returns a runner on this env.
func (e *Env) Runner(concurrency int, drain bool, onFinished func(int64)) (*engine.Runner, error) {
	return engine.NewRunner(e.runnerConfig(engine.RunnerConfig{Concurrency: concurrency, Drain: drain, OnJobFinished: onFinished,
		ReapInterval: e.Tuning.ReapInterval, StaleIngestAfter: e.Tuning.StaleIngestAfter}))
}

// KickoffRunner returns a runner for a kickoff slice of one job (the CLI's
// `kickoff` and the API's): the env's runner settings, with the same
// in-flight limits and CPU/memory pressure as every other runner.
func (e *Env) KickoffRunner(c engine.RunnerConfig) (*engine.Runner, error) {
	if c.JobID == 0 {
		return nil, engine.Errorf(engine.EINVALID, "a kickoff runner needs a job")
	}
	return engine.NewRunner(e.runnerConfig(c))
}

// runnerConfig completes c with this env's store, registry, logger and
// tuning: concurrency (unless c sets it), claim and lease control, the
// per-job and per-user in-flight limits and the pressure gauge.
func (e *Env) runnerConfig(c engine.RunnerConfig) engine.RunnerConfig {
	c.Store, c.Registry, c.Notifier, c.Logger, c.Events = e.Store, e.Registry, e.Notifier, e.Log, e.Events
	if c.WorkerID == "" {
		c.WorkerID = e.WorkerID
	}
	if c.Concurrency == 0 {
		c.Concurrency = e.Tuning.Concurrency
	}
	c.Claim, c.Lease = e.Tuning.Claim, e.Tuning.Lease
	c.MaxInFlightPerJob, c.MaxInFlightPerUser = e.Tuning.MaxInFlightPerJob, e.Tuning.MaxInFlightPerUser
	c.Pressure = &e.Tuning.Pressure
	return c
}

// processorKinds lists the processors this binary offers.
func processorKinds() string {
	reg, _ := newRegistry("", nil)
	return reg.KindList()
}

// poolStats reports the store's connection pools for the metrics, when the
// store keeps database/sql pools (SQLite); nil otherwise.
func (e *Env) poolStats() api.PoolStats {
	if ps, ok := e.Store.(interface{ PoolStats() map[string]sql.DBStats }); ok {
		return ps.PoolStats
	}
	return nil
}
