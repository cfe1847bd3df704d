package storecopy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/storage/postgres"
	"github.com/sluicehq/sluice/storage/postgres/pgtest"
	"github.com/sluicehq/sluice/storage/sqlite"
	"github.com/sluicehq/sluice/storage/storecopy"
)

// now is the fake time every write of the filled store uses.
var now = time.Date(2031, time.May, 6, 7, 8, 9, 123_000_000, time.UTC)

// filled is a SQLite store with a row in every copied table, written
// through the engine's Store methods.
type filled struct {
	st   *sqlite.Store
	path string
	jobs []*engine.Job
	blob []byte
}

func fill(t *testing.T) *filled {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "sluice.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	f := &filled{st: st, path: path}

	ann, err := st.CreateUser(ctx, &engine.CreateUserParams{Name: "ann", Role: engine.RoleUser, PasswordHash: "hash-1", Now: now})
	require.NoError(t, err)
	_, err = st.CreateToken(ctx, &engine.CreateTokenParams{UserID: ann.ID, Name: "laptop", Kind: "api", Hash: "token-hash-1", Now: now})
	require.NoError(t, err)
	_, err = st.RecordAudit(ctx, &engine.AuditEntry{At: now, UserID: ann.ID, UserName: "ann", Action: "job.create", Object: "job 1", IP: "10.0.0.1"})
	require.NoError(t, err)
	file, err := st.CreateFile(ctx, &engine.CreateFileParams{File: &engine.File{UserID: ann.ID, Name: "rows.csv", Size: 123,
		SHA256: "abc", MediaType: "text/csv", Source: "upload"}, Now: now})
	require.NoError(t, err)
	_, err = st.PutPipeline(ctx, &engine.PutPipelineParams{Pipeline: &engine.Pipeline{Name: "two", Description: "two stages",
		Stages: []engine.Stage{{Processor: "noop"}, {Processor: "noop"}}}, Now: now})
	require.NoError(t, err)
	require.NoError(t, st.SaveHostRates(ctx, []engine.HostRate{{Host: "api.example", Rate: 5.5, Ceiling: 12.25, Concurrency: 3}}, now))
	_, err = st.CreateSource(ctx, &engine.SourceRecord{Name: "drop", Kind: engine.SourceFolder, Config: json.RawMessage(`{"path":"/srv/drop"}`),
		Pipeline: engine.DefaultPipeline, After: "leave", Poll: time.Minute, Enabled: true}, now)
	require.NoError(t, err)
	obj, _, err := st.ClaimSourceObject(ctx, &engine.ClaimSourceObjectParams{Source: "drop", Key: "a.csv", Size: 5, MTime: now, Now: now})
	require.NoError(t, err)
	_, err = st.PutDefinition(ctx, &engine.Definition{Key: "echo", Description: "says it", Executable: "/bin/echo", Args: []string{"{{.n}}"}}, now)
	require.NoError(t, err)
	_, err = st.CreateTrigger(ctx, &engine.Trigger{Name: "after", Kind: engine.TriggerEvent, Event: engine.EventJobFinished,
		Pipeline: engine.DefaultPipeline, Enabled: true}, now)
	require.NoError(t, err)
	require.NoError(t, st.AppendEvents(ctx, &engine.AppendEventsParams{Origin: "box:1:1", Now: now, Events: []engine.Event{
		{Name: engine.EventJobFinished, Subject: "job:1", At: now, Data: map[string]any{"jobId": float64(1)}},
	}}))

	// Two jobs of 1,200 rows; most of the first are processed, some fail.
	for j := range 2 {
		job, err := st.CreateJob(ctx, &engine.CreateJobParams{UserID: ann.ID, Pipeline: engine.DefaultPipeline, Name: fmt.Sprintf("job%d", j),
			Source: "upload", FileID: file.ID, MaxAttempts: 3, Now: now})
		require.NoError(t, err)
		var rows []engine.NewItem
		for i := range 1200 {
			in := json.RawMessage(fmt.Sprintf(`{"sku":"S%d-%d","name":"ünïcode ✓"}`, j, i))
			rows = append(rows, engine.NewItem{Seq: int64(i + 1), Input: in, Normalized: in, Status: engine.ItemPending})
		}
		require.NoError(t, st.InsertItems(ctx, &engine.InsertItemsParams{JobID: job.ID, Items: rows, Now: now}))
		_, err = st.FinishIngest(ctx, &engine.FinishIngestParams{JobID: job.ID, Now: now})
		require.NoError(t, err)
		f.jobs = append(f.jobs, job)
	}
	claimed, err := st.ClaimItems(ctx, &engine.ClaimItemsParams{WorkerID: "w1", Limit: 900, LeaseFor: time.Minute, Now: now, JobID: f.jobs[0].ID})
	require.NoError(t, err)
	var outs []engine.Outcome
	for i, it := range claimed {
		o := engine.Outcome{ItemID: it.ID, JobID: it.JobID, Attempt: it.Attempts, Status: engine.ItemDone, StartedAt: now,
			Duration: 3 * time.Millisecond, Result: json.RawMessage(fmt.Sprintf(`{"price":%d}`, i))}
		if i%10 == 0 {
			o.Status, o.Result, o.ErrorClass, o.Error = engine.ItemError, nil, engine.ClassPermanent, "bad row"
		}
		outs = append(outs, o)
	}
	_, err = st.CompleteItems(ctx, &engine.CompleteItemsParams{WorkerID: "w1", Outcomes: outs, Now: now})
	require.NoError(t, err)
	_, err = st.FinishSourceObject(ctx, &engine.FinishSourceObjectParams{ID: obj.ID, State: engine.ObjectDone, JobID: f.jobs[0].ID, SHA256: "def", Now: now})
	require.NoError(t, err)

	f.blob = make([]byte, 2*engine.BlobChunkSize+77)
	for i := range f.blob {
		f.blob[i] = byte(i * 7)
	}
	_, err = st.PutBlob(ctx, &engine.PutBlobParams{Key: engine.JobBlobKey(f.jobs[0].ID, "in/1-a.jpg"), JobID: f.jobs[0].ID,
		MediaType: "image/jpeg", Body: bytes.NewReader(f.blob), Now: now})
	require.NoError(t, err)
	// A deleted job: its ids must not be handed out again on the target.
	gone, err := st.CreateJob(ctx, &engine.CreateJobParams{UserID: ann.ID, Pipeline: engine.DefaultPipeline, Now: now})
	require.NoError(t, err)
	_, err = st.DeleteJob(ctx, gone.ID)
	require.NoError(t, err)
	return f
}

