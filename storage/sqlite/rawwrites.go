package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
)

// rawWrites are the completion's statements prepared on the driver
// connection of the write pool (CompleteItems runs them without
// database/sql). The pool has one connection; should it be replaced (a
// broken connection is discarded), the statements are prepared again on
// the new one.
type rawWrites struct {
	conn     any
	complete driver.StmtExecContext
	done     driver.StmtExecContext
	handOff  driver.StmtExecContext
	runnable driver.StmtQueryContext
	attempts map[int]driver.StmtExecContext
	closers  []driver.Stmt
}

// rawStmtsFor returns the statements of driver connection dc, preparing
// them on first use. Only the write connection's holder calls it.
func (s *Store) rawStmtsFor(ctx context.Context, dc any) (*rawWrites, error) {
	s.rawMu.Lock()
	defer s.rawMu.Unlock()
	if s.raw != nil && s.raw.conn == dc {
		return s.raw, nil
	}
	if s.raw != nil {
		// Its connection is gone; so are its statements.
		s.raw.close()
		s.raw = nil
	}
	pc, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return nil, errors.New("the sqlite driver cannot prepare statements with a context")
	}
	rw := &rawWrites{conn: dc, attempts: map[int]driver.StmtExecContext{}}
	prep := func(q string) (driver.Stmt, error) {
		st, err := pc.PrepareContext(ctx, q)
		if err != nil {
			rw.close()
			return nil, fmt.Errorf("prepare: %w", err)
		}
		rw.closers = append(rw.closers, st)
		return st, nil
	}
	exec := func(q string) (driver.StmtExecContext, error) {
		st, err := prep(q)
		if err != nil {
			return nil, err
		}
		ex, ok := st.(driver.StmtExecContext)
		if !ok {
			rw.close()
			return nil, errors.New("the sqlite driver cannot run statements with a context")
		}
		return ex, nil
	}
	var err error
	if rw.complete, err = exec(completeItemSQL); err != nil {
		return nil, err
	}
	if rw.done, err = exec(doneItemSQL); err != nil {
		return nil, err
	}
	if rw.handOff, err = exec(handOffItemSQL); err != nil {
		return nil, err
	}
	for _, n := range []int{attemptsPerInsert, 10, 1} {
		if rw.attempts[n], err = exec(attemptInsertSQL(n)); err != nil {
			return nil, err
		}
	}
	st, err := prep(jobRunnableSQL)
	if err != nil {
		return nil, err
	}
	if rw.runnable, ok = st.(driver.StmtQueryContext); !ok {
		rw.close()
		return nil, errors.New("the sqlite driver cannot run queries with a context")
	}
	s.raw = rw
	return rw, nil
}

// jobRunnable tells whether a job still takes new attempts (false for a
// job that is gone).
func (rw *rawWrites) jobRunnable(ctx context.Context, jobID int64) (bool, error) {
	rows, err := rw.runnable.QueryContext(ctx, []driver.NamedValue{{Ordinal: 1, Value: jobID}})
	if err != nil {
		return false, err
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil {
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		return false, err
	}
	n, _ := v[0].(int64)
	return n != 0, nil
}

func (rw *rawWrites) close() {
	for _, st := range rw.closers {
		_ = st.Close()
	}
	rw.closers = nil
}

// closeRaw closes the raw statements (before the write pool closes).
func (s *Store) closeRaw() {
	s.rawMu.Lock()
	defer s.rawMu.Unlock()
	if s.raw != nil {
		s.raw.close()
		s.raw = nil
	}
}
