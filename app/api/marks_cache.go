package api

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// The position index of a grid (Store.ItemMarks) is kept between
// requests (Server.markCache), so that a jump to row N is one keyset page
// after a known cursor. Building an index reads every key of the filter
// (about a third of a second of CPU for a million rows on SQLite).
//
// An entry is exact while the job is unchanged: every move of one of its
// items changes the job's counters, request count, state or updated_at,
// except the lease renewals and completions of items in flight, so a job
// with PROCESSING items counts as changed. Such a job (it is running, and
// changes all the time) reuses an entry for marksFresh, so that a grid
// watching it costs one index build per 10 s at most: its rows move under
// the grid anyway, and the grid reads the rows on screen again as they do.
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

// marksGood says whether an index built at version/at still holds for job j.
func marksGood(j *engine.Job, now time.Time) func(string, time.Time) bool {
	version := jobVersion(j)
	return func(v string, at time.Time) bool {
		return j.Counts.Processing == 0 && v == version || j.Counts.Processing > 0 && now.Sub(at) < marksFresh
	}
}

// cachedMarks is the index of job j's items of sts if it is cached.
func (s *Server) cachedMarks(j *engine.Job, sts []engine.ItemStatus) *engine.ItemMarks {
	m, _ := s.markCache.cached(gridKey(j.ID, sts), marksGood(j, s.now()))
	return m
}

// marks returns the position index of job j's items of sts.
func (s *Server) marks(ctx context.Context, j *engine.Job, sts []engine.ItemStatus) (*engine.ItemMarks, error) {
	now := s.now()
	return s.markCache.get(ctx, gridKey(j.ID, sts), jobVersion(j), now, marksGood(j, now), func(ctx context.Context) (*engine.ItemMarks, error) {
		return s.store.ItemMarks(ctx, &engine.ItemMarksParams{JobID: j.ID, Statuses: sts, Every: marksEvery})
	})
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
	if !s.markCache.known(gridKey(j.ID, sts)) {
		go func() { _, _ = s.marks(context.WithoutCancel(ctx), j, sts) }()
	}
}
