// Package postgres is the Store of Sluice on PostgreSQL (pgx v5), for many
// worker processes on many machines sharing one queue.
//
// It keeps SQLite's schema and meanings (times are milliseconds, counters
// change in the transaction that changes the items) and replaces the single
// writer with row locks: a job's row is locked, in id order, by every
// transaction that changes its counters or hands out its budget, and items
// are claimed with FOR UPDATE SKIP LOCKED, so concurrent claims never take
// the same item and never wait for each other's items. Transactions that
// lose a deadlock or a serialization race are retried.
//
// Wake-ups travel by LISTEN/NOTIFY (notify.go) and one elected process
// holds each advisory lock (leader.go).
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/crc64"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/sluicehq/sluice/engine"
)

//go:embed migrations/*.sql
var migrations embed.FS

var _ engine.Store = (*Store)(nil)

// Options configure a Store. The zero value is the default.
type Options struct {
	// Schema, when set, is the PostgreSQL schema the store lives in
	// (created when missing); tests give each store its own. Default: the
	// connection's search_path (normally "public").
	Schema string
	// MaxConns bounds the pool; default 8.
	MaxConns int32
	// NoListen leaves out the LISTEN connection: ChangeCounter then reads
	// a counter from the database instead (one query per call).
	NoListen bool
}

// Store is the PostgreSQL implementation of engine.Store.
type Store struct {
	pool   *pgxpool.Pool
	cfg    *pgxpool.Config
	schema string
	// channel is the NOTIFY channel of this schema's store.
	channel string
	// lockSpace is the first key of this schema's advisory locks.
	lockSpace int32

	lis *listener

	// leaders are the elections made by Leader, resigned on Close (a held
	// lock keeps a pool connection).
	leadersMu sync.Mutex
	leaders   map[string]*Leader

	closeOnce sync.Once
	closeErr  error
}

// IsURL reports whether a --store value names a PostgreSQL database.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Open connects to the database at url (a postgres:// URL or key=value
// string), applies the embedded migrations and returns the store. It
// refuses a database whose schema is newer than this binary knows.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, engine.Errorf(engine.EINVALID, "postgres store: %v", err)
	}
	switch {
	case opts.MaxConns > 0:
		cfg.MaxConns = opts.MaxConns
	case !strings.Contains(url, "pool_max_conns"):
		cfg.MaxConns = 8
	}
	schema := opts.Schema
	if schema != "" {
		if err := createSchema(ctx, cfg.ConnConfig, schema); err != nil {
			return nil, err
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
	} else {
		// A URL may name the schema (?search_path=name): every process
		// given that URL shares it, and the first one creates it.
		schema = cfg.ConnConfig.RuntimeParams["search_path"]
		if schema == "" {
			schema = "public"
		} else if !strings.ContainsAny(schema, ", \"") {
			if err := createSchema(ctx, cfg.ConnConfig, schema); err != nil {
				return nil, err
			}
		}
	}
	s := &Store{cfg: cfg, schema: schema, channel: "sluice_" + schema, lockSpace: lockSpace(schema)}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	s.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres pool: %w", err)
	}
	if !opts.NoListen {
		s.lis = startListener(s)
	}
	return s, nil
}

// lockSpace derives the first key of a schema's advisory locks, so that
// stores in different schemas of one database never share a lock.
func lockSpace(schema string) int32 {
	return int32(crc64.Checksum([]byte("sluice:"+schema), crc64.MakeTable(crc64.ISO)))
}

func createSchema(ctx context.Context, cc *pgx.ConnConfig, schema string) error {
	c, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
		var pgErr *pgconn.PgError
		// Two processes creating the schema at once: the loser sees it.
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
			return fmt.Errorf("create schema %s: %w", schema, err)
		}
	}
	return nil
}

// DropSchema removes a schema with everything in it (tests clean up with it).
func DropSchema(ctx context.Context, url, schema string) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	return err
}

