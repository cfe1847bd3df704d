package api

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/export"
)

// columnsCache remembers a job's grid columns: finding them reads every
// matching item, seconds on a million-item job, and the UI asks on every
// open and filter change. An entry is good while the job has not changed,
// and for a running job (which changes all the time) for columnsFresh.
type columnsCache struct {
	mu sync.Mutex
	m  map[string]columnsEntry
}

type columnsEntry struct {
	updated time.Time
	at      time.Time
	cols    []export.Column
}

const (
	columnsFresh      = 2 * time.Second
	columnsCacheLimit = 64
)

func (s *Server) columns(ctx context.Context, j *engine.Job, sts []engine.ItemStatus) ([]export.Column, error) {
	names := make([]string, len(sts))
	for i, st := range sts {
		names[i] = string(st)
	}
	key := strconv.FormatInt(j.ID, 10) + ":" + strings.Join(names, ",")
	now := s.now()
	c := &s.colCache
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && (e.updated.Equal(j.UpdatedAt) || (!j.State.Terminal() && now.Sub(e.at) < columnsFresh)) {
		return e.cols, nil
	}
	cols, err := export.Columns(ctx, s.store, j.ID, sts)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= columnsCacheLimit {
		c.m = map[string]columnsEntry{}
	}
	c.m[key] = columnsEntry{updated: j.UpdatedAt, at: now, cols: cols}
	c.mu.Unlock()
	return cols, nil
}
