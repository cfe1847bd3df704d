// Package remotetest is the behaviour every polled source (FTP, S3) must
// show, run against each adapter with an in-process server (fast) and a
// real one (CI): files become exactly one job each, partial names are left
// alone, after-actions happen on the server, a file still being written is
// taken whole, and two processes polling one server ingest each file once.
package remotetest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/adapters/remote"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/storage/sqlite"
)

// Deadline is how long a test waits for an outcome: generous, the box may
// be busy; tests never assert how fast.
const Deadline = 60 * time.Second

// Fixture is one adapter against one server, in an empty folder or
// prefix of its own.
type Fixture struct {
	// Kind is the source kind; Config its config, with an arrival rule
	// whose window is short (MinAgeMS 200 or so).
	Kind   string
	Config json.RawMessage
	// New builds the adapter of a source record.
	New func(src *engine.SourceRecord, taker *engine.Taker, log *slog.Logger) (*remote.Poller, error)
	// Put stores an object (key relative to the folder or prefix).
	Put func(t *testing.T, key string, data []byte)
	// Exists reports whether an object is on the server.
	Exists func(t *testing.T, key string) bool
}

// Harness is a fixture with a fresh store and a source in it.
type Harness struct {
	T     *testing.T
	F     *Fixture
	Store *sqlite.Store
	Taker *engine.Taker
	Src   *engine.SourceRecord
	// Log is where the pollers and the taker log (checked for secrets).
	Log *SyncBuffer
	log *slog.Logger
}

// SyncBuffer is a log sink safe for concurrent writers.
type SyncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

// String is what was written.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b)
}

