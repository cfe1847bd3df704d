package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"
)

// BlobChunkSize is the size of every stored chunk of a blob but its last
// (1 MiB): a blob is written and read one chunk at a time, never whole.
const BlobChunkSize = 1 << 20

// BlobStore keeps files that every machine sharing a store must be able to
// read after ingest (images, uploaded originals, thumbnails) in the store
// itself, as numbered chunks. On SQLite it is the same table in the same
// file, so a single box behaves exactly as many machines on PostgreSQL do.
type BlobStore interface {
	// PutBlob streams p.Body into the store under p.Key, chunk by chunk,
	// and makes it visible only once every chunk is written; a blob
	// already stored under the key is replaced at that moment. It never
	// holds more than one chunk of the body in memory.
	PutBlob(ctx context.Context, p *PutBlobParams) (*Blob, error)
	// OpenBlob returns a reader of the blob's bytes (ErrNotFound when no
	// blob has the key). The reader fetches one chunk at a time and can
	// seek.
	OpenBlob(ctx context.Context, key string) (BlobReader, error)
	// StatBlob returns the blob's record or ErrNotFound.
	StatBlob(ctx context.Context, key string) (*Blob, error)
	// DeleteBlob removes a blob; a missing key is no error.
	DeleteBlob(ctx context.Context, key string) error
	// PruneBlobs removes the blobs left half-written (their writer died
	// or lost its connection before the blob became visible) whose write
	// began before p.Before, with their chunks, and returns how many. A
	// writer still running on a pruned blob gets an error from PutBlob,
	// never a blob with missing chunks.
	PruneBlobs(ctx context.Context, p *PruneBlobsParams) (int, error)
}

// PruneBlobsParams are the arguments of BlobStore.PruneBlobs.
type PruneBlobsParams struct {
	// Before: only blobs whose write began (PutBlobParams.Now) before it
	// are removed.
	Before time.Time
}

// ErrBlobGone is what PutBlob returns when its half-written blob was
// removed under it (by PruneBlobs, or with its job) before it could be
// made visible.
var ErrBlobGone = errors.New("the half-written blob was removed before it was complete (its job was deleted, or it was pruned as abandoned)")

// Blob is the record of a stored blob.
type Blob struct {
	Key string `json:"key"`
	// JobID is the job the blob belongs to (0 = none); DeleteJob removes
	// a job's blobs with it.
	JobID     int64     `json:"jobId,omitempty"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	MediaType string    `json:"mediaType,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// PutBlobParams are the arguments of BlobStore.PutBlob.
type PutBlobParams struct {
	Key       string
	JobID     int64
	MediaType string
	Body      io.Reader
	Now       time.Time
}

// BlobReader reads a stored blob; Size is its length in bytes.
type BlobReader interface {
	io.ReadSeekCloser
	Size() int64
}

// JobBlobKey is the key of a blob that belongs to a job: the job's files
// live under "jobs/<id>/".
func JobBlobKey(jobID int64, name string) string {
	return fmt.Sprintf("jobs/%d/%s", jobID, name)
}

// WriteChunks reads r to its end and calls put with each BlobChunkSize
// chunk in turn (numbered from 0; the buffer is reused, put must not keep
// it), returning the total size and the hex sha256. Stores use it to
// implement PutBlob. An empty body makes no chunk.
func WriteChunks(r io.Reader, put func(n int, chunk []byte) error) (size int64, sum string, err error) {
	h := sha256.New()
	buf := make([]byte, BlobChunkSize)
	for n := 0; ; n++ {
		k, rerr := io.ReadFull(r, buf)
		if k > 0 {
			h.Write(buf[:k])
			if err := put(n, buf[:k]); err != nil {
				return size, "", err
			}
			size += int64(k)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return size, hex.EncodeToString(h.Sum(nil)), nil
		}
		if rerr != nil {
			return size, "", rerr
		}
	}
}

// ChunkReader is the BlobReader stores return: it reads chunk n of a blob
// through Fetch when the position reaches it.
type ChunkReader struct {
	ctx   context.Context
	size  int64
	fetch func(ctx context.Context, n int) ([]byte, error)
	pos   int64
	cur   []byte // the chunk holding pos, or nil
	curN  int
}

// NewChunkReader returns a reader of a blob of the given size whose chunk n
// fetch returns (every chunk BlobChunkSize long but the last).
func NewChunkReader(ctx context.Context, size int64, fetch func(ctx context.Context, n int) ([]byte, error)) *ChunkReader {
	return &ChunkReader{ctx: ctx, size: size, fetch: fetch, curN: -1}
}

// Size implements BlobReader.
func (r *ChunkReader) Size() int64 { return r.size }

// Read implements io.Reader.
func (r *ChunkReader) Read(p []byte) (int, error) {
	if r.pos >= r.size {
		return 0, io.EOF
	}
	n := int(r.pos / BlobChunkSize)
	if n != r.curN {
		chunk, err := r.fetch(r.ctx, n)
		if err != nil {
			return 0, fmt.Errorf("read blob chunk %d: %w", n, err)
		}
		want := min(int64(BlobChunkSize), r.size-int64(n)*BlobChunkSize)
		if int64(len(chunk)) != want {
			return 0, fmt.Errorf("read blob chunk %d: %d bytes, want %d (the blob was replaced or damaged)", n, len(chunk), want)
		}
		r.cur, r.curN = chunk, n
	}
	k := copy(p, r.cur[r.pos-int64(n)*BlobChunkSize:])
	r.pos += int64(k)
	return k, nil
}

// Seek implements io.Seeker.
func (r *ChunkReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.size
	default:
		return r.pos, errors.New("seek: bad whence")
	}
	if offset < 0 {
		return r.pos, errors.New("seek: negative position")
	}
	r.pos = offset
	return offset, nil
}

// Close implements io.Closer; it drops the chunk held.
func (r *ChunkReader) Close() error {
	r.cur, r.curN = nil, -1
	return nil
}
