package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// blobTests cover the BlobStore half of the contract.
var blobTests = []subtest{
	{"PutOpenStat", testBlobPutOpenStat},
	{"Seek", testBlobSeek},
	{"Empty", testBlobEmpty},
	{"Replace", testBlobReplace},
	{"FailedBodyLeavesNothing", testBlobFailedBody},
	{"Delete", testBlobDelete},
	{"DeletedWithJob", testBlobDeletedWithJob},
	{"DeletedWithFailedJob", testBlobDeletedWithFailedJob},
	{"PruneHalfWritten", testBlobPruneHalfWritten},
}

// blobBody returns n pseudo-random bytes (seeded, so a failure reproduces).
func blobBody(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// putBlob stores body under key for job (0 = none) and returns the record.
func (e *env) putBlob(key string, job int64, body []byte) *engine.Blob {
	e.t.Helper()
	b, err := e.s.PutBlob(e.ctx, &engine.PutBlobParams{Key: key, JobID: job, MediaType: "image/jpeg",
		Body: bytes.NewReader(body), Now: e.now()})
	require.NoError(e.t, err, "PutBlob %s", key)
	return b
}

// readBlob reads the whole blob under key.
func (e *env) readBlob(key string) []byte {
	e.t.Helper()
	r, err := e.s.OpenBlob(e.ctx, key)
	require.NoError(e.t, err, "OpenBlob %s", key)
	defer r.Close()
	b, err := io.ReadAll(r)
	require.NoError(e.t, err, "read blob %s", key)
	require.EqualValues(e.t, len(b), r.Size())
	return b
}

func (e *env) requireNoBlob(key string) {
	e.t.Helper()
	_, err := e.s.StatBlob(e.ctx, key)
	require.True(e.t, engine.IsNotFound(err), "StatBlob %s: want not found, got %v", key, err)
	_, err = e.s.OpenBlob(e.ctx, key)
	require.True(e.t, engine.IsNotFound(err), "OpenBlob %s: want not found, got %v", key, err)
}

// testBlobPutOpenStat: a blob of several chunks (not a multiple of the
// chunk size) reads back byte for byte, with its size and sha256.
func testBlobPutOpenStat(t *testing.T, e *env) {
	body := blobBody(2*engine.BlobChunkSize+12345, 1)
	b := e.putBlob("a/b.jpg", 0, body)
	sum := sha256.Sum256(body)
	require.Equal(t, hex.EncodeToString(sum[:]), b.SHA256)
	require.EqualValues(t, len(body), b.Size)

	st, err := e.s.StatBlob(e.ctx, "a/b.jpg")
	require.NoError(t, err)
	require.Equal(t, engine.Blob{Key: "a/b.jpg", Size: int64(len(body)), SHA256: b.SHA256, MediaType: "image/jpeg",
		CreatedAt: e.now()}, *st)
	require.Equal(t, body, e.readBlob("a/b.jpg"))
	e.requireNoBlob("a/other.jpg")

	_, err = e.s.PutBlob(e.ctx, &engine.PutBlobParams{Body: bytes.NewReader(body), Now: e.now()})
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err), "a blob without a key: %v", err)
}

// testBlobSeek: the reader seeks across chunk borders, as the image
// processor does (header, EXIF, then the whole file).
func testBlobSeek(t *testing.T, e *env) {
	body := blobBody(engine.BlobChunkSize+100, 2)
	e.putBlob("s", 0, body)
	r, err := e.s.OpenBlob(e.ctx, "s")
	require.NoError(t, err)
	defer r.Close()
	for _, off := range []int64{engine.BlobChunkSize - 3, 5, engine.BlobChunkSize + 90, 0} {
		pos, err := r.Seek(off, io.SeekStart)
		require.NoError(t, err)
		require.Equal(t, off, pos)
		got := make([]byte, 10)
		n, err := io.ReadFull(r, got)
		require.NoError(t, err, "read 10 bytes at %d", off)
		require.Equal(t, body[off:off+10], got[:n], "bytes at %d", off)
	}
	end, err := r.Seek(0, io.SeekEnd)
	require.NoError(t, err)
	require.EqualValues(t, len(body), end)
	n, err := r.Read(make([]byte, 1))
	require.Zero(t, n)
	require.Equal(t, io.EOF, err)
}

// testBlobEmpty: an empty body is a blob of size 0.
func testBlobEmpty(t *testing.T, e *env) {
	b := e.putBlob("empty", 0, nil)
	require.Zero(t, b.Size)
	require.Empty(t, e.readBlob("empty"))
}

// testBlobReplace: a second put of a key replaces the first.
func testBlobReplace(t *testing.T, e *env) {
	e.putBlob("k", 0, blobBody(engine.BlobChunkSize+1, 3))
	second := blobBody(1000, 4)
	e.putBlob("k", 0, second)
	require.Equal(t, second, e.readBlob("k"))
}

// failingReader yields n bytes, then an error.
type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("connection reset")
	}
	k := min(len(p), f.n)
	clear(p[:k])
	f.n -= k
	return k, nil
}

