package adapt

import (
	"errors"
	"sync"
	"time"
)

// Defaults of IngestConfig.
const (
	DefaultIngestStartRows     = 64
	DefaultIngestMinRows       = 16
	DefaultIngestMaxRows       = 20000
	DefaultIngestMaxBatchBytes = 4 << 20 // 4 MiB: bounds ingest memory (three batches live)
	DefaultIngestTargetP50     = 50 * time.Millisecond
	DefaultIngestTargetP95     = 250 * time.Millisecond
)

// IngestCommitAlpha is the smoothing factor of the commit latency average
// kept by Ingest.
const IngestCommitAlpha = 0.3

// IngestConfig bounds the ingest batch controller. A zero field takes its
// default.
type IngestConfig struct {
	// StartRows is the batch size before any commit was observed
	// (INGEST_START_ROWS, default 64).
	StartRows int
	// MinRows is the smallest batch size (INGEST_MIN_ROWS, default 16).
	MinRows int
	// MaxRows is the largest batch size (INGEST_MAX_ROWS, default 20000).
	MaxRows int
	// MaxBatchBytes caps the payload bytes of one batch whatever its row
	// count (INGEST_MAX_BATCH_BYTES, default 4 MiB).
	MaxBatchBytes int
	// TargetP50 is the commit latency under which batches grow
	// (INGEST_TARGET_P50, default 50ms).
	TargetP50 time.Duration
	// TargetP95 is the commit latency over which batches shrink
	// (INGEST_TARGET_P95, default 250ms).
	TargetP95 time.Duration
}

// WithDefaults returns c with every zero field set to its default. A
// default never contradicts a value that was set: an unset MinRows is at
// most MaxRows, an unset StartRows lies within [MinRows, MaxRows], an unset
// TargetP50 is at most TargetP95 and an unset TargetP95 at least TargetP50.
func (c IngestConfig) WithDefaults() IngestConfig {
	if c.MaxRows == 0 {
		c.MaxRows = max(DefaultIngestMaxRows, c.MinRows)
	}
	if c.MinRows == 0 {
		c.MinRows = DefaultIngestMinRows
		if c.MaxRows > 0 {
			c.MinRows = min(c.MinRows, c.MaxRows)
		}
	}
	if c.StartRows == 0 {
		c.StartRows = clampInt(DefaultIngestStartRows, c.MinRows, max(c.MinRows, c.MaxRows))
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultIngestMaxBatchBytes
	}
	switch {
	case c.TargetP50 == 0 && c.TargetP95 == 0:
		c.TargetP50, c.TargetP95 = DefaultIngestTargetP50, DefaultIngestTargetP95
	case c.TargetP50 == 0:
		c.TargetP50 = DefaultIngestTargetP50
		if c.TargetP95 > 0 {
			c.TargetP50 = min(c.TargetP50, c.TargetP95)
		}
	case c.TargetP95 == 0:
		c.TargetP95 = max(DefaultIngestTargetP95, c.TargetP50)
	}
	return c
}

// Validate reports every problem of c once defaults are applied, as
// *ConfigError values joined with errors.Join; nil means c is usable.
func (c IngestConfig) Validate() error {
	c = c.WithDefaults()
	var errs []error
	if c.MinRows < 1 {
		errs = append(errs, configErrorf(FieldIngestMinRows, "must be ≥ 1 (got %d)", c.MinRows))
	}
	if c.MaxRows < 1 {
		errs = append(errs, configErrorf(FieldIngestMaxRows, "must be ≥ 1 (got %d)", c.MaxRows))
	}
	if c.MinRows >= 1 && c.MaxRows >= 1 && c.MinRows > c.MaxRows {
		errs = append(errs, configErrorf(FieldIngestMinRows, "(%d) must be ≤ %s (%d)", c.MinRows, FieldIngestMaxRows, c.MaxRows))
	} else if c.MinRows >= 1 && c.MaxRows >= 1 && (c.StartRows < c.MinRows || c.StartRows > c.MaxRows) {
		errs = append(errs, configErrorf(FieldIngestStartRows, "(%d) must be between %s (%d) and %s (%d)",
			c.StartRows, FieldIngestMinRows, c.MinRows, FieldIngestMaxRows, c.MaxRows))
	}
	if c.MaxBatchBytes < 1 {
		errs = append(errs, configErrorf(FieldIngestMaxBatchBytes, "must be ≥ 1 (got %d)", c.MaxBatchBytes))
	}
	if c.TargetP50 <= 0 {
		errs = append(errs, configErrorf(FieldIngestTargetP50, "must be > 0 (got %s)", c.TargetP50))
	}
	if c.TargetP95 <= 0 {
		errs = append(errs, configErrorf(FieldIngestTargetP95, "must be > 0 (got %s)", c.TargetP95))
	}
	if c.TargetP50 > 0 && c.TargetP95 > 0 && c.TargetP50 > c.TargetP95 {
		errs = append(errs, configErrorf(FieldIngestTargetP50, "(%s) must be ≤ %s (%s)", c.TargetP50, FieldIngestTargetP95, c.TargetP95))
	}
	return errors.Join(errs...)
}

// sanitize returns c with defaults applied and every invalid value forced
// into a usable range.
func (c IngestConfig) sanitize() IngestConfig {
	c = c.WithDefaults()
	if c.MinRows < 1 {
		c.MinRows = 1
	}
	if c.MaxRows < c.MinRows {
		c.MaxRows = c.MinRows
	}
	c.StartRows = clampInt(c.StartRows, c.MinRows, c.MaxRows)
	if c.MaxBatchBytes < 1 {
		c.MaxBatchBytes = DefaultIngestMaxBatchBytes
	}
	if c.TargetP50 <= 0 {
		c.TargetP50 = DefaultIngestTargetP50
	}
	if c.TargetP95 < c.TargetP50 {
		c.TargetP95 = max(c.TargetP50, DefaultIngestTargetP95)
	}
	return c
}

