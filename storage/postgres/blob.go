package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/engine"
)

// PutBlob implements engine.BlobStore: every chunk is its own short
// statement, so no transaction stays open while the body is read, and the
// blob becomes visible in one final transaction that also removes an older
// blob of the same key.
func (s *Store) PutBlob(ctx context.Context, p *engine.PutBlobParams) (*engine.Blob, error) {
	if p.Key == "" {
		return nil, engine.FieldErrorf("key", "a blob needs a key")
	}
	var id int64
	err := queryRow(ctx, s.pool, `INSERT INTO blobs (key, job_id, media_type, created_at) VALUES (?, ?, ?, ?) RETURNING id`,
		p.Key, nullID(p.JobID), nullStr(p.MediaType), ms(p.Now)).Scan(&id)
	if err != nil {
		return nil, fmt.Errorf("put blob %s: %w", p.Key, err)
	}
	size, sum, err := engine.WriteChunks(p.Body, func(n int, chunk []byte) error {
		_, err := exec(ctx, s.pool, `INSERT INTO blob_chunks (blob_id, n, data) VALUES (?, ?, ?)`, id, n, chunk)
		return err
	})
	if err == nil {
		// Two writers of one key publishing at once: the later one meets
		// the unique index, and tries again (it then replaces the other).
		for try := 0; ; try++ {
			err = s.tx(ctx, func(tx pgx.Tx) error {
				if err := deleteBlobRows(ctx, tx, `key = ? AND complete`, p.Key); err != nil {
					return err
				}
				n, err := exec(ctx, tx, `UPDATE blobs SET complete = TRUE, size = ?, sha256 = ? WHERE id = ?`, size, sum, id)
				if err == nil && n != 1 {
					err = engine.ErrBlobGone
				}
				return err
			})
			if err == nil || try == 3 || !uniqueViolation(err) {
				break
			}
		}
	}
	if err != nil {
		_ = s.tx(context.WithoutCancel(ctx), func(tx pgx.Tx) error { return deleteBlobByID(ctx, tx, id) })
		return nil, fmt.Errorf("put blob %s: %w", p.Key, err)
	}
	return &engine.Blob{Key: p.Key, JobID: p.JobID, Size: size, SHA256: sum, MediaType: p.MediaType, CreatedAt: fromMS(ms(p.Now))}, nil
}

// deleteBlobRows deletes the blobs matching where (on table blobs, with
// args) and their chunks, in the caller's transaction.
func deleteBlobRows(ctx context.Context, tx pgx.Tx, where string, args ...any) error {
	if _, err := exec(ctx, tx, `DELETE FROM blob_chunks WHERE blob_id IN (SELECT id FROM blobs WHERE `+where+`)`, args...); err != nil {
		return err
	}
	_, err := exec(ctx, tx, `DELETE FROM blobs WHERE `+where, args...)
	return err
}

// deleteBlobByID deletes the blob id and every chunk written under its id,
// also when the blob's row is already gone (a writer that went on after
// its blob was pruned).
func deleteBlobByID(ctx context.Context, tx pgx.Tx, id int64) error {
	if _, err := exec(ctx, tx, `DELETE FROM blob_chunks WHERE blob_id = ?`, id); err != nil {
		return err
	}
	_, err := exec(ctx, tx, `DELETE FROM blobs WHERE id = ?`, id)
	return err
}

// PruneBlobs implements engine.BlobStore.
func (s *Store) PruneBlobs(ctx context.Context, p *engine.PruneBlobsParams) (int, error) {
	var n int
	err := s.tx(ctx, func(tx pgx.Tx) error {
		const where = `NOT complete AND created_at < ?`
		if err := queryRow(ctx, tx, `SELECT count(*) FROM blobs WHERE `+where, ms(p.Before)).Scan(&n); err != nil || n == 0 {
			return err
		}
		return deleteBlobRows(ctx, tx, where, ms(p.Before))
	})
	if err != nil {
		return 0, fmt.Errorf("prune half-written blobs: %w", err)
	}
	return n, nil
}

// StatBlob implements engine.BlobStore.
func (s *Store) StatBlob(ctx context.Context, key string) (*engine.Blob, error) {
	b, _, err := s.statBlob(ctx, key)
	return b, err
}

func (s *Store) statBlob(ctx context.Context, key string) (*engine.Blob, int64, error) {
	var b engine.Blob
	var id, created int64
	var job *int64
	var sum, mt *string
	err := queryRow(ctx, s.pool, `SELECT id, job_id, size, sha256, media_type, created_at FROM blobs WHERE key = ? AND complete`, key).
		Scan(&id, &job, &b.Size, &sum, &mt, &created)
	if noRows(err) {
		return nil, 0, notFound("blob", key)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("stat blob %s: %w", key, err)
	}
	if job != nil {
		b.JobID = *job
	}
	b.Key, b.SHA256, b.MediaType, b.CreatedAt = key, str(sum), str(mt), fromMS(created)
	return &b, id, nil
}

// OpenBlob implements engine.BlobStore.
func (s *Store) OpenBlob(ctx context.Context, key string) (engine.BlobReader, error) {
	b, id, err := s.statBlob(ctx, key)
	if err != nil {
		return nil, err
	}
	return engine.NewChunkReader(ctx, b.Size, func(ctx context.Context, n int) ([]byte, error) {
		var data []byte
		err := queryRow(ctx, s.pool, `SELECT data FROM blob_chunks WHERE blob_id = ? AND n = ?`, id, n).Scan(&data)
		if noRows(err) {
			return nil, notFound("blob chunk", fmt.Sprintf("%s#%d", key, n))
		}
		return data, err
	}), nil
}

// DeleteBlob implements engine.BlobStore.
func (s *Store) DeleteBlob(ctx context.Context, key string) error {
	err := s.tx(ctx, func(tx pgx.Tx) error { return deleteBlobRows(ctx, tx, `key = ? AND complete`, key) })
	if err != nil {
		return fmt.Errorf("delete blob %s: %w", key, err)
	}
	return nil
}
