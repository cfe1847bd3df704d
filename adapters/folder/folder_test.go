package folder_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/adapters/folder"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/storage/sqlite"
)

// deadline is how long a test waits for an outcome: generous, the box may
// be busy; tests never assert how fast.
const deadline = 60 * time.Second

type harness struct {
	t     *testing.T
	dir   string
	store *sqlite.Store
	taker *engine.Taker
	src   *engine.SourceRecord
}

type opts struct {
	after     string
	recursive bool
	ignore    []string
	reingest  bool
	// minAgeMS is the stability window (100 ms when 0).
	minAgeMS int64
}

func newHarness(t *testing.T, o opts) *harness {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "in box")
	require.NoError(t, os.Mkdir(dir, 0o755))
	s, err := sqlite.Open(t.Context(), filepath.Join(base, "data", "sluice.db"), sqlite.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	ing, err := engine.NewIngester(engine.IngesterConfig{Store: s})
	require.NoError(t, err)
	if o.after == "" {
		o.after = engine.AfterMove
	}
	if o.minAgeMS == 0 {
		o.minAgeMS = 100
	}
	cfg, err := json.Marshal(folder.Config{Path: dir, Recursive: o.recursive,
		ArrivalRule: engine.ArrivalRule{MinAgeMS: o.minAgeMS, Ignore: o.ignore, ReingestChanged: o.reingest}})
	require.NoError(t, err)
	src, err := s.CreateSource(t.Context(), &engine.SourceRecord{Name: "drop", Kind: engine.SourceFolder, Config: cfg,
		Pipeline: engine.DefaultPipeline, After: o.after, Poll: time.Second, Enabled: true}, time.Now())
	require.NoError(t, err)
	return &harness{t: t, dir: dir, store: s, src: src,
		taker: &engine.Taker{Store: s, Ingester: ing, TempDir: filepath.Join(base, "data", "tmp"), RecoverAfter: time.Millisecond}}
}

func (h *harness) folder() *folder.Folder {
	h.t.Helper()
	f, err := folder.New(h.src, h.taker, nil)
	require.NoError(h.t, err)
	return f
}

// start runs a fresh Folder until the returned stop is called.
func (h *harness) start() (stop func()) {
	ctx, cancel := context.WithCancel(h.t.Context())
	f := h.folder()
	var wg sync.WaitGroup
	wg.Go(func() { assert.NoError(h.t, f.Run(ctx)) })
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	h.t.Cleanup(stop)
	return stop
}

