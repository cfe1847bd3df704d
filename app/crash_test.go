package app_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/storage/sqlite"
)

// buildBinary compiles sluice once per test binary run.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sluice")
	cmd := exec.Command("go", "build", "-o", bin, "../")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

func writeCSV(t *testing.T, path string, n int) {
	t.Helper()
	var b strings.Builder
	b.WriteString("sku,name,price\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "S%d,Item %d,%d.5\n", i, i, i)
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
}

func sluiceCmd(bin, data string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, append([]string{"--data", data, "--log-level", "error"}, args...)...)
	cmd.Env = append(append(os.Environ(), "SLUICE_LOCK_FLOOR_MS=1000", "SLUICE_LOCK_CAP_MS=2000",
		"SLUICE_REAP_INTERVAL_MS=200", "SLUICE_STALE_INGEST_MS=1500"), env...)
	return cmd
}

func run(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return string(out)
}

func openDB(t *testing.T, data string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(data, "sluice.db")+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// stored is the code an item status has in the SQLite file.
func stored(st engine.ItemStatus) string { return strconv.FormatInt(sqlite.StatusCode(st), 10) }

func count(t *testing.T, db *sql.DB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.QueryRow(q, args...).Scan(&n), q)
	return n
}

// TestCrashWorkerKill9 kills a real worker process twenty times at random
// moments while it processes a 50,000-item job, restarting it each time, and
// checks that every item ends DONE exactly once with the right result.
func TestCrashWorkerKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary; not in -short")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	csv := filepath.Join(dir, "rows.csv")
	const rows = 50000
	writeCSV(t, csv, rows)
	// A small delay per item keeps the job busy long enough to be killed
	// at many points: claims, processing, group commits.
	pl := filepath.Join(dir, "slow.json")
	require.NoError(t, os.WriteFile(pl, []byte(`{"name":"slow","stages":[{"processor":"noop","config":{"delayMs":0.5}}]}`), 0o600))
	run(t, sluiceCmd(bin, data, nil, "pipeline", "apply", pl))
	run(t, sluiceCmd(bin, data, nil, "ingest", csv, "--pipeline", "slow"))

	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	db := openDB(t, data)
	for kill := 0; kill < 20; kill++ {
		cmd := sluiceCmd(bin, data, nil, "worker", "--concurrency", "16")
		require.NoError(t, cmd.Start())
		time.Sleep(time.Duration(50+rnd.IntN(250)) * time.Millisecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		// The store is consistent after every crash: counters equal rows.
		requireCountersMatch(t, db)
	}
	done := count(t, db, `SELECT count(*) FROM job_items WHERE status = `+stored(engine.ItemDone))
	require.Less(t, done, int64(rows), "the job should not be finished before the last restart; make the items slower")
	out := run(t, sluiceCmd(bin, data, nil, "worker", "--drain", "--concurrency", "16"))
	t.Log(strings.TrimSpace(out))

	require.Equal(t, int64(rows), count(t, db, `SELECT count(*) FROM job_items`), "no item lost or added")
	require.Equal(t, int64(rows), count(t, db, `SELECT count(*) FROM job_items WHERE status = `+stored(engine.ItemDone)), "every item DONE")
	require.Zero(t, count(t, db, `SELECT count(*) FROM job_items WHERE result_json IS NOT COALESCE(normalized_json, input_json)`), "every result right")
	require.Zero(t, count(t, db, `SELECT count(*) FROM (SELECT item_id FROM item_attempts WHERE outcome = 'DONE'
		GROUP BY item_id HAVING count(*) > 1)`), "no item completed twice")
	require.Equal(t, int64(rows), count(t, db, `SELECT count(DISTINCT item_id) FROM item_attempts WHERE outcome = 'DONE'`))
	requireCountersMatch(t, db)
	require.Equal(t, "DONE", jobState(t, db, 1))
}

