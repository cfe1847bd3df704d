package storetest

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// sourceTests cover the sources and the ledger of their objects.
var sourceTests = []subtest{
	{"CreateGetList", testSourceCreateGetList},
	{"CreateInvalid", testSourceCreateInvalid},
	{"Delete", testSourceDelete},
	{"Poll", testSourcePoll},
	{"ClaimOnce", testObjectClaimOnce},
	{"ClaimConcurrent", testObjectClaimConcurrent},
	{"Finish", testObjectFinish},
	{"Changed", testObjectChanged},
	{"ChangedReingest", testObjectChangedReingest},
	{"Recover", testObjectRecover},
	{"List", testObjectList},
}

// addSource creates a folder source on the default pipeline.
func (e *env) addSource(name string) *engine.SourceRecord {
	e.t.Helper()
	src, err := e.s.CreateSource(e.ctx, &engine.SourceRecord{
		Name: name, Kind: engine.SourceFolder, Config: json.RawMessage(`{"path":"in"}`),
		Pipeline: engine.DefaultPipeline, After: engine.AfterMove, Poll: 10 * time.Second, Enabled: true,
	}, e.now())
	require.NoError(e.t, err, "CreateSource")
	return src
}

// claimObj claims key at size 10 with mtime base.
func (e *env) claimObj(source, key string, size int64, reingest bool) (*engine.SourceObject, bool) {
	e.t.Helper()
	o, ok, err := e.s.ClaimSourceObject(e.ctx, &engine.ClaimSourceObjectParams{
		Source: source, Key: key, Size: size, MTime: base.Add(-time.Minute), Reingest: reingest, Now: e.now(),
	})
	require.NoError(e.t, err, "ClaimSourceObject")
	require.NotNil(e.t, o)
	return o, ok
}

func (e *env) finishObj(id int64, st engine.SourceObjectState, jobID int64) *engine.SourceObject {
	e.t.Helper()
	o, err := e.s.FinishSourceObject(e.ctx, &engine.FinishSourceObjectParams{ID: id, State: st, JobID: jobID, SHA256: "abc", Now: e.now()})
	require.NoError(e.t, err, "FinishSourceObject")
	return o
}

func testSourceCreateGetList(t *testing.T, e *env) {
	got, err := e.s.ListSources(e.ctx)
	require.NoError(t, err)
	require.Empty(t, got)
	b := e.addSource("b")
	require.Equal(t, "b", b.Name)
	require.Equal(t, engine.SourceFolder, b.Kind)
	require.JSONEq(t, `{"path":"in"}`, string(b.Config))
	require.Equal(t, engine.AfterMove, b.After)
	require.Equal(t, 10*time.Second, b.Poll)
	require.True(t, b.Enabled)
	require.Nil(t, b.LastPollAt)
	requireTime(t, e.now(), b.CreatedAt)
	e.addSource("a")
	got, err = e.s.ListSources(e.ctx)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "a", got[0].Name, "ordered by name")
	_, err = e.s.CreateSource(e.ctx, &engine.SourceRecord{Name: "a", Kind: engine.SourceFolder, Pipeline: "p"}, e.now())
	requireConflict(t, err, "a taken name")
	_, err = e.s.GetSource(e.ctx, "nope")
	requireNotFound(t, err)
}

func testSourceCreateInvalid(t *testing.T, e *env) {
	for _, src := range []*engine.SourceRecord{
		{Kind: engine.SourceFolder, Pipeline: "p"},
		{Name: "x", Pipeline: "p"},
		{Name: "x", Kind: engine.SourceFolder},
		{Name: "x", Kind: engine.SourceFolder, Pipeline: "p", After: "burn"},
		{Name: "x", Kind: engine.SourceFolder, Pipeline: "p", Config: json.RawMessage(`{`)},
	} {
		_, err := e.s.CreateSource(e.ctx, src, e.now())
		require.Equal(t, engine.EINVALID, engine.ErrorCode(err), "%+v: %v", src, err)
	}
}

func testSourceDelete(t *testing.T, e *env) {
	e.addSource("a")
	e.claimObj("a", "x.csv", 10, false)
	require.NoError(t, e.s.DeleteSource(e.ctx, "a"))
	_, err := e.s.GetSource(e.ctx, "a")
	requireNotFound(t, err)
	objs, err := e.s.ListSourceObjects(e.ctx, &engine.ListSourceObjectsParams{Source: "a"})
	require.NoError(t, err)
	require.Empty(t, objs, "the ledger goes with the source")
	requireNotFound(t, e.s.DeleteSource(e.ctx, "a"))
}

