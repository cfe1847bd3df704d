package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps prepared statements of the read pool by query text. The
// driver prepares nothing by itself, and parsing a query costs as much as
// running a short one: a grid page runs up to six of them.
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// maxCachedStmts bounds the cache; queries are built from a few templates,
// so it is never reached in practice.
const maxCachedStmts = 256

func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	if len(c.m) < maxCachedStmts {
		c.m[query] = st
	}
	return st, nil
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}

// cachedReader runs single-row reads of the read pool through the cache.
type cachedReader struct{ s *Store }

func (r cachedReader) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := r.s.reads.get(ctx, query)
	if err != nil {
		// An unpreparable query fails the same way when run directly,
		// which returns a Row carrying the error.
		return r.s.r.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// lookup returns a cached statement without preparing one.
func (c *stmtCache) lookup(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[query]
}

// writeCachedSQL are the write-connection statements prepared at open
// (see prepare) and run by txExec and txQueryRow.
var writeCachedSQL = []string{fireDueSQL, fireEventSQL, fireResultSQL, fireManySQL, appendEventSQL, markEventDoneSQL,
	dedupeActiveSQL, dedupeWindowSQL, activeDedupeSQL, jobCountersSQL}

// txExec runs a statement prepared at open in tx (unprepared when it is
// not one of writeCachedSQL).
func (s *Store) txExec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if st := s.writes.lookup(query); st != nil {
		return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// txQuery is txExec for a read (or a write RETURNING rows).
func (s *Store) txQuery(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	if st := s.writes.lookup(query); st != nil {
		return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, query, args...)
}

// txQueryRow is txExec for a single-row read.
func (s *Store) txQueryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	if st := s.writes.lookup(query); st != nil {
		return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, query, args...)
}
