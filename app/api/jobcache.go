package api

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/sluicehq/sluice/engine"
)

// jobCache keeps, per grid (a job and a status filter), a value that costs
// a read of every matching item: the grid's columns, its position index.
// The caller says when an entry still holds (good); concurrent requests for
// a missing entry share one build (singleflight), and the map is bounded by
// starting afresh when full.
type jobCache[T any] struct {
	limit int
	mu    sync.Mutex
	m     map[string]jobCacheEntry[T]
	group singleflight.Group
}

type jobCacheEntry[T any] struct {
	version string    // the job's state the value was built from
	at      time.Time // when it was built
	val     T
}

// gridKey names a grid: its job and filter.
func gridKey(jobID int64, sts []engine.ItemStatus) string {
	names := make([]string, 0, len(sts))
	for _, st := range engine.DistinctStatuses(sts) {
		names = append(names, string(st))
	}
	return strconv.FormatInt(jobID, 10) + ":" + strings.Join(names, ",")
}

// cached returns the entry of key when good says it still holds.
func (c *jobCache[T]) cached(key string, good func(version string, at time.Time) bool) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !good(e.version, e.at) {
		var zero T
		return zero, false
	}
	return e.val, true
}

// known reports whether key has an entry, good or not.
func (c *jobCache[T]) known(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.m[key]
	return ok
}

// get returns the entry of key when good says it holds, or builds it (one
// build per key at a time; a build outlives the request that started it,
// since its value serves the next one) and keeps it under version.
func (c *jobCache[T]) get(ctx context.Context, key, version string, now time.Time, good func(version string, at time.Time) bool,
	build func(context.Context) (T, error)) (T, error) {
	if v, ok := c.cached(key, good); ok {
		return v, nil
	}
	ch := c.group.DoChan(key, func() (any, error) {
		v, err := build(context.WithoutCancel(ctx))
		if err == nil {
			c.mu.Lock()
			if c.m == nil || len(c.m) >= c.limit {
				c.m = map[string]jobCacheEntry[T]{}
			}
			c.m[key] = jobCacheEntry[T]{version: version, at: now, val: v}
			c.mu.Unlock()
		}
		return v, err
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			var zero T
			return zero, r.Err
		}
		return r.Val.(T), nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
