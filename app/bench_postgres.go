package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/storage/postgres"
)

// The PostgreSQL benchmarks run against the server --store names (or
// SLUICE_BENCH_POSTGRES), each in a fresh schema dropped afterwards.

// pgBenchURL returns the server to benchmark on, or an error saying how to
// name one.
func (b *bench) pgBenchURL() (string, error) {
	if postgres.IsURL(b.g.store) {
		return b.g.store, nil
	}
	if u := os.Getenv("SLUICE_BENCH_POSTGRES"); postgres.IsURL(u) {
		return u, nil
	}
	return "", usagef("the pg benchmarks need a server: --store postgres://... or SLUICE_BENCH_POSTGRES")
}

// pgSchema makes a fresh schema name for one benchmark and returns the URL
// that points a process at it, and a function that drops it.
func pgSchema(base, prefix string) (string, string, func(), error) {
	var r [5]byte
	_, _ = rand.Read(r[:])
	schema := prefix + hex.EncodeToString(r[:])
	u, err := url.Parse(base)
	if err != nil {
		return "", "", nil, err
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	drop := func() { _ = postgres.DropSchema(context.Background(), base, schema) }
	return schema, u.String(), drop, nil
}

// pgWorkers is how many `sluice worker` processes the pg throughput
// benchmark runs.
const pgWorkers = 4

// pgThroughput: --items noop items drained by four `sluice worker`
// processes of this binary on one PostgreSQL queue, then the same number
// of no-op River jobs on the same server.
func (b *bench) pgThroughput(ctx context.Context) (benchResult, error) {
	base, err := b.pgBenchURL()
	if err != nil {
		return benchResult{}, err
	}
	schema, storeURL, drop, err := pgSchema(base, "bench_sluice_")
	if err != nil {
		return benchResult{}, err
	}
	defer drop()
	st, err := postgres.Open(ctx, base, postgres.Options{Schema: schema, NoListen: true})
	if err != nil {
		return benchResult{}, err
	}
	defer st.Close()
	job, err := fillPGJob(ctx, st, b.items)
	if err != nil {
		return benchResult{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return benchResult{}, err
	}
	walSince, err := walMeter(ctx, base)
	if err != nil {
		return benchResult{}, err
	}
	serverCPU, local := serverCPUMeter(ctx, base)
	start := time.Now()
	cmds := make([]*exec.Cmd, pgWorkers)
	errs := make(chan error, pgWorkers)
	for i := range cmds {
		cmds[i] = exec.CommandContext(ctx, exe, "--data", filepath.Join(b.dir, "pgworker"+strconv.Itoa(i)), "--store", storeURL,
			"--log-level", "error", "worker", "--drain")
		cmds[i].Stderr = b.g.stderr
		if err := cmds[i].Start(); err != nil {
			return benchResult{}, err
		}
		go func() { errs <- cmds[i].Wait() }()
	}
	for range cmds {
		if err := <-errs; err != nil {
			return benchResult{}, fmt.Errorf("sluice worker: %w", err)
		}
	}
	wall := time.Since(start)
	var srvCPU float64
	if local {
		srvCPU = serverCPU()
	}
	wal, err := walSince()
	if err != nil {
		return benchResult{}, err
	}
	j, err := st.GetJob(ctx, job)
	if err != nil {
		return benchResult{}, err
	}
	if j.Counts.Done != int64(b.items) || j.StartedAt == nil || j.FinishedAt == nil {
		return benchResult{}, fmt.Errorf("job %d: %d of %d items DONE (%s)", job, j.Counts.Done, b.items, j.State)
	}
	busy := j.FinishedAt.Sub(*j.StartedAt)
	rate := float64(b.items) / busy.Seconds()
	var cpu float64
	for _, c := range cmds {
		cpu += cpuSeconds(c)
	}
	river, err := b.riverThroughput(ctx, base)
	if err != nil {
		return benchResult{}, fmt.Errorf("river: %w", err)
	}
	perItem := func(sec float64) float64 { return sec / float64(b.items) * 1e6 }
	figures := map[string]float64{"items": float64(b.items), "workers": pgWorkers, "seconds": busy.Seconds(), "itemsPerSec": rate,
		"wallSeconds": wall.Seconds(), "workerCpuSeconds": cpu, "workerCpuUsPerItem": perItem(cpu),
		"walBytesPerItem": wal / float64(b.items),
		"riverJobsPerSec": river.rate, "riverWalBytesPerJob": river.wal / float64(b.items),
		"riverClientCpuUsPerJob": perItem(river.clientCPU)}
	if local {
		figures["serverCpuSeconds"], figures["serverCpuUsPerItem"] = srvCPU, perItem(srvCPU)
		figures["riverServerCpuUsPerJob"] = perItem(river.serverCPU)
	}
	return benchResult{
		Name:    "pgthroughput",
		Figures: figures,
		Target:  "≥ 20,000 items/s with 4 worker processes", Pass: boolp(rate >= 20000),
		Note: "itemsPerSec: the job's first claim to its last completion (the workers' start-up not counted); " +
			"walBytesPerItem: WAL the whole server wrote while the workers ran, per item (the server's work, steady whatever the machine's load; " +
			"meaningful on a server nothing else writes to); serverCpuUsPerItem: CPU of all the server's processes from the workers' start to their exit, per item " +
			"(only when the server runs on this machine; like the WAL, steadier than the wall clock on a busy machine); workerCpuUsPerItem: the 4 worker processes', start-up included; riverJobsPerSec: one in-process River client (riverpgxv5, MaxWorkers 1000: River fetches at most MaxWorkers jobs per 100 ms cooldown) on the same server, same count; riverClientCpuUsPerJob: this process's CPU while River ran",
	}, nil
}

// fillPGJob stores a QUEUED noop job of n items in the store.
func fillPGJob(ctx context.Context, st *postgres.Store, n int) (int64, error) {
	now := time.Now()
	j, err := st.CreateJob(ctx, &engine.CreateJobParams{UserID: 1, Pipeline: engine.DefaultPipeline, Name: "bench", Now: now})
	if err != nil {
		return 0, err
	}
	const batch = 5000
	items := make([]engine.NewItem, 0, batch)
	for seq := 1; seq <= n; seq++ {
		items = append(items, engine.NewItem{Seq: int64(seq), Input: json.RawMessage(fmt.Sprintf(`{"sku":"S%d","price":"%d.5"}`, seq, seq))})
		if len(items) == batch || seq == n {
			if err := st.InsertItems(ctx, &engine.InsertItemsParams{JobID: j.ID, Items: items, Now: now}); err != nil {
				return 0, err
			}
			items = items[:0]
		}
	}
	if _, err := st.FinishIngest(ctx, &engine.FinishIngestParams{JobID: j.ID, Now: now}); err != nil {
		return 0, err
	}
	return j.ID, nil
}

// riverArgs is the no-op River job of the comparison.
type riverArgs struct {
	Seq int `json:"seq"`
}

func (riverArgs) Kind() string { return "bench" }

type riverWorker struct {
	river.WorkerDefaults[riverArgs]
}

func (riverWorker) Work(context.Context, *river.Job[riverArgs]) error { return nil }

// riverRun is what the River comparison measured.
type riverRun struct {
	// rate is jobs/s from the client's start until none is left unfinished.
	rate float64
	// wal is the server's WAL bytes over the run; serverCPU and clientCPU
	// the CPU-seconds of the server (0 when not on this machine) and of
	// this process.
	wal, serverCPU, clientCPU float64
}

// riverThroughput enqueues --items no-op River jobs in a fresh schema of the
// same server and runs them with one in-process client.
func (b *bench) riverThroughput(ctx context.Context, base string) (riverRun, error) {
	_, riverURL, drop, err := pgSchema(base, "bench_river_")
	if err != nil {
		return riverRun{}, err
	}
	defer drop()
	cfg, err := pgxpool.ParseConfig(riverURL)
	if err != nil {
		return riverRun{}, err
	}
	schema := cfg.ConnConfig.RuntimeParams["search_path"]
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return riverRun{}, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
		return riverRun{}, err
	}
	driver := riverpgxv5.New(pool)
	quiet := slog.New(slog.NewTextHandler(b.g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: quiet})
	if err != nil {
		return riverRun{}, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return riverRun{}, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{})
	client, err := river.NewClient(driver, &river.Config{
		Logger: quiet, Schema: schema, Workers: workers,
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1000}},
	})
	if err != nil {
		return riverRun{}, err
	}
	for start := 0; start < b.items; start += 1000 {
		params := make([]river.InsertManyParams, 0, 1000)
		for i := start; i < min(start+1000, b.items); i++ {
			params = append(params, river.InsertManyParams{Args: riverArgs{Seq: i}})
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return riverRun{}, err
		}
	}
	walSince, err := walMeter(ctx, base)
	if err != nil {
		return riverRun{}, err
	}
	serverCPU, local := serverCPUMeter(ctx, base)
	cpu0 := processCPU()
	t0 := time.Now()
	if err := client.Start(ctx); err != nil {
		return riverRun{}, err
	}
	defer client.Stop(context.Background())
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var left int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state IN ('available','running','retryable','scheduled','pending')`).Scan(&left); err != nil {
			return riverRun{}, err
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			return riverRun{}, errors.New("river did not finish within 10 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	run := riverRun{rate: float64(b.items) / time.Since(t0).Seconds(), clientCPU: (processCPU() - cpu0).Seconds()}
	if local {
		run.serverCPU = serverCPU()
	}
	run.wal, err = walSince()
	return run, err
}

// walMeter reads the server's WAL insert position and returns a function
// that tells how many bytes of WAL the server wrote since.
func walMeter(ctx context.Context, url string) (func() (float64, error), error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	var start string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&start); err != nil {
		return nil, err
	}
	return func() (float64, error) {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return 0, err
		}
		defer conn.Close(ctx)
		var n float64
		err = conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::float8`, start).Scan(&n)
		return n, err
	}, nil
}

