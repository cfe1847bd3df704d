package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"time"

	msqlite "modernc.org/sqlite"
)

// The write connection is the driver's connection wrapped in a stmtConn,
// which keeps statements prepared on it for the store's raw writes (run on
// the driver connection through database/sql's Conn.Raw, without its
// per-call work) and finalizes them when database/sql closes the
// connection: when it discards one (after an interrupted statement, say),
// the statements go with it, never used or finalized after it is closed.
// Everything else is the driver's.

// writeConnector opens stmtConns with the driver's connector.
type writeConnector struct{ base driver.Connector }

func newWriteConnector(dsn string) (writeConnector, error) {
	base, err := msqlite.NewConnector(dsn)
	return writeConnector{base: base}, err
}

func (c writeConnector) Connect(ctx context.Context) (driver.Conn, error) {
	inner, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	dc, ok := inner.(driverConn)
	if !ok {
		inner.Close()
		return nil, errors.New("the sqlite driver's connection lacks a method the store needs")
	}
	return &stmtConn{driverConn: dc}, nil
}

func (c writeConnector) Driver() driver.Driver { return c.base.Driver() }

// driverConn is what the store uses of the driver's connection.
type driverConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.SessionResetter
	driver.Validator
	driver.Pinger
}

// stmtConn is a driver connection with a cache of prepared statements.
// database/sql uses a connection from one goroutine at a time, so the cache
// needs no lock.
type stmtConn struct {
	driverConn
	stmts map[string]driver.Stmt
}

// Unwrap returns the driver's connection (the driver's own helpers look
// through wrappers with it).
func (c *stmtConn) Unwrap() driver.Conn { return c.driverConn }

// stmt returns query prepared on this connection, preparing it once.
func (c *stmtConn) stmt(ctx context.Context, query string) (driver.Stmt, error) {
	if st, ok := c.stmts[query]; ok {
		return st, nil
	}
	st, err := c.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if c.stmts == nil {
		c.stmts = map[string]driver.Stmt{}
	}
	c.stmts[query] = st
	return st, nil
}

// exec runs query (prepared once) with args (driver values).
func (c *stmtConn) exec(ctx context.Context, query string, args ...any) (driver.Result, error) {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.(driver.StmtExecContext).ExecContext(ctx, appendValues(nil, args...))
}

// probe runs one-row queries on the connection for checkDedupe: nil when
// the query found a row, sql.ErrNoRows when not.
func (c *stmtConn) probe(ctx context.Context) func(query string, args ...any) error {
	return func(query string, args ...any) error {
		st, err := c.stmt(ctx, query)
		if err != nil {
			return err
		}
		rows, err := st.(driver.StmtQueryContext).QueryContext(ctx, appendValues(nil, args...))
		if err != nil {
			return err
		}
		err = rows.Next(make([]driver.Value, len(rows.Columns())))
		// Closing resets the statement; its error is the statement's.
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		if errors.Is(err, io.EOF) {
			return sql.ErrNoRows
		}
		return err
	}
}

// Close finalizes the cached statements, then closes the connection.
func (c *stmtConn) Close() error {
	var errs []error
	for _, st := range c.stmts {
		errs = append(errs, st.Close())
	}
	c.stmts = nil
	return errors.Join(append(errs, c.driverConn.Close())...)
}

// rawTx runs fn in one write transaction on the write connection's driver
// connection (database/sql's Conn.Raw), counted in the writer's busy time
// as tx's are. A connection whose transaction could not be ended is
// discarded.
func (s *Store) rawTx(ctx context.Context, fn func(wc *stmtConn) error) error {
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		wc, ok := dc.(*stmtConn)
		if !ok {
			return fmt.Errorf("the write connection is a %T, not the store's", dc)
		}
		tx, err := wc.BeginTx(ctx, driver.TxOptions{})
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer func(start time.Time) { s.fullBusy.Add(int64(time.Since(start))) }(time.Now())
		if err := fn(wc); err != nil {
			if rerr := tx.Rollback(); rerr != nil {
				return errors.Join(err, rerr, driver.ErrBadConn)
			}
			return err
		}
		if err := tx.Commit(); err != nil {
			// Whether SQLite ended the transaction or not, the connection
			// must not go back to the pool inside one.
			return errors.Join(fmt.Errorf("commit: %w", err), driver.ErrBadConn)
		}
		return nil
	})
}