// write creates a CSV file with n rows atomically enough for a test
// (the arrival rule copes with slow writers; see TestStillBeingWritten).
func (h *harness) write(rel string, n int) string {
	h.t.Helper()
	p := filepath.Join(h.dir, filepath.FromSlash(rel))
	require.NoError(h.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(h.t, os.WriteFile(p, csvRows(n), 0o644))
	return p
}

func csvRows(n int) []byte {
	b := []byte("sku,name\n")
	for i := range n {
		b = fmt.Appendf(b, "A%d,item %d\n", i, i)
	}
	return b
}

func (h *harness) jobs() []*engine.Job {
	h.t.Helper()
	js, err := h.store.ListJobs(h.t.Context(), &engine.ListJobsParams{Limit: 100000})
	require.NoError(h.t, err)
	return js
}

// waitJobs waits until there are n jobs, every object is finished, and
// returns the jobs.
func (h *harness) waitJobs(n int) []*engine.Job {
	h.t.Helper()
	var js []*engine.Job
	require.Eventually(h.t, func() bool {
		js = h.jobs()
		if len(js) < n {
			return false
		}
		objs, err := h.store.ListSourceObjects(h.t.Context(), &engine.ListSourceObjectsParams{Source: "drop",
			States: []engine.SourceObjectState{engine.ObjectSeen, engine.ObjectIngesting}})
		require.NoError(h.t, err)
		return len(objs) == 0
	}, deadline, 20*time.Millisecond, "want %d jobs", n)
	require.Len(h.t, js, n, "no file ingested twice")
	return js
}

// settle runs one more full scan and checks that nothing new came of it.
func (h *harness) settle(n int) {
	h.t.Helper()
	_, err := h.folder().Scan(h.t.Context())
	require.NoError(h.t, err)
	require.Len(h.t, h.jobs(), n)
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

func TestDroppedFileBecomesOneJob(t *testing.T) {
	h := newHarness(t, opts{after: engine.AfterLeave})
	stop := h.start()
	p := h.write("products.csv", 3)
	js := h.waitJobs(1)
	j := js[0]
	require.Equal(t, "products.csv", j.Name)
	require.Equal(t, engine.JobSource, j.Source)
	require.EqualValues(t, 3, j.Counts.Total())

	// Repeated events for the same version: nothing new.
	for range 5 {
		require.NoError(t, os.Chmod(p, 0o600))
		require.NoError(t, os.Chmod(p, 0o644))
	}
	objs, err := h.store.ListSourceObjects(t.Context(), &engine.ListSourceObjectsParams{Source: "drop"})
	require.NoError(t, err)
	require.Len(t, objs, 1)
	require.Equal(t, engine.ObjectDone, objs[0].State)
	require.Equal(t, j.ID, objs[0].JobID)
	require.Len(t, objs[0].SHA256, 64)
	h.settle(1)

	// A restart (a new process) sees the file again: not ingested again.
	stop()
	h.start()
	h.write("second.csv", 1)
	h.waitJobs(2)
	h.settle(2)
	src, err := h.store.GetSource(t.Context(), "drop")
	require.NoError(t, err)
	require.EqualValues(t, 2, src.Ingested)
	require.NotNil(t, src.LastPollAt)
	require.Empty(t, src.LastError)
}

func TestChangedFile(t *testing.T) {
	for _, reingest := range []bool{false, true} {
		t.Run(fmt.Sprint("reingest=", reingest), func(t *testing.T) {
			h := newHarness(t, opts{after: engine.AfterLeave, reingest: reingest})
			h.start()
			p := h.write("a.csv", 1)
			h.waitJobs(1)
			require.NoError(t, os.WriteFile(p, csvRows(2), 0o644))
			later := time.Now().Add(time.Hour)
			require.NoError(t, os.Chtimes(p, later, later.Add(-2*time.Hour)))
			if reingest {
				h.waitJobs(2)
				h.settle(2)
				return
			}
			h.settle(1)
		})
	}
}

func TestCrashBetweenIngestAndLedger(t *testing.T) {
	h := newHarness(t, opts{after: engine.AfterMove})
	ctx := t.Context()
	// A previous process claimed two files and died: one after its job
	// was stored (but before the ledger said so), one before any job.
	ingested := h.write("ingested.csv", 2)
	h.write("claimed.csv", 2)
	claim := func(p string) *engine.SourceObject {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		o, ok, err := h.store.ClaimSourceObject(ctx, &engine.ClaimSourceObjectParams{Source: "drop",
			Key: filepath.Base(p), Size: fi.Size(), MTime: fi.ModTime(), Now: time.Now().Add(-time.Hour)})
		require.NoError(t, err)
		require.True(t, ok)
		return o
	}
	o := claim(ingested)
	f, err := os.Open(ingested)
	require.NoError(t, err)
	_, err = h.taker.Ingester.IngestCSV(ctx, engine.IngestRequest{Name: "ingested.csv", Source: engine.JobSource,
		SourceRef: engine.SourceObjectRef(o.ID), Input: f})
	f.Close()
	require.NoError(t, err)
	claim(filepath.Join(h.dir, "claimed.csv"))

	h.start()
	js := h.waitJobs(2)
	require.Eventually(t, func() bool {
		return exists(filepath.Join(h.dir, "done", "ingested.csv")) && exists(filepath.Join(h.dir, "done", "claimed.csv"))
	}, deadline, 20*time.Millisecond)
	names := map[string]int{}
	for _, j := range js {
		names[j.Name]++
	}
	require.Equal(t, map[string]int{"ingested.csv": 1, "claimed.csv": 1}, names)
}

func TestStillBeingWritten(t *testing.T) {
	// The writer pauses 40 ms between writes; a window of 1 s keeps a
	// loaded machine's late wake-ups from looking like a finished file
	// (a writer silent for longer than the window does look finished).
	h := newHarness(t, opts{after: engine.AfterLeave, minAgeMS: 1000})
	h.start()
	p := filepath.Join(h.dir, "slow.csv")
	w, err := os.Create(p)
	require.NoError(t, err)
	const chunks = 30
	_, err = w.WriteString("sku,name\n")
	require.NoError(t, err)
	for i := range chunks {
		_, err = fmt.Fprintf(w, "A%d,item %d\n", i, i)
		require.NoError(t, err)
		time.Sleep(40 * time.Millisecond) // a writer at its own pace
	}
	require.Empty(t, h.jobs(), "nothing taken while the file grows")
	require.NoError(t, w.Close())
	js := h.waitJobs(1)
	require.EqualValues(t, chunks, js[0].Counts.Total(), "the whole file, not a part of it")
}

func TestPartialNamesIgnored(t *testing.T) {
	h := newHarness(t, opts{after: engine.AfterLeave, ignore: []string{"*.skip", "drafts/*"}, recursive: true})
	h.start()
	partial := []string{"a.csv.part", "b.partial", "c.tmp", "d.csv.crdownload", "~$e.csv", ".f.csv", "g.skip",
		"drafts/h.csv", ".hidden/i.csv"}
	for _, n := range partial {
		h.write(n, 1)
	}
	h.write("real.csv", 1)
	js := h.waitJobs(1)
	require.Equal(t, "real.csv", js[0].Name)
	h.settle(1)
	for _, n := range partial {
		require.True(t, exists(filepath.Join(h.dir, n)), n)
	}
}

func TestNamesWithSpacesAndUnicode(t *testing.T) {
	h := newHarness(t, opts{after: engine.AfterMove, recursive: true})
	h.start()
	names := []string{"my file.csv", "prix ète ü.csv", "日本 データ.csv", "sub dir/inner é.csv"}
	for _, n := range names {
		h.write(n, 2)
	}
	js := h.waitJobs(len(names))
	got := map[string]bool{}
	for _, j := range js {
		got[j.Name] = true
	}
	for _, n := range names {
		require.True(t, got[filepath.Base(n)], n)
		require.Eventually(t, func() bool { return exists(filepath.Join(h.dir, "done", n)) }, deadline, 20*time.Millisecond, n)
	}
}

func TestAfterActions(t *testing.T) {
	for _, after := range []string{engine.AfterMove, engine.AfterDelete, engine.AfterLeave} {
		t.Run(after, func(t *testing.T) {
			h := newHarness(t, opts{after: after})
			h.start()
			good := h.write("good.csv", 2)
			bad := filepath.Join(h.dir, "bad.csv")
			require.NoError(t, os.WriteFile(bad, []byte("a,b\n\"x,y\n"), 0o644))
			js := h.waitJobs(2)
			states := map[string]engine.JobState{}
			for _, j := range js {
				states[j.Name] = j.State
			}
			require.Equal(t, engine.JobFailed, states["bad.csv"])
			require.NotEqual(t, engine.JobFailed, states["good.csv"])
			want := map[string]func() bool{
				engine.AfterMove: func() bool {
					return !exists(good) && exists(filepath.Join(h.dir, "done", "good.csv")) &&
						!exists(bad) && exists(filepath.Join(h.dir, "failed", "bad.csv"))
				},
				engine.AfterDelete: func() bool {
					return !exists(good) && !exists(filepath.Join(h.dir, "done")) &&
						!exists(bad) && exists(filepath.Join(h.dir, "failed", "bad.csv"))
				},
				engine.AfterLeave: func() bool { return exists(good) && exists(bad) },
			}[after]
			require.Eventually(t, want, deadline, 20*time.Millisecond)
			h.settle(2)
			src, err := h.store.GetSource(t.Context(), "drop")
			require.NoError(t, err)
			require.EqualValues(t, 1, src.Ingested)
			require.EqualValues(t, 1, src.Failed)
		})
	}
}

func TestSymlinkOutsideNotFollowed(t *testing.T) {
	h := newHarness(t, opts{after: engine.AfterMove, recursive: true})
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.csv"), csvRows(1), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.csv"), filepath.Join(h.dir, "link.csv")))
	require.NoError(t, os.Symlink(outside, filepath.Join(h.dir, "linked dir")))
	h.start()
	h.write("real.csv", 1)
	js := h.waitJobs(1)
	require.Equal(t, "real.csv", js[0].Name)
	h.settle(1)
	require.True(t, exists(filepath.Join(outside, "secret.csv")), "nothing outside is moved")
	require.True(t, exists(filepath.Join(h.dir, "link.csv")), "the link is left alone")
}

func TestThousandFilesAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 files")
	}
	h := newHarness(t, opts{after: engine.AfterMove})
	h.start()
	const n = 1000
	for i := range n {
		h.write(fmt.Sprintf("f%04d.csv", i), 2)
	}
	js := h.waitJobs(n)
	seen := map[string]bool{}
	for _, j := range js {
		require.False(t, seen[j.Name], "twice: %s", j.Name)
		seen[j.Name] = true
	}
	left, err := os.ReadDir(h.dir)
	require.NoError(t, err)
	require.Len(t, left, 1, "only done/ is left: %v", left)
	h.settle(n)
}

func TestMissingFolderIsASourceError(t *testing.T) {
	h := newHarness(t, opts{after: engine.AfterMove})
	require.NoError(t, os.Rename(h.dir, h.dir+" later"))
	h.start()
	lastError := func() string {
		src, err := h.store.GetSource(t.Context(), "drop")
		require.NoError(t, err)
		return src.LastError
	}
	require.Eventually(t, func() bool { return lastError() != "" }, deadline, 20*time.Millisecond)
	require.NoError(t, os.Rename(h.dir+" later", h.dir))
	h.write("a.csv", 1)
	h.waitJobs(1)
	require.Eventually(t, func() bool { return lastError() == "" }, deadline, 20*time.Millisecond, "cleared by a good look")
}

func TestFolderReplacedWhileWatched(t *testing.T) {
	h := newHarness(t, opts{after: engine.AfterMove})
	h.start()
	h.write("a.csv", 1)
	h.waitJobs(1)
	require.NoError(t, os.Rename(h.dir, h.dir+" old"))
	require.NoError(t, os.Mkdir(h.dir, 0o755))
	h.write("b.csv", 1)
	h.waitJobs(2)
	require.Eventually(t, func() bool { return exists(filepath.Join(h.dir, "done", "b.csv")) }, deadline, 20*time.Millisecond)
}
