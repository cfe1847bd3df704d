package api

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/export"
)

// The grid's columns: finding them reads every matching item, seconds on a
// million-item job, and the UI asks on every open and filter change. An
// entry is good while the job has not changed, and for a running job (which
// changes all the time) for columnsFresh.
const (
	columnsFresh      = 2 * time.Second
	columnsCacheLimit = 64
)

func (s *Server) columns(ctx context.Context, j *engine.Job, sts []engine.ItemStatus) ([]export.Column, error) {
	now := s.now()
	version := j.UpdatedAt.Format(time.RFC3339Nano)
	good := func(v string, at time.Time) bool {
		return v == version || !j.State.Terminal() && now.Sub(at) < columnsFresh
	}
	return s.colCache.get(ctx, gridKey(j.ID, sts), version, now, good, func(ctx context.Context) ([]export.Column, error) {
		return export.Columns(ctx, s.store, j.ID, sts)
	})
}
