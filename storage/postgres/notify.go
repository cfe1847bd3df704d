package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/engine"
)

// Wake-ups (seed 002). A transaction that makes work claimable (enqueue,
// the end of an ingest, a resume, a retry, a reaped lease) sends
// NOTIFY <channel>, 'w'. PostgreSQL delivers a notification only when its
// transaction commits, so a listener never hears of work it cannot see
// yet. The payload is a poke, not data: the tables stay the truth, and a
// lost notification costs latency (the runner's fallback poll finds the
// work), never work.
//
// Claims and plain completions send none: NOTIFY serialises the commits of
// notifying transactions on one server-wide lock, which the hot path cannot
// afford. Every write takes a number from the changes sequence instead,
// which ChangeCounter reads.
//
// An append to the event outbox sends NOTIFY <channel>, 'e', which wakes
// the event dispatchers subscribed with WakeEventsOn.
const (
	wakeWork   = "w"
	wakeChange = "c"
	wakeEvent  = "e"
)

// notify records a change made by tx and, for kind wakeWork, queues a
// notification for when tx commits (PostgreSQL folds repeats within one
// transaction into one).
func (s *Store) notify(ctx context.Context, tx pgx.Tx, kind string) error {
	if kind == wakeWork {
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2), nextval('changes')`, s.channel, kind)
		return err
	}
	_, err := tx.Exec(ctx, `SELECT nextval('changes')`)
	return err
}

// listener holds the dedicated LISTEN connection of a store. It counts
// every notification (ChangeCounter) and wakes the subscribed notifiers on
// work; it reconnects with backoff, and after each (re)connect it counts
// one change and wakes everyone, because notifications sent while it was
// away are lost: that is the start-up scan.
type listener struct {
	s       *Store
	changes atomic.Int64
	// connected is 1 while the LISTEN connection is up.
	connected atomic.Bool

	mu        sync.Mutex
	notifiers []*engine.Notifier
	// events are woken by outbox appends (and every reconnect).
	events []*engine.Notifier

	cancel context.CancelFunc
	done   chan struct{}
}

// listenBackoff bounds the wait between reconnects.
const (
	listenBackoffMin = 50 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

func startListener(s *Store) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{s: s, cancel: cancel, done: make(chan struct{})}
	go l.loop(ctx)
	return l
}

func (l *listener) stop() {
	l.cancel()
	<-l.done
}

func (l *listener) loop(ctx context.Context) {
	defer close(l.done)
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		err := l.listen(ctx)
		l.connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		_ = err // the next connect tells whether the server is back
		backoff = min(max(2*backoff, listenBackoffMin), listenBackoffMax)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

// listen runs one LISTEN connection until it fails or ctx ends.
func (l *listener) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.s.cfg.ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.s.channel}.Sanitize()); err != nil {
		return err
	}
	l.connected.Store(true)
	l.bump(true)
	l.wakeEvents()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload == wakeEvent {
			l.wakeEvents()
			continue
		}
		l.bump(n.Payload == wakeWork)
	}
}

func (l *listener) wakeEvents() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.events {
		n.Notify()
	}
}

func (l *listener) bump(work bool) {
	l.changes.Add(1)
	if !work {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.notifiers {
		n.Notify()
	}
}

// WakeOn makes every notification of new work, from any process on this
// database, wake the subscribers of n (the workers of this process). It is
// the optional capability app/env.go looks for.
func (s *Store) WakeOn(n *engine.Notifier) {
	if s.lis == nil || n == nil {
		return
	}
	s.lis.mu.Lock()
	s.lis.notifiers = append(s.lis.notifiers, n)
	s.lis.mu.Unlock()
}

// WakeEventsOn makes every append to the event outbox, from any process on
// this database, wake the subscribers of n (the scheduler leader's event
// dispatcher). Like WakeOn, an optional capability app/ looks for.
func (s *Store) WakeEventsOn(n *engine.Notifier) {
	if s.lis == nil || n == nil {
		return
	}
	s.lis.mu.Lock()
	s.lis.events = append(s.lis.events, n)
	s.lis.mu.Unlock()
}

// Listening reports whether the LISTEN connection is up.
func (s *Store) Listening() bool { return s.lis != nil && s.lis.connected.Load() }

// ChangeCounter returns a number that moves whenever any process commits a
// change to the queue: the last number taken from the changes sequence,
// plus the (re)connects of the listener (notifications missed while it was
// away). A writer takes its number just before it commits, so the counter
// can move a moment before the change is visible; the callers look again
// on their next tick while work is unfinished.
func (s *Store) ChangeCounter(ctx context.Context) (int64, error) {
	var v int64
	if err := s.pool.QueryRow(ctx, `SELECT last_value FROM changes`).Scan(&v); err != nil {
		return 0, fmt.Errorf("change counter: %w", err)
	}
	if s.lis != nil {
		v += s.lis.changes.Load()
	}
	return v, nil
}