func (s *Store) migrate(ctx context.Context) error {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	db := stdlib.OpenDB(*s.cfg.ConnConfig.Copy())
	defer db.Close()
	// Processes starting together wait for the first one's migration.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(s.lockSpace)), lock.WithLockTimeout(1, 120))
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, sub, goose.WithDisableGlobalRegistry(true), goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	var known int64
	for _, src := range p.ListSources() {
		known = max(known, src.Version)
	}
	cur, err := p.GetDBVersion(ctx)
	if err != nil && !errors.Is(err, goose.ErrVersionNotFound) {
		return fmt.Errorf("read schema version: %w", err)
	}
	if cur > known {
		return engine.Errorf(engine.ECONFLICT,
			"postgres schema %s has version %d but this sluice knows only up to %d: upgrade sluice", s.schema, cur, known)
	}
	if cur == known {
		return nil
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// Schema returns the PostgreSQL schema the store lives in.
func (s *Store) Schema() string { return s.schema }

// Pool returns the store's connection pool, for tools that work on its
// tables as a whole (storecopy copies a SQLite store into them).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close stops the listener and closes the pool; closing twice is safe.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.lis != nil {
			s.lis.stop()
		}
		s.leadersMu.Lock()
		for _, l := range s.leaders {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = l.Resign(ctx)
			cancel()
		}
		s.leadersMu.Unlock()
		s.pool.Close()
	})
	return s.closeErr
}

// querier is a pool, a connection or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// maxTxTries bounds the retries of a transaction that lost a deadlock or a
// serialization race.
const maxTxTries = 8

// tx runs fn in one read-committed transaction and commits it, or rolls it
// back when fn fails. A transaction aborted by a deadlock or a
// serialization failure is run again from the start: fn must only write
// through tx (and reset what it collects).
func (s *Store) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	for try := 1; ; try++ {
		err := pgx.BeginFunc(ctx, s.pool, fn)
		if err == nil {
			return nil
		}
		if try < maxTxTries && retryable(err) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(try) * time.Millisecond):
			}
			continue
		}
		return err
	}
}

// retryable reports a deadlock or a serialization failure.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// uniqueViolation reports a broken unique constraint.
func uniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// rebinds caches queries written with ? placeholders turned into $n.
var rebinds sync.Map

// rebind numbers the ? placeholders of q ($1, $2, ...), outside quotes.
func rebind(q string) string {
	if v, ok := rebinds.Load(q); ok {
		return v.(string)
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	quoted := false
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'':
			quoted = !quoted
		case c == '?' && !quoted:
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	out := b.String()
	rebinds.Store(q, out)
	return out
}

func exec(ctx context.Context, q querier, sql string, args ...any) (int64, error) {
	tag, err := q.Exec(ctx, rebind(sql), args...)
	return tag.RowsAffected(), err
}

func query(ctx context.Context, q querier, sql string, args ...any) (pgx.Rows, error) {
	return q.Query(ctx, rebind(sql), args...)
}

func queryRow(ctx context.Context, q querier, sql string, args ...any) pgx.Row {
	return q.QueryRow(ctx, rebind(sql), args...)
}

// ms converts a time to the stored form: milliseconds since the epoch.
func ms(t time.Time) int64 { return t.UnixMilli() }

// fromMS converts a stored time back, in UTC.
func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

func fromNullMS(v *int64) *time.Time {
	if v == nil {
		return nil
	}
	t := fromMS(*v)
	return &t
}

func nullMS(t *time.Time) *int64 {
	if t == nil || t.IsZero() {
		return nil
	}
	v := ms(*t)
	return &v
}

func nullStr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func nullJSON(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func nullID(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}

func notFound(what string, id any) error {
	return fmt.Errorf("%s %v: %w", what, id, &engine.Error{Code: engine.ENOTFOUND, Message: fmt.Sprintf("%s %v not found", what, id)})
}

func noRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

type scanner interface{ Scan(dest ...any) error }