func testSourcePoll(t *testing.T, e *env) {
	e.addSource("a")
	t1 := e.advance(time.Second)
	require.NoError(t, e.s.RecordSourcePoll(e.ctx, "a", "folder is gone", t1))
	src, err := e.s.GetSource(e.ctx, "a")
	require.NoError(t, err)
	requireTimePtr(t, t1, src.LastPollAt)
	require.Equal(t, "folder is gone", src.LastError)
	t2 := e.advance(time.Second)
	require.NoError(t, e.s.RecordSourcePoll(e.ctx, "a", "", t2))
	src, err = e.s.GetSource(e.ctx, "a")
	require.NoError(t, err)
	requireTimePtr(t, t2, src.LastPollAt)
	require.Empty(t, src.LastError, "a good look clears the error")
	requireNotFound(t, e.s.RecordSourcePoll(e.ctx, "nope", "", t2))
}

func testObjectClaimOnce(t *testing.T, e *env) {
	e.addSource("a")
	o, ok := e.claimObj("a", "dir/x y.csv", 10, false)
	require.True(t, ok)
	require.Equal(t, engine.ObjectIngesting, o.State)
	require.Equal(t, "dir/x y.csv", o.Key)
	require.EqualValues(t, 10, o.Size)
	requireTime(t, base.Add(-time.Minute), o.MTime)
	require.Equal(t, 1, o.Attempts)
	for range 3 {
		again, ok := e.claimObj("a", "dir/x y.csv", 10, true)
		require.False(t, ok, "an object in flight is not claimed again")
		require.Equal(t, o.ID, again.ID)
	}
	e.finishObj(o.ID, engine.ObjectDone, 0)
	_, ok = e.claimObj("a", "dir/x y.csv", 10, true)
	require.False(t, ok, "the same version is never ingested twice, even with Reingest")
	_, ok = e.claimObj("b", "dir/x y.csv", 10, false)
	require.True(t, ok, "another source's key is another object")
}

