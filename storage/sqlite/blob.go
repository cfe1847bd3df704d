package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/engine"
)

// PutBlob implements engine.BlobStore. Chunks are committed one by one
// without waiting for fsync (lightTx), so the single writer is never held
// for longer than one chunk; the final transaction that makes the blob
// visible is a normal one, and its sync covers the chunks before it.
func (s *Store) PutBlob(ctx context.Context, p *engine.PutBlobParams) (*engine.Blob, error) {
	if p.Key == "" {
		return nil, engine.FieldErrorf("key", "a blob needs a key")
	}
	var id int64
	err := s.lightTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO blobs (key, job_id, media_type, created_at) VALUES (?, ?, ?, ?) RETURNING id`,
			p.Key, nullID(p.JobID), nullStr(p.MediaType), ms(p.Now)).Scan(&id)
	})
	if err != nil {
		return nil, fmt.Errorf("put blob %s: %w", p.Key, err)
	}
	size, sum, err := engine.WriteChunks(p.Body, func(n int, chunk []byte) error {
		return s.lightTx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO blob_chunks (blob_id, n, data) VALUES (?, ?, ?)`, id, n, chunk)
			return err
		})
	})
	if err == nil {
		err = s.tx(ctx, func(tx *sql.Tx) error {
			var old int64
			err := tx.QueryRowContext(ctx, `SELECT id FROM blobs WHERE key = ? AND complete = 1`, p.Key).Scan(&old)
			if err == nil {
				if err := deleteBlobRows(ctx, tx, `id = ?`, old); err != nil {
					return err
				}
			} else if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			res, err := tx.ExecContext(ctx, `UPDATE blobs SET complete = 1, size = ?, sha256 = ? WHERE id = ?`, size, sum, id)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				return cmp.Or(err, engine.ErrBlobGone)
			}
			return nil
		})
	}
	if err != nil {
		// The half-written blob is invisible; remove it even when ctx ended.
		_ = s.tx(context.WithoutCancel(ctx), func(tx *sql.Tx) error { return deleteBlobByID(ctx, tx, id) })
		return nil, fmt.Errorf("put blob %s: %w", p.Key, err)
	}
	return &engine.Blob{Key: p.Key, JobID: p.JobID, Size: size, SHA256: sum, MediaType: p.MediaType, CreatedAt: fromMS(ms(p.Now))}, nil
}

// deleteBlobRows deletes the blobs matching where (on table blobs, with
// args) and their chunks.
func deleteBlobRows(ctx context.Context, tx *sql.Tx, where string, args ...any) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM blob_chunks WHERE blob_id IN (SELECT id FROM blobs WHERE `+where+`)`, args...); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM blobs WHERE `+where, args...)
	return err
}

// deleteBlobByID deletes the blob id and every chunk written under its id,
// also when the blob's row is already gone (a writer that went on after
// its blob was pruned).
func deleteBlobByID(ctx context.Context, tx *sql.Tx, id int64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM blob_chunks WHERE blob_id = ?`, id); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM blobs WHERE id = ?`, id)
	return err
}

// PruneBlobs implements engine.BlobStore.
func (s *Store) PruneBlobs(ctx context.Context, p *engine.PruneBlobsParams) (int, error) {
	var n int
	err := s.tx(ctx, func(tx *sql.Tx) error {
		const where = `complete = 0 AND created_at < ?`
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM blobs WHERE `+where, ms(p.Before)).Scan(&n); err != nil || n == 0 {
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
	var job sql.NullInt64
	var sum, mt sql.NullString
	err := s.r.QueryRowContext(ctx, `SELECT id, job_id, size, sha256, media_type, created_at FROM blobs WHERE key = ? AND complete = 1`, key).
		Scan(&id, &job, &b.Size, &sum, &mt, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, notFound("blob", key)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("stat blob %s: %w", key, err)
	}
	b.Key, b.JobID, b.SHA256, b.MediaType, b.CreatedAt = key, job.Int64, sum.String, mt.String, fromMS(created)
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
		err := s.r.QueryRowContext(ctx, `SELECT data FROM blob_chunks WHERE blob_id = ? AND n = ?`, id, n).Scan(&data)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, notFound("blob chunk", fmt.Sprintf("%s#%d", key, n))
		}
		return data, err
	}), nil
}

// DeleteBlob implements engine.BlobStore.
func (s *Store) DeleteBlob(ctx context.Context, key string) error {
	err := s.tx(ctx, func(tx *sql.Tx) error { return deleteBlobRows(ctx, tx, `key = ? AND complete = 1`, key) })
	if err != nil {
		return fmt.Errorf("delete blob %s: %w", key, err)
	}
	return nil
}

func nullID(id int64) sql.NullInt64 { return sql.NullInt64{Int64: id, Valid: id != 0} }
