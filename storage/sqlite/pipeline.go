package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/engine"
)

// DefaultUser returns the local user (ID 1).
func (s *Store) DefaultUser(ctx context.Context) (*engine.User, error) {
	u, err := s.GetUser(ctx, 1)
	if err != nil {
		return nil, fmt.Errorf("get default user: %w", err)
	}
	u.PasswordHash = ""
	return u, nil
}

// PutPipeline creates or replaces a pipeline, bumping its version.
func (s *Store) PutPipeline(ctx context.Context, p *engine.PutPipelineParams) (*engine.Pipeline, error) {
	pl := *p.Pipeline
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var cur int
		err := tx.QueryRowContext(ctx, `SELECT version FROM pipelines WHERE name = ?`, pl.Name).Scan(&cur)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		pl.Version = cur + 1
		pl.UpdatedAt = fromMS(ms(p.Now))
		spec, err := json.Marshal(&pl)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO pipelines (name, version, spec, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET version = excluded.version, spec = excluded.spec, updated_at = excluded.updated_at`,
			pl.Name, pl.Version, string(spec), ms(p.Now))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("put pipeline %s: %w", pl.Name, err)
	}
	return &pl, nil
}

// GetPipeline returns a pipeline by name.
func (s *Store) GetPipeline(ctx context.Context, name string) (*engine.Pipeline, error) {
	p, err := getSpec(ctx, s.r, `SELECT spec, version, updated_at FROM pipelines WHERE name = ?`, name, decodePipeline)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("pipeline", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get pipeline %s: %w", name, err)
	}
	return p, nil
}

// ListPipelines returns every pipeline by name.
func (s *Store) ListPipelines(ctx context.Context) ([]*engine.Pipeline, error) {
	out, err := listSpecs(ctx, s.r, `SELECT spec, version, updated_at FROM pipelines ORDER BY name`, decodePipeline)
	if err != nil {
		return nil, fmt.Errorf("list pipelines: %w", err)
	}
	return out, nil
}

// getSpec reads one versioned JSON spec (spec, version, updated_at): a
// pipeline or a command definition. No row is sql.ErrNoRows.
func getSpec[T any](ctx context.Context, db *sql.DB, query string, key string, decode func(string, int, int64) (T, error)) (T, error) {
	var spec string
	var version int
	var updated int64
	if err := db.QueryRowContext(ctx, query, key).Scan(&spec, &version, &updated); err != nil {
		var zero T
		return zero, err
	}
	return decode(spec, version, updated)
}

// listSpecs reads versioned JSON specs in the query's order.
func listSpecs[T any](ctx context.Context, db *sql.DB, query string, decode func(string, int, int64) (T, error)) ([]T, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var spec string
		var version int
		var updated int64
		if err := rows.Scan(&spec, &version, &updated); err != nil {
			return nil, err
		}
		v, err := decode(spec, version, updated)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// decodePipeline reads a stored pipeline spec.
func decodePipeline(spec string, version int, updated int64) (*engine.Pipeline, error) {
	return engine.DecodePipeline([]byte(spec), version, fromMS(updated))
}

// CreateFile records an input file.
func (s *Store) CreateFile(ctx context.Context, p *engine.CreateFileParams) (*engine.File, error) {
	f := *p.File
	f.CreatedAt = fromMS(ms(p.Now))
	err := s.tx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO files (user_id, name, size, sha256, media_type, source, source_ref, stored_path, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			f.UserID, f.Name, f.Size, nullStr(f.SHA256), nullStr(f.MediaType), f.Source, nullStr(f.SourceRef),
			nullStr(f.StoredPath), ms(p.Now)).Scan(&f.ID)
	})
	if err != nil {
		return nil, fmt.Errorf("create file: %w", err)
	}
	return &f, nil
}
