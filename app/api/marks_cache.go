package api

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// marksCache keeps each grid's position index (Store.ItemMarks) between
// requests, so that a jump to row N is one keyset page after a known
// cursor. Building an index reads every key of the filter (about a third
// of a second of CPU for a million rows on SQLite), so it is built once per
// (job, filter, job version) and shared by requests that arrive while it is
// being built.
//
// An entry is exact while the job is unchanged: every move of one of its
// items changes the job's counters, request count, state or updated_at,
// except the lease renewals and completions of items in flight, so a job
// with PROCESSING items counts as changed. Such a job (it is running, and
// changes all the time) reuses an entry for marksFresh, so that a grid
// watching it costs one index build per 10 s at most: its rows move under
// the grid anyway, and the grid reads the rows on screen again as they do.
type marksCache struct {
	mu       sync.Mutex
	m        map[string]*marksEntry
	building map[string]chan struct{}
}

type marksEntry struct {
	version string
	at      time.Time
	marks   *engine.ItemMarks
}

const (
	// marksEvery is the distance between two marks: a page at row N skips
	// at most marksEvery-1 rows after its mark.
	marksEvery      = 250
	marksFresh      = 10 * time.Second
	marksCacheLimit = 16
)

// jobVersion changes whenever one of the job's items may have moved.
func jobVersion(j *engine.Job) string {
	c := j.Counts
	return strings.Join([]string{string(j.State), strconv.FormatInt(j.UpdatedAt.UnixNano(), 10), strconv.FormatInt(j.Requests, 10),
		strconv.FormatInt(j.TotalItems, 10), strconv.FormatInt(c.Pending, 10), strconv.FormatInt(c.Processing, 10),
		strconv.FormatInt(c.Done, 10), strconv.FormatInt(c.Error, 10), strconv.FormatInt(c.NotFound, 10),
		strconv.FormatInt(c.Skipped, 10)}, ":")
}

// marksKey names a grid: its job and filter.
func marksKey(j *engine.Job, sts []engine.ItemStatus) string {
	names := make([]string, 0, len(sts))
	for _, st := range engine.DistinctStatuses(sts) {
		names = append(names, string(st))
	}
	return strconv.FormatInt(j.ID, 10) + ":" + strings.Join(names, ",")
}

// fresh returns the cached index of key when it still holds for job j.
// c.mu is held.
func (c *marksCache) fresh(key string, j *engine.Job, now time.Time) *engine.ItemMarks {
	e, ok := c.m[key]
	if !ok {
		return nil
	}
	if j.Counts.Processing == 0 && e.version == jobVersion(j) || j.Counts.Processing > 0 && now.Sub(e.at) < marksFresh {
		return e.marks
	}
	return nil
}

// cachedMarks is the index of job j's items of sts if it is cached.
func (s *Server) cachedMarks(j *engine.Job, sts []engine.ItemStatus) *engine.ItemMarks {
	c := &s.markCache
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fresh(marksKey(j, sts), j, s.now())
}

// marks returns the position index of job j's items of sts.
func (s *Server) marks(ctx context.Context, j *engine.Job, sts []engine.ItemStatus) (*engine.ItemMarks, error) {
	key := marksKey(j, sts)
	version := jobVersion(j)
	c := &s.markCache
	for {
		now := s.now()
		c.mu.Lock()
		if m := c.fresh(key, j, now); m != nil {
			c.mu.Unlock()
			return m, nil
		}
		wait, busy := c.building[key]
		if !busy {
			if c.building == nil {
				c.building = map[string]chan struct{}{}
			}
			done := make(chan struct{})
			c.building[key] = done
			c.mu.Unlock()
			// The browser cancels the request of a grid scrolled on
			// before it is answered; the index is still worth finishing
			// for the next one.
			m, err := s.store.ItemMarks(context.WithoutCancel(ctx), &engine.ItemMarksParams{JobID: j.ID, Statuses: sts, Every: marksEvery})
			c.mu.Lock()
			delete(c.building, key)
			if err == nil {
				if c.m == nil || len(c.m) >= marksCacheLimit {
					c.m = map[string]*marksEntry{}
				}
				c.m[key] = &marksEntry{version: version, at: now, marks: m}
			}
			close(done)
			c.mu.Unlock()
			return m, err
		}
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// pageAt reads the page of p's filter that starts at row at of job j; it
// also returns how many rows the filter lists.
func (s *Server) pageAt(ctx context.Context, j *engine.Job, p *engine.ListItemsParams, at int64) (*engine.ItemPage, int64, error) {
	m, err := s.marks(ctx, j, p.Statuses)
	if err != nil {
		return nil, 0, err
	}
	if at >= m.Total {
		return &engine.ItemPage{}, m.Total, nil
	}
	skip := int(at % int64(m.Every))
	p.After = m.Starts[at/int64(m.Every)]
	limit := p.Limit
	p.Limit = skip + limit
	page, err := s.store.ListItems(ctx, p)
	if err != nil {
		return nil, 0, err
	}
	page.Items = page.Items[min(skip, len(page.Items)):]
	return page, m.Total, nil
}

// warmMarks builds the position index of a grid in the background when
// there is none yet: the grid's first page needs none, its first jump does.
// An index gone stale is rebuilt only when a jump needs it (a grid left at
// the top of a running job reads its first page every few seconds).
func (s *Server) warmMarks(ctx context.Context, j *engine.Job, sts []engine.ItemStatus) {
	c := &s.markCache
	key := marksKey(j, sts)
	c.mu.Lock()
	_, known := c.m[key]
	c.mu.Unlock()
	if !known {
		go func() { _, _ = s.marks(context.WithoutCancel(ctx), j, sts) }()
	}
}