func target(t *testing.T) *postgres.Store {
	t.Helper()
	return pgtest.Open(t, postgres.Options{NoListen: true})
}

// TestCopyInterruptedAndResumed: a copy canceled midway leaves a partial
// target, which the next run completes without duplicates; the PostgreSQL
// store then reads back what the SQLite store holds.
func TestCopyInterruptedAndResumed(t *testing.T) {
	pgtest.URL(t)
	t.Parallel()
	f := fill(t)
	dst := target(t)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var seen []storecopy.Progress
	_, err := storecopy.Copy(ctx, f.st, dst, storecopy.Options{Source: f.path, BatchRows: 100, Progress: func(p storecopy.Progress) {
		seen = append(seen, p)
		if p.Table == "job_items" && p.Copied >= 1000 {
			cancel()
		}
	}})
	require.Error(t, err, "the copy was canceled")
	var partial int64
	require.NoError(t, dst.Pool().QueryRow(t.Context(), `SELECT count(*) FROM job_items`).Scan(&partial))
	require.Equal(t, int64(1000), partial, "the batches committed before the cancel stay")
	require.Equal(t, storecopy.Progress{Table: "job_items", Copied: 1000, Total: 2400}, seen[len(seen)-1])

	res, err := storecopy.Copy(t.Context(), f.st, dst, storecopy.Options{Source: f.path, BatchRows: 100})
	require.NoError(t, err)
	require.True(t, res.Resumed)
	require.True(t, res.OK, "%+v", res.Counts)
	require.Len(t, res.Counts, len(storecopy.Tables))
	for _, c := range res.Counts {
		require.Positive(t, c.Source, "the filled store has rows in %s", c.Table)
		require.Equal(t, c.Source, c.Target, c.Table)
	}
	firstRun := map[string]int64{}
	for _, p := range seen {
		firstRun[p.Table] = p.Copied
	}
	var all int64
	for _, c := range res.Counts {
		all += c.Source
	}
	require.Equal(t, all, firstRun["job_items"]+res.Copied+sumExcept(firstRun, "job_items"),
		"the second run copies exactly the rows the first did not")

	requireSameStore(t, f, dst)

	// Running it again copies nothing and still verifies.
	again, err := storecopy.Copy(t.Context(), f.st, dst, storecopy.Options{Source: f.path})
	require.NoError(t, err)
	require.Zero(t, again.Copied)
	require.True(t, again.OK)

	// New rows get new ids, past every id the appliance used (also the
	// deleted job's).
	j, err := dst.CreateJob(t.Context(), &engine.CreateJobParams{UserID: 1, Pipeline: engine.DefaultPipeline, Now: now})
	require.NoError(t, err)
	require.Equal(t, f.jobs[1].ID+2, j.ID)
	u, err := dst.CreateUser(t.Context(), &engine.CreateUserParams{Name: "bob", Role: engine.RoleUser, Now: now})
	require.NoError(t, err)
	require.Equal(t, int64(3), u.ID)

	// The claim line carries over: the job never claimed goes first, then
	// the one the appliance claimed (its ticket, copied, is below every
	// ticket the target hands out from now on), and they take turns.
	var order []int64
	for range 4 {
		items, err := dst.ClaimItems(t.Context(), &engine.ClaimItemsParams{WorkerID: "w2", Limit: 1, MaxJobs: 1, LeaseFor: time.Minute, Now: now.Add(time.Minute)})
		require.NoError(t, err)
		require.Len(t, items, 1)
		order = append(order, items[0].JobID)
	}
	require.Equal(t, []int64{f.jobs[1].ID, f.jobs[0].ID, f.jobs[1].ID, f.jobs[0].ID}, order)
}

