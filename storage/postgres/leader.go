package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/engine"
)

// Leadership (seed 003): of all processes on one database, the one that
// holds a session advisory lock is the leader of a duty (the reaper, the
// scheduler). The lock lives as long as its connection: a leader that dies
// or loses its connection lets another take over at its next try.

// Leader is one duty's election. Its methods are safe for concurrent use.
type Leader struct {
	s   *Store
	key int32

	mu   sync.Mutex
	conn *pgxpool.Conn // held while leading
}

// Leader returns the election of the duty name (for example "reaper" or
// "scheduler"); every process must use the same name for the same duty.
// One store has one election per duty: asking twice returns the same one.
func (s *Store) Leader(name string) *Leader {
	s.leadersMu.Lock()
	defer s.leadersMu.Unlock()
	if l, ok := s.leaders[name]; ok {
		return l
	}
	l := &Leader{s: s, key: int32(crc32.ChecksumIEEE([]byte(name)))}
	if s.leaders == nil {
		s.leaders = map[string]*Leader{}
	}
	s.leaders[name] = l
	return l
}

// Elector returns Leader(duty) as an engine.Elector: the capability that
// makes one runner of all processes on this database reap.
func (s *Store) Elector(duty string) engine.Elector { return s.Leader(duty) }

var _ engine.ElectingStore = (*Store)(nil)

// TryLead tries to become (or checks that it still is) the leader, without
// waiting. It returns true while this process leads.
func (l *Leader) TryLead(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		// Still leading if the connection that holds the lock is alive.
		if err := l.conn.Ping(ctx); err == nil {
			return true, nil
		}
		l.conn.Conn().Close(context.Background())
		l.conn.Release()
		l.conn = nil
	}
	conn, err := l.s.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("leader election: %w", err)
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, l.s.lockSpace, l.key).Scan(&got); err != nil {
		conn.Release()
		return false, fmt.Errorf("leader election: %w", err)
	}
	if !got {
		conn.Release()
		return false, nil
	}
	l.conn = conn
	return true, nil
}

// Resign gives up leadership (if held); safe to call twice.
func (l *Leader) Resign(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return nil
	}
	var ok bool
	err := l.conn.QueryRow(ctx, `SELECT pg_advisory_unlock($1, $2)`, l.s.lockSpace, l.key).Scan(&ok)
	if err != nil || !ok {
		// A connection in doubt must not go back to the pool holding a lock.
		l.conn.Conn().Close(context.Background())
		err = errors.Join(err, errors.New("leader lock was not held"))
	}
	l.conn.Release()
	l.conn = nil
	return err
}
