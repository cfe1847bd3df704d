package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/engine"
)

// ItemMarks walks the (job_id, status, updated_at, id) index of each
// status, keys only (an index-only scan: no row is read), merges the
// ranges in ListItems' order and keeps every p.Every-th key.
func (s *Store) ItemMarks(ctx context.Context, p *engine.ItemMarksParams) (*engine.ItemMarks, error) {
	c, err := engine.NewMarkCollector(p.Every)
	if err != nil {
		return nil, err
	}
	err = s.rawReadTx(ctx, func(q driver.QueryerContext) error { return itemMarksTx(ctx, q, p.JobID, p.Statuses, c) })
	if engine.IsNotFound(err) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("item marks of job %d: %w", p.JobID, err)
	}
	return c.Marks(), nil
}

func itemMarksTx(ctx context.Context, q driver.QueryerContext, jobID int64, statuses []engine.ItemStatus, c *engine.MarkCollector) error {
	if err := rawJobExists(ctx, q, jobID); err != nil {
		return err
	}
	var ranges []*keyRange
	for _, st := range engine.DistinctStatuses(statuses) {
		rows, err := q.QueryContext(ctx, `SELECT updated_at, id FROM job_items`+scanQuery,
			[]driver.NamedValue{{Ordinal: 1, Value: jobID}, {Ordinal: 2, Value: statusCode(st)}})
		if err != nil {
			return err
		}
		defer rows.Close()
		r := &keyRange{rows: rows, vals: make([]driver.Value, 2)}
		if err := r.next(); err != nil {
			return err
		}
		if r.ok {
			ranges = append(ranges, r)
		}
	}
	if len(ranges) == 1 {
		// One status: its range is the order; no merge.
		r := ranges[0]
		for r.ok {
			c.Add(fromMS(r.at), r.id)
			if err := r.next(); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		var first *keyRange
		for _, r := range ranges {
			if r.ok && (first == nil || r.at < first.at || r.at == first.at && r.id < first.id) {
				first = r
			}
		}
		if first == nil {
			return nil
		}
		c.Add(fromMS(first.at), first.id)
		if err := first.next(); err != nil {
			return err
		}
	}
}

// keyRange is one status's keys in (updated_at, id) order.
type keyRange struct {
	rows   driver.Rows
	vals   []driver.Value
	ok     bool
	at, id int64
}

func (r *keyRange) next() error {
	r.ok = false
	if err := r.rows.Next(r.vals); err != nil {
		if err == io.EOF {
			return nil
		}
		return err
	}
	at, ok1 := r.vals[0].(int64)
	id, ok2 := r.vals[1].(int64)
	if !ok1 || !ok2 {
		return fmt.Errorf("item key is %T, %T, not integers", r.vals[0], r.vals[1])
	}
	r.ok, r.at, r.id = true, at, id
	return nil
}