func testObjectClaimConcurrent(t *testing.T, e *env) {
	e.addSource("a")
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 8 {
		wg.Go(func() {
			_, ok, err := e.s.ClaimSourceObject(e.ctx, &engine.ClaimSourceObjectParams{
				Source: "a", Key: "k", Size: 1, MTime: base, Now: base,
			})
			if err != nil {
				t.Error(err)
				return
			}
			if ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, 1, wins, "exactly one claim wins")
}

func testObjectFinish(t *testing.T, e *env) {
	e.addSource("a")
	j := e.queuedJob(1)
	o, _ := e.claimObj("a", "x.csv", 10, false)
	e.advance(time.Second)
	done := e.finishObj(o.ID, engine.ObjectDone, j.ID)
	require.Equal(t, engine.ObjectDone, done.State)
	require.Equal(t, j.ID, done.JobID)
	require.Equal(t, "abc", done.SHA256)
	requireTime(t, e.now(), done.UpdatedAt)
	_, err := e.s.FinishSourceObject(e.ctx, &engine.FinishSourceObjectParams{ID: o.ID, State: engine.ObjectFailed, Now: e.now()})
	requireConflict(t, err, "only an INGESTING object finishes")
	_, err = e.s.FinishSourceObject(e.ctx, &engine.FinishSourceObjectParams{ID: o.ID, State: engine.ObjectSeen, Now: e.now()})
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
	_, err = e.s.FinishSourceObject(e.ctx, &engine.FinishSourceObjectParams{ID: 999, State: engine.ObjectDone, Now: e.now()})
	requireNotFound(t, err)

	f, _ := e.claimObj("a", "bad.csv", 10, false)
	failed, err := e.s.FinishSourceObject(e.ctx, &engine.FinishSourceObjectParams{ID: f.ID, State: engine.ObjectFailed, Error: "not CSV", Now: e.now()})
	require.NoError(t, err)
	require.Equal(t, "not CSV", failed.Error)
	_, ok := e.claimObj("a", "bad.csv", 10, false)
	require.False(t, ok, "a failed version is not retried as it stands")
	src, err := e.s.GetSource(e.ctx, "a")
	require.NoError(t, err)
	require.EqualValues(t, 1, src.Ingested)
	require.EqualValues(t, 1, src.Failed)
}

func testObjectChanged(t *testing.T, e *env) {
	e.addSource("a")
	o, _ := e.claimObj("a", "x.csv", 10, false)
	_, ok := e.claimObj("a", "x.csv", 11, false)
	require.False(t, ok, "no new version while one is in flight")
	e.finishObj(o.ID, engine.ObjectDone, 0)
	again, ok := e.claimObj("a", "x.csv", 11, false)
	require.False(t, ok, "a changed DONE object is left alone unless the source says so")
	require.Equal(t, o.ID, again.ID)

	f, _ := e.claimObj("a", "y.csv", 10, false)
	e.finishObj(f.ID, engine.ObjectFailed, 0)
	fixed, ok := e.claimObj("a", "y.csv", 12, false)
	require.True(t, ok, "a failed object that changed is tried again")
	require.NotEqual(t, f.ID, fixed.ID)
}

func testObjectChangedReingest(t *testing.T, e *env) {
	e.addSource("a")
	o, _ := e.claimObj("a", "x.csv", 10, true)
	e.finishObj(o.ID, engine.ObjectDone, 0)
	v2, ok := e.claimObj("a", "x.csv", 11, true)
	require.True(t, ok, "with Reingest a changed object is a new job")
	require.NotEqual(t, o.ID, v2.ID)
	e.finishObj(v2.ID, engine.ObjectDone, 0)
	v1, ok := e.claimObj("a", "x.csv", 10, true)
	require.True(t, ok, "changed back is changed too")
	require.NotEqual(t, o.ID, v1.ID, "a new row: ids are never reused")
}

func testObjectRecover(t *testing.T, e *env) {
	e.addSource("a")
	noJob, _ := e.claimObj("a", "none.csv", 1, false)
	queued, _ := e.claimObj("a", "queued.csv", 1, false)
	failed, _ := e.claimObj("a", "failed.csv", 1, false)
	ingesting, _ := e.claimObj("a", "ingesting.csv", 1, false)
	ref := func(id int64) jobOpt {
		return func(p *engine.CreateJobParams) { p.Source, p.SourceRef = engine.JobSource, engine.SourceObjectRef(id) }
	}
	qj := e.queuedJob(2, ref(queued.ID))
	fj := e.createJob(ref(failed.ID))
	_, err := e.s.FailJob(e.ctx, &engine.FailJobParams{JobID: fj.ID, Reason: "interrupted", Now: e.now()})
	require.NoError(t, err)
	e.createJob(ref(ingesting.ID))

	n, err := e.s.RecoverSourceObjects(e.ctx, &engine.RecoverSourceObjectsParams{Source: "a", Before: e.now(), Now: e.now()})
	require.NoError(t, err)
	require.Zero(t, n, "claims newer than Before are left alone (their process may be writing)")

	e.advance(time.Minute)
	late, _ := e.claimObj("a", "late.csv", 1, false)
	n, err = e.s.RecoverSourceObjects(e.ctx, &engine.RecoverSourceObjectsParams{Source: "a", Before: e.now(), Now: e.now()})
	require.NoError(t, err)
	require.Equal(t, 3, n)
	get := func(id int64) *engine.SourceObject {
		objs, err := e.s.ListSourceObjects(e.ctx, &engine.ListSourceObjectsParams{Source: "a"})
		require.NoError(t, err)
		for _, o := range objs {
			if o.ID == id {
				return o
			}
		}
		t.Fatalf("object %d missing", id)
		return nil
	}
	require.Equal(t, engine.ObjectSeen, get(noJob.ID).State, "no job: given back")
	require.Equal(t, engine.ObjectDone, get(queued.ID).State, "its job got through: done, not ingested again")
	require.Equal(t, qj.ID, get(queued.ID).JobID)
	require.Equal(t, engine.ObjectSeen, get(failed.ID).State, "its job failed: given back")
	require.Equal(t, engine.ObjectIngesting, get(ingesting.ID).State, "its job is still being written")
	require.Equal(t, engine.ObjectIngesting, get(late.ID).State)

	o, ok := e.claimObj("a", "none.csv", 1, false)
	require.True(t, ok, "a given-back object is claimed again")
	require.Equal(t, noJob.ID, o.ID)
	require.Equal(t, 2, o.Attempts)
	_, ok = e.claimObj("a", "queued.csv", 1, false)
	require.False(t, ok)
	changed, ok := e.claimObj("a", "failed.csv", 5, false)
	require.True(t, ok, "a given-back object that changed meanwhile is claimed as it is now")
	require.Equal(t, failed.ID, changed.ID)
	require.EqualValues(t, 5, changed.Size)
	src, err := e.s.GetSource(e.ctx, "a")
	require.NoError(t, err)
	require.EqualValues(t, 1, src.Ingested, "a recovered DONE counts")
}

func testObjectList(t *testing.T, e *env) {
	e.addSource("a")
	a, _ := e.claimObj("a", "a.csv", 1, false)
	b, _ := e.claimObj("a", "b.csv", 1, false)
	e.finishObj(a.ID, engine.ObjectDone, 0)
	all, err := e.s.ListSourceObjects(e.ctx, &engine.ListSourceObjectsParams{Source: "a"})
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, b.ID, all[0].ID, "newest first")
	ing, err := e.s.ListSourceObjects(e.ctx, &engine.ListSourceObjectsParams{Source: "a", States: []engine.SourceObjectState{engine.ObjectIngesting}})
	require.NoError(t, err)
	require.Len(t, ing, 1)
	require.Equal(t, b.ID, ing[0].ID)
	one, err := e.s.ListSourceObjects(e.ctx, &engine.ListSourceObjectsParams{Source: "a", Limit: 1})
	require.NoError(t, err)
	require.Len(t, one, 1)
}
