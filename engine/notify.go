package engine

import (
	"sync"
	"time"
)

// Clock tells the time. Engine logic never calls time.Now directly, so tests
// can control it.
type Clock interface {
	Now() time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns the current time.
func (SystemClock) Now() time.Time { return time.Now() }

// Notifier wakes idle workers in this process at once when work arrives.
// Notify never blocks: each subscriber has a one-slot channel, and a wake-up
// that finds the slot full is already pending.
type Notifier struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
	// direct are the runners that take items claimed by an enqueue
	// (enqueue_direct.go).
	direct directRunners
}

// NewNotifier returns a notifier with no subscribers.
func NewNotifier() *Notifier { return &Notifier{subs: map[chan struct{}]struct{}{}} }

// Subscribe returns a channel that receives a value after each Notify, and
// a function to unsubscribe.
func (n *Notifier) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	n.subs[ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.subs, ch)
		n.mu.Unlock()
	}
}

// Notify wakes every subscriber.
func (n *Notifier) Notify() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