// Ingest is the ingest batch controller: it chooses how many rows go into
// one insert transaction from the latency of the commits it observes.
//
// It keeps an EWMA (alpha IngestCommitAlpha) of the latency of successful
// commits. The latency of a commit grows with its row count, so the average
// is per commit, not per row, and is compared with the configured targets
// directly: that comparison is what stops the batch from growing once
// commits get long. After each commit:
//
//   - failed commit (busy, locked or anything else): the size is divided by
//     4; the latency of a failed commit is not averaged;
//   - average above TargetP95, or this commit alone above 2×TargetP95: the
//     size is halved;
//   - average below TargetP50 and the batch was full (rows ≥ the current
//     size, so not a short final batch): the size is doubled;
//   - otherwise it is kept.
//
// The size always stays within [MinRows, MaxRows]. Ingest is safe for
// concurrent use.
type Ingest struct {
	mu  sync.Mutex
	cfg IngestConfig

	rows    int
	latency ewma // commit latency in milliseconds

	commits   int64
	failures  int64
	shrinks   int64
	grows     int64
	rowsDone  int64
	bytesDone int64
	lastMs    float64
}

// IngestSnapshot is a point-in-time copy of an Ingest controller.
type IngestSnapshot struct {
	// Rows is the current batch size.
	Rows int `json:"rows"`
	// MinRows and MaxRows are the bounds of Rows.
	MinRows int `json:"minRows"`
	MaxRows int `json:"maxRows"`
	// MaxBytes is the byte cap of one batch.
	MaxBytes int `json:"maxBytes"`
	// CommitEwmaMs is the smoothed latency of successful commits.
	CommitEwmaMs float64 `json:"commitEwmaMs"`
	// LastCommitMs is the latency of the last observed commit, failed or not.
	LastCommitMs float64 `json:"lastCommitMs"`
	// Commits counts successful commits, Failures failed ones.
	Commits  int64 `json:"commits"`
	Failures int64 `json:"failures"`
	// Shrinks and Grows count the changes of Rows in each direction.
	Shrinks int64 `json:"shrinks"`
	Grows   int64 `json:"grows"`
	// RowsCommitted and BytesCommitted total the successful commits.
	RowsCommitted  int64 `json:"rowsCommitted"`
	BytesCommitted int64 `json:"bytesCommitted"`
}

// NewIngest returns a controller starting at c.StartRows. It applies
// WithDefaults and forces invalid values into range instead of failing; use
// IngestConfig.Validate to reject bad configuration.
func NewIngest(c IngestConfig) *Ingest {
	c = c.sanitize()
	return &Ingest{cfg: c, rows: c.StartRows, latency: ewma{alpha: IngestCommitAlpha}}
}

// Rows returns the current batch size in rows.
func (g *Ingest) Rows() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rows
}

// MaxBytes returns the byte cap of one batch: a batch ends at Rows rows or
// MaxBytes payload bytes, whichever comes first.
func (g *Ingest) MaxBytes() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cfg.MaxBatchBytes
}

// Observe records one commit of rows rows and bytes payload bytes that took
// took; err is the commit's error, nil on success. Call it after every
// commit, including short final batches, which never make the size grow.
func (g *Ingest) Observe(rows int, bytes int, took time.Duration, err error) {
	took = max(took, 0)
	ms := float64(took) / float64(time.Millisecond)

	g.mu.Lock()
	defer g.mu.Unlock()
	g.lastMs = ms
	cur := g.rows
	if err != nil {
		g.failures++
		g.resize(cur / 4)
		return
	}
	g.commits++
	g.rowsDone += int64(max(rows, 0))
	g.bytesDone += int64(max(bytes, 0))
	g.latency.observe(ms)
	avg := g.latency.value
	p50 := float64(g.cfg.TargetP50) / float64(time.Millisecond)
	p95 := float64(g.cfg.TargetP95) / float64(time.Millisecond)
	switch {
	case avg > p95 || took > 2*g.cfg.TargetP95:
		g.resize(cur / 2)
	case avg < p50 && rows >= cur:
		g.resize(cur * 2)
	}
}

// resize sets the batch size to n bounded by the configuration and counts
// the change. It must be called with g.mu held.
func (g *Ingest) resize(n int) {
	n = clampInt(n, g.cfg.MinRows, g.cfg.MaxRows)
	switch {
	case n < g.rows:
		g.shrinks++
	case n > g.rows:
		g.grows++
	}
	g.rows = n
}

// Snapshot returns a copy of the current state.
func (g *Ingest) Snapshot() IngestSnapshot {
	g.mu.Lock()
	defer g.mu.Unlock()
	return IngestSnapshot{
		Rows:           g.rows,
		MinRows:        g.cfg.MinRows,
		MaxRows:        g.cfg.MaxRows,
		MaxBytes:       g.cfg.MaxBatchBytes,
		CommitEwmaMs:   g.latency.value,
		LastCommitMs:   g.lastMs,
		Commits:        g.commits,
		Failures:       g.failures,
		Shrinks:        g.shrinks,
		Grows:          g.grows,
		RowsCommitted:  g.rowsDone,
		BytesCommitted: g.bytesDone,
	}
}
