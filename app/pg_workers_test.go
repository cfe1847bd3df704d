package app_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, to read the tables
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/app"
	"github.com/sluicehq/sluice/storage/postgres"
	"github.com/sluicehq/sluice/storage/postgres/pgtest"
)

// pgStoreURL returns the test server's URL pointed at a fresh schema (the
// CLI's --store), and the schema's store opened in this test.
func pgStoreURL(t *testing.T) (string, *postgres.Store) {
	t.Helper()
	base := pgtest.URL(t)
	st := pgtest.Open(t, postgres.Options{NoListen: true})
	u, err := url.Parse(base)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", st.Schema())
	u.RawQuery = q.Encode()
	return u.String(), st
}

func openPG(t *testing.T, storeURL string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", storeURL)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// TestPostgresFourWorkersKill9 runs four real `sluice worker` processes,
// each with its own data directory, on one PostgreSQL queue of 100,000
// items, kills one of them with SIGKILL midway, and checks that the items
// it held were reclaimed and finished by the others: every item DONE, none
// completed twice, the counters equal to the rows.
func TestPostgresFourWorkersKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary; not in -short")
	}
	storeURL, _ := pgStoreURL(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	csv := filepath.Join(dir, "rows.csv")
	const rows = 100000
	writeCSV(t, csv, rows)
	storeEnv := []string{"SLUICE_STORE=" + storeURL}
	run(t, sluiceCmd(bin, filepath.Join(dir, "ingest"), storeEnv, "ingest", csv))
	db := openPG(t, storeURL)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	workers := make([]*exec.Cmd, 4)
	waits := make([]chan error, 4)
	outs := make([]*strings.Builder, 4)
	for i := range workers {
		cmd := sluiceCmd(bin, filepath.Join(dir, fmt.Sprintf("worker%d", i)), storeEnv, "worker", "--drain", "--concurrency", "16")
		outs[i] = &strings.Builder{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		require.NoError(t, cmd.Start())
		workers[i] = cmd
		waits[i] = make(chan error, 1)
		go func() { waits[i] <- cmd.Wait() }()
	}
	defer func() {
		for _, w := range workers {
			_ = w.Process.Kill()
		}
	}()

	// Midway, kill worker 0 while it holds leases. It is stopped first
	// (SIGSTOP) and its leases counted while it cannot finish them: a count
	// taken while it runs may be spent by the time SIGKILL lands.
	victim := workers[0].Process.Pid
	held := fmt.Sprintf(`SELECT count(*) FROM job_items WHERE status = 'PROCESSING' AND locked_by LIKE '%%:%d:%%'`, victim)
	for {
		require.NoError(t, ctx.Err(), "the workers made too little progress")
		var done, holding int64
		require.NoError(t, db.QueryRow(`SELECT done_items FROM jobs WHERE id = 1`).Scan(&done))
		if done >= rows/4 {
			require.NoError(t, workers[0].Process.Signal(syscall.SIGSTOP))
			require.NoError(t, db.QueryRow(held).Scan(&holding))
			if holding > 0 {
				break
			}
			require.NoError(t, workers[0].Process.Signal(syscall.SIGCONT))
		}
		require.Less(t, done, int64(rows/2), "the victim never held a lease in the first half")
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, workers[0].Process.Signal(syscall.SIGKILL))
	<-waits[0]
	var orphaned int64
	require.NoError(t, db.QueryRow(held).Scan(&orphaned))
	require.Positive(t, orphaned, "the killed worker left leases behind")
	t.Logf("killed worker pid %d holding %d leases", victim, orphaned)

	for i := 1; i < 4; i++ {
		select {
		case err := <-waits[i]:
			require.NoError(t, err, "worker %d: %s", i, outs[i])
		case <-ctx.Done():
			t.Fatalf("worker %d did not drain the queue: %s", i, outs[i])
		}
	}

	pgCount := func(q string) int64 {
		t.Helper()
		var n int64
		require.NoError(t, db.QueryRow(q).Scan(&n), q)
		return n
	}
	require.Equal(t, "DONE", func() string {
		var s string
		require.NoError(t, db.QueryRow(`SELECT queue_state FROM jobs WHERE id = 1`).Scan(&s))
		return s
	}())
	require.Equal(t, int64(rows), pgCount(`SELECT count(*) FROM job_items`), "no item lost or added")
	require.Equal(t, int64(rows), pgCount(`SELECT count(*) FROM job_items WHERE status = 'DONE'`), "every item DONE")
	require.Zero(t, pgCount(`SELECT count(*) FROM job_items WHERE result_json IS DISTINCT FROM COALESCE(normalized_json, input_json)`), "every result right")
	require.Zero(t, pgCount(`SELECT count(*) FROM (SELECT item_id FROM item_attempts WHERE outcome = 'DONE'
		GROUP BY item_id HAVING count(*) > 1) x`), "no item completed twice")
	require.Equal(t, int64(rows), pgCount(`SELECT count(DISTINCT item_id) FROM item_attempts WHERE outcome = 'DONE'`))
	// The victim's leases were reclaimed by a reaper (an attempt record of
	// class poison naming the lost worker) and finished by another worker.
	reclaimed := pgCount(fmt.Sprintf(`SELECT count(*) FROM item_attempts WHERE error_class = 'poison' AND worker LIKE '%%:%d:%%'`, victim))
	require.GreaterOrEqual(t, reclaimed, orphaned, "every lease the killed worker held was reclaimed")
	require.Zero(t, pgCount(fmt.Sprintf(`SELECT count(*) FROM item_attempts WHERE outcome = 'DONE' AND worker LIKE '%%:%d:%%'
		AND item_id IN (SELECT item_id FROM item_attempts WHERE error_class = 'poison')`, victim)),
		"a reclaimed item is finished by another worker")
	require.Equal(t, int64(rows), pgCount(`SELECT done_items FROM jobs WHERE id = 1`))
	require.Zero(t, pgCount(`SELECT pending_items + processing_items + error_items FROM jobs WHERE id = 1`))
	// Three workers other than the victim did work.
	require.GreaterOrEqual(t, pgCount(`SELECT count(DISTINCT worker) FROM item_attempts WHERE outcome = 'DONE'`), int64(3))
}

// TestPostgresCLI: the CLI's commands work the same on a PostgreSQL store:
// an ingest, a draining worker, the listing; a bad password never shows.
func TestPostgresCLI(t *testing.T) {
	t.Parallel()
	storeURL, st := pgStoreURL(t)
	c := newCLI(t)
	csv := c.file("rows.csv", "sku,name\nA1,one\nA2,two\nA3,three\n")
	c.ok("--store", storeURL, "ingest", csv)
	c.ok("--store", storeURL, "worker", "--drain")
	out := c.ok("--store", storeURL, "jobs", "--json")
	require.Contains(t, out, `"state": "DONE"`)
	j, err := st.GetJob(context.Background(), 1)
	require.NoError(t, err)
	require.Equal(t, int64(3), j.Counts.Done, "the rows went to PostgreSQL, not the data directory")
	require.NoFileExists(t, filepath.Join(c.data, "sluice.db"))

	bad, err := url.Parse(storeURL)
	require.NoError(t, err)
	bad.User = url.UserPassword("nobody", "s3cret-pw")
	bad.Host = "127.0.0.1:1" // nothing listens there
	code, _, errs := c.run("--store", bad.String(), "jobs")
	require.Equal(t, 1, code, errs)
	require.Contains(t, errs, "open postgres store")
	require.NotContains(t, errs, "s3cret-pw")
}

// TestPostgresSchedulerFailover: two `sluice worker`s on one PostgreSQL
// store run one scheduler between them. The first holds the scheduler
// lease and its schedule trigger's jobs run; when it stops, the second
// takes the lease over and the schedule goes on firing.
func TestPostgresSchedulerFailover(t *testing.T) {
	t.Parallel()
	storeURL, _ := pgStoreURL(t)
	db := openPG(t, storeURL)
	c := newCLI(t)
	c.ok("--store", storeURL, "trigger", "add", "tick", "--cron", "@every 1s", "--tz", "UTC", "--pipeline", "noop")

	type worker struct {
		cancel context.CancelFunc
		done   chan int
		errb   *strings.Builder
	}
	start := func(i int) *worker {
		ctx, cancel := context.WithCancel(t.Context())
		w := &worker{cancel: cancel, done: make(chan int, 1), errb: &strings.Builder{}}
		data := filepath.Join(t.TempDir(), fmt.Sprintf("worker%d", i))
		go func() {
			var out strings.Builder
			w.done <- app.Main(ctx, []string{"--data", data, "--log-level", "error", "--store", storeURL, "worker"}, &out, w.errb)
		}()
		t.Cleanup(func() { cancel(); <-w.done })
		return w
	}
	pgInt := func(q string) int64 {
		t.Helper()
		var n int64
		require.NoError(t, db.QueryRow(q).Scan(&n), q)
		return n
	}
	holder := func() string {
		var h string
		err := db.QueryRow(`SELECT holder FROM leader_leases WHERE name = 'scheduler'`).Scan(&h)
		if errors.Is(err, sql.ErrNoRows) {
			return ""
		}
		require.NoError(t, err)
		return h
	}
	const doneJobs = `SELECT count(*) FROM jobs WHERE source = 'schedule' AND queue_state = 'DONE'`

	first := start(0)
	require.Eventually(t, func() bool { return holder() != "" && pgInt(doneJobs) >= 2 }, 60*time.Second, 50*time.Millisecond,
		"the only worker leads and its schedule's jobs run")
	leader := holder()
	second := start(1)
	require.Eventually(t, func() bool { return pgInt(`SELECT count(*) FROM job_workers`) == 2 }, 60*time.Second, 50*time.Millisecond,
		"both workers beat")
	require.Equal(t, leader, holder(), "the second worker does not take a held lease")
	require.Equal(t, int64(1), pgInt(`SELECT count(*) FROM job_workers WHERE worker_id = '`+leader+`'`), "the lease holder is a worker")

	first.cancel()
	require.Equal(t, 0, <-first.done, first.errb.String())
	first.done <- 0 // for the cleanup
	before := pgInt(doneJobs)
	require.Eventually(t, func() bool { h := holder(); return h != "" && h != leader }, 60*time.Second, 50*time.Millisecond,
		"the second worker takes the released lease")
	require.Eventually(t, func() bool { return pgInt(doneJobs) >= before+2 }, 60*time.Second, 50*time.Millisecond,
		"the schedule goes on under the new leader")
	require.Zero(t, pgInt(`SELECT count(*) FROM jobs WHERE source = 'schedule' AND queue_state NOT IN ('DONE', 'QUEUED', 'RUNNING')`))
	second.cancel()
	require.Equal(t, 0, <-second.done, second.errb.String())
	second.done <- 0
}

// TestPostgresServeWithSeparateWorker: `sluice --serve --no-workers` on a
// PostgreSQL store takes an upload through the API; a `sluice worker` of
// another data directory (another machine) processes it; the API then shows
// the job DONE: the server and the workers share only the database.
func TestPostgresServeWithSeparateWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary; not in -short")
	}
	t.Parallel()
	storeURL, _ := pgStoreURL(t)
	bin := buildBinary(t)
	storeEnv := []string{"SLUICE_STORE=" + storeURL}
	base, intro, wait, stop := startServe(t, bin, t.TempDir(), storeEnv, "--no-workers")
	session, csrf := signInWithLink(t, base, intro)

	id := uploadCSV(t, base, session, csrf, "", "sku,name\nA1,one\nA2,two\nA3,three\nA4,four\n")

	run(t, sluiceCmd(bin, t.TempDir(), storeEnv, "worker", "--drain"))

	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/jobs/%d", base, id), nil)
	req.AddCookie(session)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), `"DONE"`)
	require.Contains(t, string(body), `"DONE":4`)
	stop()
	require.NoError(t, wait())
}