func jobState(t *testing.T, db *sql.DB, id int64) string {
	t.Helper()
	var s string
	require.NoError(t, db.QueryRow(`SELECT queue_state FROM jobs WHERE id = ?`, id).Scan(&s))
	return s
}

// requireCountersMatch checks that every job's counters equal its rows.
func requireCountersMatch(t *testing.T, db *sql.DB) {
	t.Helper()
	rows, err := db.Query(`SELECT j.id, j.pending_items, j.processing_items, j.done_items, j.error_items, j.not_found_items, j.skipped_items,
		(SELECT count(*) FROM job_items i WHERE i.job_id = j.id AND i.status = ` + stored(engine.ItemPending) + `),
		(SELECT count(*) FROM job_items i WHERE i.job_id = j.id AND i.status = ` + stored(engine.ItemProcessing) + `),
		(SELECT count(*) FROM job_items i WHERE i.job_id = j.id AND i.status = ` + stored(engine.ItemDone) + `),
		(SELECT count(*) FROM job_items i WHERE i.job_id = j.id AND i.status = ` + stored(engine.ItemError) + `),
		(SELECT count(*) FROM job_items i WHERE i.job_id = j.id AND i.status = ` + stored(engine.ItemNotFound) + `),
		(SELECT count(*) FROM job_items i WHERE i.job_id = j.id AND i.status = ` + stored(engine.ItemSkipped) + `)
		FROM jobs j`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var id int64
		var c [12]int64
		require.NoError(t, rows.Scan(&id, &c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6], &c[7], &c[8], &c[9], &c[10], &c[11]))
		require.Equal(t, c[6:], c[:6], "job %d: counters (PENDING..SKIPPED) must equal its rows", id)
	}
	require.NoError(t, rows.Err())
}

// TestCrashIngestKill9 kills `sluice ingest` at random moments: afterwards
// the job is absent, or FAILED with a reason once a worker notices the dead
// ingest, or complete — never a partial job that looks complete.
func TestCrashIngestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary; not in -short")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	csv := filepath.Join(dir, "rows.csv")
	const rows = 200000
	writeCSV(t, csv, rows)
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	// The store exists before the first kill: on a loaded machine every
	// kill could otherwise land before any ingest had created it.
	run(t, sluiceCmd(bin, data, nil, "jobs"))
	for i := 0; i < 6; i++ {
		cmd := sluiceCmd(bin, data, nil, "ingest", csv)
		require.NoError(t, cmd.Start())
		time.Sleep(time.Duration(20+rnd.IntN(600)) * time.Millisecond)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
	}
	db := openDB(t, data)
	// Nothing may look complete unless it is.
	require.Zero(t, count(t, db, `SELECT count(*) FROM jobs WHERE queue_state IN ('QUEUED', 'RUNNING', 'DONE') AND total_items != ?`, rows))
	require.Zero(t, count(t, db, `SELECT count(*) FROM jobs j WHERE queue_state IN ('QUEUED', 'RUNNING', 'DONE')
		AND (SELECT count(*) FROM job_items i WHERE i.job_id = j.id) != ?`, rows))
	// A worker fails the interrupted ingests (no heartbeat) with a reason
	// and processes the complete ones.
	time.Sleep(1600 * time.Millisecond)
	run(t, sluiceCmd(bin, data, nil, "worker", "--drain"))
	jobs, err := db.Query(`SELECT id, queue_state, COALESCE(last_error, ''), total_items FROM jobs`)
	require.NoError(t, err)
	defer jobs.Close()
	for jobs.Next() {
		var id, total int64
		var state, reason string
		require.NoError(t, jobs.Scan(&id, &state, &reason, &total))
		switch state {
		case "FAILED":
			require.Contains(t, reason, "ingest interrupted", "job %d", id)
		case "DONE":
			require.Equal(t, int64(rows), total, "job %d", id)
		default:
			t.Fatalf("job %d is %s after drain", id, state)
		}
	}
	requireCountersMatch(t, db)
	_ = context.Background
}
