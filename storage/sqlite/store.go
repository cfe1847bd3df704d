// Package sqlite is the embedded Store of Sluice on modernc.org/sqlite (pure
// Go, no cgo).
//
// One file, WAL mode, two pools: a single write connection whose
// transactions begin with BEGIN IMMEDIATE (so a writer takes the lock up
// front and never fails half-way with SQLITE_BUSY on upgrade), and a read
// pool. busy_timeout is the first pragma of every connection so that even
// the other pragmas wait for a lock held by another process.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/sluicehq/sluice/engine"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

//go:embed migrations/*.sql
var migrations embed.FS

var _ engine.Store = (*Store)(nil)

// Options configure a Store. The zero value is the safe default.
type Options struct {
	// Synchronous is the SQLite synchronous setting: "FULL" (default:
	// every commit survives power loss) or "NORMAL" (commits since the last
	// checkpoint may be lost on power loss, never corrupted; faster).
	Synchronous string
	// BusyTimeout is how long a statement waits for another connection's
	// lock before failing; default 10s.
	BusyTimeout time.Duration
	// ReadConns is the size of the read pool; default 4.
	ReadConns int
	// CacheMiB is the page cache of the write connection; default 32.
	CacheMiB int
	// JournalSizeLimit bounds the WAL file after checkpoints; default 64 MiB.
	JournalSizeLimit int64
}

func (o Options) withDefaults() (Options, error) {
	o.Synchronous = strings.ToUpper(o.Synchronous)
	if o.Synchronous == "" {
		o.Synchronous = "FULL"
	}
	if o.Synchronous != "FULL" && o.Synchronous != "NORMAL" {
		return o, engine.Errorf(engine.EINVALID, "sqlite synchronous: %q is not FULL or NORMAL", o.Synchronous)
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 10 * time.Second
	}
	if o.ReadConns <= 0 {
		o.ReadConns = 4
	}
	if o.CacheMiB <= 0 {
		o.CacheMiB = 32
	}
	if o.JournalSizeLimit <= 0 {
		o.JournalSizeLimit = 64 << 20
	}
	return o, nil
}

// Store is the SQLite implementation of engine.Store.
type Store struct {
	path string
	sync string  // the configured synchronous setting
	w    *sql.DB // exactly one connection; BEGIN IMMEDIATE
	r    *sql.DB // read pool
	// dv is a read connection kept for PRAGMA data_version, which is only
	// meaningful when asked on the same connection each time.
	dv *sql.Conn
	cp *checkpointer
	// reads caches prepared statements of the read pool.
	reads stmtCache
	// writes caches prepared statements of the write connection, for
	// statements run many times in one transaction (trigger fires).
	writes stmtCache

	// lightBusy and fullBusy are the time spent in write transactions
	// (lightTx and tx, BEGIN returned to commit returned) in nanoseconds:
	// the one writer is serial, so its busy time per item bounds the rate.
	lightBusy, fullBusy atomic.Int64

	closeOnce sync.Once
	closeErr  error
	// Hot statements, prepared once on the write connection: the large
	// multi-row ones cost more to parse than to run.
	claim, claimStage0, claimLater, laterStage  *sql.Stmt
	insertJob, enqueueDone, jobByID, insertItem *sql.Stmt
	claimJobs, claimJob                         *sql.Stmt
	// tickets hands out the claim line's tickets (claim.go).
	tickets ticketClock
}

// Open opens (creating if needed) the database file at path, applies the
// embedded migrations and returns the store. It refuses a database whose
// schema is newer than this binary knows.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	// Create the file ourselves so that it is 0600 from the start.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open database file: %w", err)
	}
	f.Close()

	busy := opts.BusyTimeout.Milliseconds()
	wc, err := newWriteConnector(dsn(path, []string{
		fmt.Sprintf("busy_timeout(%d)", busy),
		"journal_mode(WAL)",
		"synchronous(" + opts.Synchronous + ")",
		"foreign_keys(1)",
		fmt.Sprintf("cache_size(-%d)", opts.CacheMiB*1024),
		fmt.Sprintf("journal_size_limit(%d)", opts.JournalSizeLimit),
		"temp_store(MEMORY)",
		fmt.Sprintf("wal_autocheckpoint(%d)", writerAutocheckpoint), // see checkpoint.go
	}, "immediate"))
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	w := sql.OpenDB(wc)
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	s := &Store{path: path, w: w, sync: opts.Synchronous}
	s.writes.db = w
	if err := s.migrate(ctx); err != nil {
		w.Close()
		return nil, err
	}

	if err := s.prepare(ctx); err != nil {
		w.Close()
		return nil, err
	}
	var last int64
	if err := w.QueryRowContext(ctx, lastTicketSQL).Scan(&last); err != nil {
		w.Close()
		return nil, fmt.Errorf("read the claim line: %w", err)
	}
	s.tickets.seed(last)

	r, err := sql.Open("sqlite", dsn(path, []string{
		fmt.Sprintf("busy_timeout(%d)", busy),
		"foreign_keys(1)",
		"query_only(1)",
		"temp_store(MEMORY)",
	}, "deferred"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open read pool: %w", err)
	}
	r.SetMaxOpenConns(opts.ReadConns + 1)
	r.SetMaxIdleConns(opts.ReadConns + 1)
	s.r = r
	s.reads.db = r
	s.cp, err = startCheckpointer(path, opts.BusyTimeout)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("start checkpointer: %w", err)
	}
	s.dv, err = r.Conn(ctx)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("open read connection: %w", err)
	}
	return s, nil
}

