package engine

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Event is something that happened in Sluice that triggers can react to.
type Event struct {
	Name string `json:"name"`
	// Subject names what it happened to ("job:12", "source-object:3"); it
	// is part of an event trigger's dedupe key.
	Subject string `json:"subject"`
	At      time.Time
	// Data is the event's context for payload templates ({{.event.jobId}}).
	Data map[string]any `json:"data,omitempty"`
}

// Events carries events from where they happen to the event triggers of
// this process. Publish never blocks: a subscriber whose buffer is full
// loses the event (counted in Dropped).
type Events struct {
	mu      sync.RWMutex
	subs    map[chan Event]struct{}
	dropped atomic.Int64
}

// NewEvents returns an event bus with no subscribers.
func NewEvents() *Events { return &Events{subs: map[chan Event]struct{}{}} }

// Subscribe returns a channel of events (buffered by n) and a function
// that unsubscribes.
func (e *Events) Subscribe(n int) (<-chan Event, func()) {
	ch := make(chan Event, n)
	e.mu.Lock()
	e.subs[ch] = struct{}{}
	e.mu.Unlock()
	return ch, func() {
		e.mu.Lock()
		delete(e.subs, ch)
		e.mu.Unlock()
	}
}

// Active reports whether anyone listens (publishers may skip building
// events nobody reads).
func (e *Events) Active() bool {
	if e == nil {
		return false
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	return len(e.subs) > 0
}

// Publish hands an event to every subscriber. A nil bus drops it.
func (e *Events) Publish(ev Event) {
	if e == nil {
		return
	}
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	for ch := range e.subs {
		select {
		case ch <- ev:
		default:
			e.dropped.Add(1)
		}
	}
}

// Dropped is the number of events a full subscriber lost.
func (e *Events) Dropped() int64 { return e.dropped.Load() }

// JobEvent builds a job.* event: its data are the job's id, pipeline,
// name, state, source and counts.
func JobEvent(name string, j *Job, at time.Time) Event {
	return Event{Name: name, Subject: "job:" + strconv.FormatInt(j.ID, 10), At: at, Data: map[string]any{
		"jobId": j.ID, "pipeline": j.Pipeline, "name": j.Name, "state": string(j.State), "source": j.Source,
		"sourceRef": j.SourceRef, "total": j.TotalItems, "done": j.Counts.Done, "failed": j.Counts.Failed(),
		"lastError": j.LastError,
	}}
}