// testBlobFailedBody: a body that breaks off stores nothing and leaves an
// older blob of the key as it was.
func testBlobFailedBody(t *testing.T, e *env) {
	old := blobBody(500, 5)
	e.putBlob("k", 0, old)
	_, err := e.s.PutBlob(e.ctx, &engine.PutBlobParams{Key: "k", Body: &failingReader{n: engine.BlobChunkSize + 10}, Now: e.now()})
	require.ErrorContains(t, err, "connection reset")
	require.Equal(t, old, e.readBlob("k"))

	_, err = e.s.PutBlob(e.ctx, &engine.PutBlobParams{Key: "new", Body: &failingReader{n: 10}, Now: e.now()})
	require.Error(t, err)
	e.requireNoBlob("new")
}

// testBlobDelete: a deleted blob is gone; deleting a missing key is fine.
func testBlobDelete(t *testing.T, e *env) {
	e.putBlob("k", 0, blobBody(10, 6))
	e.putBlob("keep", 0, blobBody(10, 7))
	require.NoError(t, e.s.DeleteBlob(e.ctx, "k"))
	e.requireNoBlob("k")
	require.NoError(t, e.s.DeleteBlob(e.ctx, "k"))
	require.Len(t, e.readBlob("keep"), 10)
}

// testBlobDeletedWithJob: DeleteJob removes the job's blobs, not others'.
func testBlobDeletedWithJob(t *testing.T, e *env) {
	j := e.queuedJob(2)
	other := e.queuedJob(1)
	e.putBlob(engine.JobBlobKey(j.ID, "in/1.jpg"), j.ID, blobBody(engine.BlobChunkSize+5, 8))
	e.putBlob(engine.JobBlobKey(j.ID, "thumbs/x.jpg"), j.ID, blobBody(50, 9))
	e.putBlob(engine.JobBlobKey(other.ID, "in/1.jpg"), other.ID, blobBody(50, 10))
	e.putBlob("free", 0, blobBody(50, 11))
	st, err := e.s.StatBlob(e.ctx, engine.JobBlobKey(j.ID, "in/1.jpg"))
	require.NoError(t, err)
	require.Equal(t, j.ID, st.JobID)

	_, err = e.s.DeleteJob(e.ctx, j.ID)
	require.NoError(t, err)
	e.requireNoBlob(engine.JobBlobKey(j.ID, "in/1.jpg"))
	e.requireNoBlob(engine.JobBlobKey(j.ID, "thumbs/x.jpg"))
	require.Len(t, e.readBlob(engine.JobBlobKey(other.ID, "in/1.jpg")), 50)
	require.Len(t, e.readBlob("free"), 50)
}

// testBlobDeletedWithFailedJob: a failed ingest keeps none of its blobs.
func testBlobDeletedWithFailedJob(t *testing.T, e *env) {
	j := e.createJob()
	e.putBlob(engine.JobBlobKey(j.ID, "in/1.jpg"), j.ID, blobBody(50, 12))
	_, err := e.s.FailJob(e.ctx, &engine.FailJobParams{JobID: j.ID, Reason: "unreadable", Now: e.now()})
	require.NoError(t, err)
	e.requireNoBlob(engine.JobBlobKey(j.ID, "in/1.jpg"))
}

// pausingReader yields one chunk of zeros, then reports on paused that
// the chunk was handed over (the store has written it when it asks for
// more) and waits for resume before yielding the rest.
type pausingReader struct {
	first, rest int
	paused      chan struct{}
	resume      chan struct{}
}

func (r *pausingReader) Read(p []byte) (int, error) {
	if r.first == 0 && r.paused != nil {
		close(r.paused)
		r.paused = nil
		<-r.resume
	}
	n := &r.first
	if r.first == 0 {
		n = &r.rest
	}
	if *n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), *n)
	clear(p[:k])
	*n -= k
	return k, nil
}

// testBlobPruneHalfWritten: PruneBlobs removes a blob whose write began
// before the cutoff and is not finished, leaves finished blobs alone, and
// the writer that goes on afterwards gets ErrBlobGone, not a blob with its
// first chunk missing.
func testBlobPruneHalfWritten(t *testing.T, e *env) {
	done := blobBody(300, 9)
	e.putBlob("done", 0, done)
	r := &pausingReader{first: engine.BlobChunkSize, rest: 100, paused: make(chan struct{}), resume: make(chan struct{})}
	paused := r.paused
	started := e.now()
	errc := make(chan error, 1)
	go func() {
		_, err := e.s.PutBlob(e.ctx, &engine.PutBlobParams{Key: "k", Body: r, Now: started})
		errc <- err
	}()
	<-paused // chunk 0 is stored; the writer now waits for its body

	e.advance(time.Hour)
	n, err := e.s.PruneBlobs(e.ctx, &engine.PruneBlobsParams{Before: started})
	require.NoError(t, err)
	require.Zero(t, n, "a write that began at the cutoff is not pruned")
	n, err = e.s.PruneBlobs(e.ctx, &engine.PruneBlobsParams{Before: started.Add(time.Millisecond)})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	e.requireNoBlob("k")
	require.Equal(t, done, e.readBlob("done"), "a finished blob is never pruned")

	close(r.resume)
	require.ErrorIs(t, <-errc, engine.ErrBlobGone)
	e.requireNoBlob("k")
	n, err = e.s.PruneBlobs(e.ctx, &engine.PruneBlobsParams{Before: e.now()})
	require.NoError(t, err)
	require.Zero(t, n)

	body := blobBody(engine.BlobChunkSize+7, 10)
	e.putBlob("k", 0, body)
	require.Equal(t, body, e.readBlob("k"))
}