func dsn(path string, pragmas []string, txlock string) string {
	q := url.Values{}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", txlock)
	q.Set("_time_format", "sqlite")
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

func (s *Store) prepare(ctx context.Context) error {
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{
		{&s.claim, claimItemsSQL},
		{&s.claimStage0, claimStage0SQL}, {&s.claimLater, claimLaterSQL}, {&s.laterStage, laterStageSQL},
		{&s.insertJob, insertJobSQL}, {&s.enqueueDone, enqueueDoneSQL}, {&s.insertItem, insertOneItemSQL},
		{&s.jobByID, jobByIDSQL}, {&s.claimJobs, claimJobsSQL}, {&s.claimJob, claimJobSQL},
	} {
		st, err := s.w.PrepareContext(ctx, p.q)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		*p.dst = st
	}
	// Statements of the write connection run many times per transaction
	// are prepared here: preparing on the pool inside a transaction would
	// wait for the one connection the transaction holds.
	for _, q := range writeCachedSQL {
		if _, err := s.writes.get(ctx, q); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
	}
	return nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Close closes the pools and stops the checkpointer; closing twice is safe.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Store) close() error {
	var errs []error
	if s.cp != nil {
		errs = append(errs, s.cp.close())
	}
	if s.dv != nil {
		errs = append(errs, s.dv.Close())
	}
	s.reads.close()
	s.writes.close()
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	for _, st := range []*sql.Stmt{s.claim, s.claimStage0, s.claimLater, s.laterStage, s.insertJob, s.enqueueDone, s.jobByID, s.insertItem,
		s.claimJobs, s.claimJob} {
		if st != nil {
			st.Close()
		}
	}
	if s.w != nil {
		// A passive checkpoint keeps the WAL small for the next opener.
		_, _ = s.w.Exec("PRAGMA wal_checkpoint(PASSIVE)")
		errs = append(errs, s.w.Close())
	}
	return errors.Join(errs...)
}

// Checkpoint runs a WAL checkpoint (mode PASSIVE, FULL or TRUNCATE).
func (s *Store) Checkpoint(ctx context.Context, mode string) error {
	_, err := s.w.ExecContext(ctx, "PRAGMA wal_checkpoint("+mode+")")
	return err
}

func (s *Store) migrate(ctx context.Context) error {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.w, sub, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	var known int64
	for _, src := range p.ListSources() {
		known = max(known, src.Version)
	}
	// Two processes may open a new file at once; the loser of the race
	// sees the winner's tables and simply tries again.
	for try := 0; ; try++ {
		cur, err := p.GetDBVersion(ctx)
		if err != nil && !errors.Is(err, goose.ErrVersionNotFound) {
			if try < 3 {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return fmt.Errorf("read schema version: %w", err)
		}
		if cur > known {
			return engine.Errorf(engine.ECONFLICT,
				"database %s has schema version %d but this sluice knows only up to %d: upgrade sluice", s.path, cur, known)
		}
		if cur == known {
			return nil
		}
		if _, err := p.Up(ctx); err != nil {
			if try < 3 {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return fmt.Errorf("apply migrations: %w", err)
		}
		return nil
	}
}

// ms converts a time to the stored form: milliseconds since the epoch.
func ms(t time.Time) int64 { return t.UnixMilli() }

// fromMS converts a stored time back, in UTC.
func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

func fromNullMS(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMS(v.Int64)
	return &t
}

func nullMS(t *time.Time) sql.NullInt64 {
	if t == nil || t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: ms(*t), Valid: true}
}

func nullStr(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

func nullJSON(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// tx runs fn in one write transaction (BEGIN IMMEDIATE).
func (s *Store) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return runTx(ctx, s.w, &s.fullBusy, fn)
}

// WriteBusy returns the time spent so far in write transactions of this
// store, from BEGIN IMMEDIATE's return to the commit's (waits for the
// connection and the lock not included): light ones (lightTx: claims, no
// fsync) and durable ones (tx: completions, ingest, ...).
func (s *Store) WriteBusy() (light, durable time.Duration) {
	return time.Duration(s.lightBusy.Load()), time.Duration(s.fullBusy.Load())
}

// runTx begins a transaction on db (a pool or one connection), runs fn and
// commits, or rolls back when fn fails. The time from the begin's return to
// the end is added to busy.
func runTx(ctx context.Context, db interface {
	BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
}, busy *atomic.Int64, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func(start time.Time) { busy.Add(int64(time.Since(start))) }(time.Now())
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// lightTx runs fn in one write transaction whose commit does not wait for
// fsync (synchronous=NORMAL for this transaction only). Only for writes that
// may be lost on power failure without harm: a claim lost that way leaves
// its items PENDING, exactly as if the worker had died, and the next FULL
// commit syncs the WAL including it. The writer's own setting is restored
// afterwards; a connection that cannot be restored is discarded.
func (s *Store) lightTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if s.sync != "FULL" {
		return s.tx(ctx, fn)
	}
	c, err := s.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, "PRAGMA synchronous=NORMAL"); err != nil {
		return err
	}
	defer func() {
		if _, err := c.ExecContext(context.Background(), "PRAGMA synchronous="+s.sync); err != nil {
			_ = c.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	return runTx(ctx, c, &s.lightBusy, fn)
}

func notFound(what string, id any) error {
	return fmt.Errorf("%s %v: %w", what, id, &engine.Error{Code: engine.ENOTFOUND, Message: fmt.Sprintf("%s %v not found", what, id)})
}

func durationUS(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// ReadDB returns the store's read pool, for tools that read its tables as
// a whole (storecopy copies them into PostgreSQL).
func (s *Store) ReadDB() *sql.DB { return s.r }

// PoolStats returns the statistics of the write connection and the read
// pool (for metrics: time spent waiting for a connection).
func (s *Store) PoolStats() map[string]sql.DBStats {
	return map[string]sql.DBStats{"write": s.w.Stats(), "read": s.r.Stats()}
}