// NewHarness opens a store in a temporary folder and adds the fixture's
// source with the after-action.
func NewHarness(t *testing.T, f *Fixture, after string) *Harness {
	t.Helper()
	base := t.TempDir()
	s, err := sqlite.Open(t.Context(), filepath.Join(base, "data", "sluice.db"), sqlite.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	ing, err := engine.NewIngester(engine.IngesterConfig{Store: s})
	require.NoError(t, err)
	src, err := s.CreateSource(t.Context(), &engine.SourceRecord{Name: "remote", Kind: f.Kind, Config: f.Config,
		Pipeline: engine.DefaultPipeline, After: after, Poll: 200 * time.Millisecond, Enabled: true}, time.Now())
	require.NoError(t, err)
	buf := &SyncBuffer{}
	log := slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return &Harness{T: t, F: f, Store: s, Src: src, Log: buf, log: log,
		Taker: &engine.Taker{Store: s, Ingester: ing, Log: log, TempDir: filepath.Join(base, "data", "tmp", "sources"), RecoverAfter: time.Minute}}
}

// Poller builds a fresh adapter (as a new process would).
func (h *Harness) Poller() *remote.Poller {
	h.T.Helper()
	p, err := h.F.New(h.Src, h.Taker, h.log)
	require.NoError(h.T, err)
	p.MinBackoff = 50 * time.Millisecond
	return p
}

// Start runs a fresh poller until the returned stop (or the test's end).
func (h *Harness) Start() (stop func()) {
	ctx, cancel := context.WithCancel(h.T.Context())
	p := h.Poller()
	var wg sync.WaitGroup
	wg.Go(func() { assert.NoError(h.T, p.Run(ctx)) })
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	h.T.Cleanup(stop)
	return stop
}

// CSV returns a CSV file of n rows.
func CSV(n int) []byte {
	b := []byte("sku,name\n")
	for i := range n {
		b = fmt.Appendf(b, "A%d,item %d\n", i, i)
	}
	return b
}

// Jobs lists every job.
func (h *Harness) Jobs() []*engine.Job {
	h.T.Helper()
	js, err := h.Store.ListJobs(h.T.Context(), &engine.ListJobsParams{Limit: 100000})
	require.NoError(h.T, err)
	return js
}

// WaitJobs waits until there are n jobs and no object is being taken, and
// returns the jobs.
func (h *Harness) WaitJobs(n int) []*engine.Job {
	h.T.Helper()
	var js []*engine.Job
	require.Eventually(h.T, func() bool {
		// Every job complete, then no object being taken (one that is
		// claimed after the jobs were listed is seen here).
		js = h.Jobs()
		if len(js) < n {
			return false
		}
		for _, j := range js {
			if j.State == engine.JobIngesting {
				return false
			}
		}
		objs, err := h.Store.ListSourceObjects(h.T.Context(), &engine.ListSourceObjectsParams{Source: h.Src.Name,
			States: []engine.SourceObjectState{engine.ObjectSeen, engine.ObjectIngesting}})
		require.NoError(h.T, err)
		return len(objs) == 0
	}, Deadline, 20*time.Millisecond, "want %d jobs", n)
	require.Len(h.T, js, n, "no file ingested twice")
	return js
}

// Source returns the stored source (its last error, counts).
func (h *Harness) Source() *engine.SourceRecord {
	h.T.Helper()
	s, err := h.Store.GetSource(h.T.Context(), h.Src.Name)
	require.NoError(h.T, err)
	return s
}

// byName maps jobs by their name.
func byName(js []*engine.Job) map[string]*engine.Job {
	m := map[string]*engine.Job{}
	for _, j := range js {
		m[j.Name] = j
	}
	return m
}

// Run runs the suite; fixture makes a fresh fixture (its own folder or
// prefix on the server) per test.
func Run(t *testing.T, fixture func(t *testing.T) *Fixture) {
	t.Run("FilesBecomeOneJobEachAndMove", func(t *testing.T) {
		t.Parallel()
		h := NewHarness(t, fixture(t), engine.AfterMove)
		h.F.Put(t, "orders.csv", CSV(3))
		h.F.Put(t, "a b é ü.csv", CSV(2))
		h.F.Put(t, "broken.csv", []byte("a,b\n\"unterminated\n"))
		h.Start()
		js := byName(h.WaitJobs(3))
		require.Contains(t, js, "orders.csv")
		require.Contains(t, js, "a b é ü.csv")
		require.EqualValues(t, 3, js["orders.csv"].TotalItems)
		require.EqualValues(t, 2, js["a b é ü.csv"].TotalItems)
		// On S3 a move is a copy, then a delete of the original: wait for
		// both halves.
		require.Eventually(t, func() bool {
			return h.F.Exists(t, "done/orders.csv") && h.F.Exists(t, "done/a b é ü.csv") && h.F.Exists(t, "failed/broken.csv") &&
				!h.F.Exists(t, "orders.csv") && !h.F.Exists(t, "a b é ü.csv") && !h.F.Exists(t, "broken.csv")
		}, Deadline, 20*time.Millisecond, "moved to done/ and failed/")
		src := h.Source()
		require.EqualValues(t, 2, src.Ingested)
		require.EqualValues(t, 1, src.Failed)
		require.NotNil(t, src.LastPollAt)
		require.Empty(t, src.LastError)
		// A file dropped while it runs is taken too.
		h.F.Put(t, "later.csv", CSV(1))
		h.WaitJobs(4)
	})

	t.Run("PartialNamesAreLeftAlone", func(t *testing.T) {
		t.Parallel()
		h := NewHarness(t, fixture(t), engine.AfterLeave)
		for _, k := range []string{"a.csv.part", "b.tmp", ".hidden.csv", "~$c.xlsx", "d.crdownload"} {
			h.F.Put(t, k, CSV(1))
		}
		h.F.Put(t, "real.csv", CSV(1))
		res, err := h.Poller().Scan(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, res.Seen)
		require.Equal(t, 1, res.Ingested)
		require.Len(t, h.Jobs(), 1)
		require.True(t, h.F.Exists(t, "a.csv.part"))
	})

	t.Run("LeaveIsIngestedOnceAcrossScansAndProcesses", func(t *testing.T) {
		t.Parallel()
		h := NewHarness(t, fixture(t), engine.AfterLeave)
		for i := range 5 {
			h.F.Put(t, fmt.Sprintf("f%d.csv", i), CSV(2))
		}
		// Two processes poll the same server at once.
		h.Start()
		h.Start()
		h.WaitJobs(5)
		for range 2 {
			res, err := h.Poller().Scan(t.Context())
			require.NoError(t, err)
			require.Zero(t, res.Ingested)
		}
		require.Len(t, h.Jobs(), 5)
		require.True(t, h.F.Exists(t, "f0.csv"), "left on the server")
	})

	t.Run("DeleteRemovesIngestedFiles", func(t *testing.T) {
		t.Parallel()
		h := NewHarness(t, fixture(t), engine.AfterDelete)
		h.F.Put(t, "gone.csv", CSV(1))
		res, err := h.Poller().Scan(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, res.Ingested)
		require.False(t, h.F.Exists(t, "gone.csv"))
		require.False(t, h.F.Exists(t, "done/gone.csv"))
	})

	t.Run("FileStillBeingWrittenIsTakenWhole", func(t *testing.T) {
		t.Parallel()
		h := NewHarness(t, fixture(t), engine.AfterLeave)
		h.Start()
		h.F.Put(t, "growing.csv", CSV(1))
		// It grows within the stability window: the first version must
		// not become a job.
		time.Sleep(50 * time.Millisecond)
		h.F.Put(t, "growing.csv", CSV(40))
		js := h.WaitJobs(1)
		require.EqualValues(t, 40, js[0].TotalItems)
	})

	t.Run("SecretsAreNotLogged", func(t *testing.T) {
		t.Parallel()
		h := NewHarness(t, fixture(t), engine.AfterLeave)
		h.F.Put(t, "x.csv", CSV(1))
		_, err := h.Poller().Scan(t.Context())
		require.NoError(t, err)
		require.Len(t, h.Jobs(), 1)
		raw, err := json.Marshal(h.Source())
		require.NoError(t, err)
		for _, v := range secretsIn(t) {
			require.NotContains(t, h.Log.String(), v)
			require.NotContains(t, string(raw), v)
		}
		require.Contains(t, h.Log.String(), "source object ingested", "the log is captured")
	})
}

// Secrets are the secret values tests put in the environment; a fixture
// names them in its config and registers them here.
var secrets sync.Map

// SetSecret sets an environment variable to a secret value for the test
// and remembers the value (never to be logged or stored).
func SetSecret(t *testing.T, name, value string) {
	t.Helper()
	require.NoError(t, os.Setenv(name, value))
	secrets.Store(value, true)
}

func secretsIn(t *testing.T) []string {
	var out []string
	secrets.Range(func(k, _ any) bool { out = append(out, k.(string)); return true })
	require.NotEmpty(t, out, "the fixture names a secret")
	return out
}

// RealServer returns the environment variables a test of a real server
// needs (the first is its address). When one is missing the test is
// skipped, or fails under SLUICE_CI (where .ci/run starts the server).
func RealServer(t *testing.T, what string, names ...string) []string {
	t.Helper()
	vals := make([]string, len(names))
	for i, n := range names {
		vals[i] = os.Getenv(n)
		if vals[i] != "" {
			continue
		}
		if os.Getenv("SLUICE_CI") != "" {
			t.Fatalf("%s is not set: .ci/run starts %s and sets it", n, what)
		}
		t.Skipf("%s is not set: no %s to test against (.ci/run starts one)", n, what)
	}
	return vals
}
