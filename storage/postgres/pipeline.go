package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

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

// PutPipeline creates or replaces a pipeline, bumping its version. The row
// is locked (or its name reserved by an advisory lock when new), so two
// writers never hand out one version twice.
func (s *Store) PutPipeline(ctx context.Context, p *engine.PutPipelineParams) (*engine.Pipeline, error) {
	var pl engine.Pipeline
	err := s.tx(ctx, func(tx pgx.Tx) error {
		pl = *p.Pipeline
		if _, err := exec(ctx, tx, `SELECT pg_advisory_xact_lock(?, hashtext(?))`, s.lockSpace, "pipeline:"+pl.Name); err != nil {
			return err
		}
		var cur int
		err := queryRow(ctx, tx, `SELECT version FROM pipelines WHERE name = ?`, pl.Name).Scan(&cur)
		if err != nil && !noRows(err) {
			return err
		}
		pl.Version = cur + 1
		pl.UpdatedAt = fromMS(ms(p.Now))
		spec, err := json.Marshal(&pl)
		if err != nil {
			return err
		}
		_, err = exec(ctx, tx, `INSERT INTO pipelines (name, version, spec, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET version = excluded.version, spec = excluded.spec, updated_at = excluded.updated_at`,
			pl.Name, pl.Version, string(spec), ms(p.Now))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("put pipeline %s: %w", p.Pipeline.Name, err)
	}
	return &pl, nil
}

// GetPipeline returns a pipeline by name.
func (s *Store) GetPipeline(ctx context.Context, name string) (*engine.Pipeline, error) {
	var spec string
	var version int
	var updated int64
	err := queryRow(ctx, s.pool, `SELECT spec, version, updated_at FROM pipelines WHERE name = ?`, name).
		Scan(&spec, &version, &updated)
	if noRows(err) {
		return nil, notFound("pipeline", name)
	}
	if err != nil {
		return nil, fmt.Errorf("get pipeline %s: %w", name, err)
	}
	return engine.DecodePipeline([]byte(spec), version, fromMS(updated))
}

// ListPipelines returns every pipeline by name.
func (s *Store) ListPipelines(ctx context.Context) ([]*engine.Pipeline, error) {
	rows, err := query(ctx, s.pool, `SELECT spec, version, updated_at FROM pipelines ORDER BY name COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("list pipelines: %w", err)
	}
	defer rows.Close()
	var out []*engine.Pipeline
	for rows.Next() {
		var spec string
		var version int
		var updated int64
		if err := rows.Scan(&spec, &version, &updated); err != nil {
			return nil, err
		}
		p, err := engine.DecodePipeline([]byte(spec), version, fromMS(updated))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// CreateFile records an input file.
func (s *Store) CreateFile(ctx context.Context, p *engine.CreateFileParams) (*engine.File, error) {
	f := *p.File
	f.CreatedAt = fromMS(ms(p.Now))
	err := queryRow(ctx, s.pool, `INSERT INTO files (user_id, name, size, sha256, media_type, source, source_ref, stored_path, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		f.UserID, f.Name, f.Size, nullStr(f.SHA256), nullStr(f.MediaType), f.Source, nullStr(f.SourceRef),
		nullStr(f.StoredPath), ms(p.Now)).Scan(&f.ID)
	if err != nil {
		return nil, fmt.Errorf("create file: %w", err)
	}
	return &f, nil
}
