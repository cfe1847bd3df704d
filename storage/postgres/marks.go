package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/engine"
)

// ItemMarks numbers the filter's rows in ListItems' order inside the
// server (row_number over the (job_id, status, updated_at, id) index) and
// sends back only every p.Every-th key, not a million of them.
func (s *Store) ItemMarks(ctx context.Context, p *engine.ItemMarksParams) (*engine.ItemMarks, error) {
	if p.Every < 1 {
		return nil, engine.FieldErrorf("every", "must be at least 1, not %d", p.Every)
	}
	statuses := engine.DistinctStatuses(p.Statuses)
	names := make([]string, len(statuses))
	for i, st := range statuses {
		names[i] = string(st)
	}
	var m *engine.ItemMarks
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		m = &engine.ItemMarks{Every: p.Every, Starts: []*engine.Cursor{nil}}
		if err := jobExists(ctx, tx, p.JobID); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT count(*) FROM job_items WHERE job_id = $1 AND status = ANY($2)`, p.JobID, names).Scan(&m.Total)
		if err != nil {
			return err
		}
		// Row k*Every (0-based) starts after the key numbered k*Every
		// (1-based), which must be before the last row.
		rows, err := tx.Query(ctx, `SELECT updated_at, id FROM (
				SELECT updated_at, id, row_number() OVER (ORDER BY updated_at, id) AS rn
				FROM job_items WHERE job_id = $1 AND status = ANY($2)) numbered
			WHERE rn % $3 = 0 AND rn < $4 ORDER BY rn`, p.JobID, names, int64(p.Every), m.Total)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var at, id int64
			if err := rows.Scan(&at, &id); err != nil {
				return err
			}
			m.Starts = append(m.Starts, &engine.Cursor{UpdatedAt: fromMS(at), ID: id})
		}
		return rows.Err()
	})
	if engine.IsNotFound(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("item marks of job %d: %w", p.JobID, err)
	}
	return m, nil
}