// pgLatency: single-item jobs enqueued through one store (as another
// process would) with an idle runner on a second store of the same schema:
// the wake-up travels by NOTIFY through the server.
func (b *bench) pgLatency(ctx context.Context) (benchResult, error) {
	base, err := b.pgBenchURL()
	if err != nil {
		return benchResult{}, err
	}
	schema, storeURL, drop, err := pgSchema(base, "bench_latency_")
	if err != nil {
		return benchResult{}, err
	}
	defer drop()
	producer, err := postgres.Open(ctx, base, postgres.Options{Schema: schema})
	if err != nil {
		return benchResult{}, err
	}
	defer producer.Close()
	g := *b.g
	g.data, g.logLevel, g.store = filepath.Join(b.dir, "pglatency"), "error", storeURL
	env, err := g.open(ctx)
	if err != nil {
		return benchResult{}, err
	}
	defer env.Close()
	enqueue := func(ctx context.Context, row json.RawMessage) error {
		_, err := producer.EnqueueJob(ctx, &engine.EnqueueJobParams{
			Job:   engine.CreateJobParams{UserID: 1, Pipeline: "bench-latency", Now: time.Now()},
			Items: []engine.NewItem{{Seq: 1, Input: row}},
		})
		return err
	}
	r, err := measureLatency(ctx, env, b.latencyN, enqueue)
	if err != nil {
		return benchResult{}, err
	}
	p50, p99 := r.Figures["p50ms"], r.Figures["p99ms"]
	r.Name = "pglatency"
	r.Target, r.Pass = "p50 ≤ 5 ms, p99 ≤ 20 ms", boolp(p50 <= 5 && p99 <= 20)
	r.Note = "enqueue through another connection pool (another process's view) to processing start, idle worker " +
		"woken by LISTEN/NOTIFY; pickup: from the enqueue's commit to processing start"
	return r, nil
}