func sumExcept(m map[string]int64, skip string) int64 {
	var n int64
	for k, v := range m {
		if k != skip {
			n += v
		}
	}
	return n
}

// requireSameStore reads the copied store through the engine and compares
// it with the source.
func requireSameStore(t *testing.T, f *filled, dst *postgres.Store) {
	t.Helper()
	ctx := t.Context()
	src := f.st
	srcJobs, err := src.ListJobs(ctx, &engine.ListJobsParams{Limit: 100})
	require.NoError(t, err)
	dstJobs, err := dst.ListJobs(ctx, &engine.ListJobsParams{Limit: 100})
	require.NoError(t, err)
	require.Equal(t, srcJobs, dstJobs, "jobs with their counters")
	require.Equal(t, int64(810), dstJobs[len(dstJobs)-1].Counts.Done)

	for _, j := range f.jobs {
		collect := func(s engine.Store) []*engine.Item {
			var out []*engine.Item
			require.NoError(t, s.ScanItems(ctx, &engine.ScanItemsParams{JobID: j.ID, WithInput: true}, func(it *engine.Item) error {
				out = append(out, it)
				return nil
			}))
			return out
		}
		a, b := collect(src), collect(dst)
		require.Len(t, b, 1200)
		require.Equal(t, a, b, "items of job %d", j.ID)
		for _, it := range a[:3] {
			sa, err := src.ListAttempts(ctx, it.ID)
			require.NoError(t, err)
			da, err := dst.ListAttempts(ctx, it.ID)
			require.NoError(t, err)
			require.Equal(t, sa, da, "attempts of item %d", it.ID)
		}
	}
	same := func(what string, get func(s engine.Store) (any, error)) {
		t.Helper()
		a, err := get(src)
		require.NoError(t, err, what)
		b, err := get(dst)
		require.NoError(t, err, what)
		require.Equal(t, a, b, what)
	}
	same("users", func(s engine.Store) (any, error) { return s.ListUsers(ctx) })
	same("tokens", func(s engine.Store) (any, error) { return s.ListTokens(ctx, &engine.ListTokensParams{UserID: 2}) })
	same("audit", func(s engine.Store) (any, error) { return s.ListAudit(ctx, &engine.ListAuditParams{Limit: 10}) })
	same("pipelines", func(s engine.Store) (any, error) { return s.ListPipelines(ctx) })
	same("host rates", func(s engine.Store) (any, error) { return s.LoadHostRates(ctx) })
	same("sources", func(s engine.Store) (any, error) { return s.ListSources(ctx) })
	same("ledger", func(s engine.Store) (any, error) {
		return s.ListSourceObjects(ctx, &engine.ListSourceObjectsParams{Source: "drop"})
	})
	same("definitions", func(s engine.Store) (any, error) { return s.ListDefinitions(ctx) })
	same("triggers", func(s engine.Store) (any, error) { return s.ListTriggers(ctx, &engine.ListTriggersParams{}) })
	same("pending events", func(s engine.Store) (any, error) { return s.PendingEvents(ctx, &engine.PendingEventsParams{Limit: 10}) })
	same("blob", func(s engine.Store) (any, error) {
		return s.StatBlob(ctx, engine.JobBlobKey(f.jobs[0].ID, "in/1-a.jpg"))
	})
	r, err := dst.OpenBlob(ctx, engine.JobBlobKey(f.jobs[0].ID, "in/1-a.jpg"))
	require.NoError(t, err)
	body, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, f.blob, body)
}

// TestCopyRefusesForeignTarget: a target holding data of its own, or an
// earlier copy of another store, is left alone.
func TestCopyRefusesForeignTarget(t *testing.T) {
	pgtest.URL(t)
	t.Parallel()
	f := fill(t)

	busy := target(t)
	_, err := busy.CreateJob(t.Context(), &engine.CreateJobParams{UserID: 1, Pipeline: engine.DefaultPipeline, Now: now})
	require.NoError(t, err)
	_, err = storecopy.Copy(t.Context(), f.st, busy, storecopy.Options{Source: f.path})
	require.Equal(t, engine.ECONFLICT, engine.ErrorCode(err), "%v", err)
	require.ErrorContains(t, err, "not empty (it holds jobs)")

	other := fill(t)
	dst := target(t)
	ctx, cancel := context.WithCancel(t.Context())
	_, err = storecopy.Copy(ctx, other.st, dst, storecopy.Options{Source: other.path, BatchRows: 100,
		Progress: func(p storecopy.Progress) { cancel() }})
	require.Error(t, err)
	_, err = storecopy.Copy(t.Context(), f.st, dst, storecopy.Options{Source: f.path})
	require.Equal(t, engine.ECONFLICT, engine.ErrorCode(err), "%v", err)
	require.ErrorContains(t, err, "a copy of another store")
}
