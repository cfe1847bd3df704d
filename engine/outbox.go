package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// OutboxStore keeps the events that event triggers react to until the
// scheduler leader has handled them, so that an event raised in any
// process (a worker on another machine, a CLI ingest) reaches the triggers.
// Part of AutomationStore; storage/storetest/outbox.go is its contract.
type OutboxStore interface {
	// AppendEvents stores events in order, pending. On PostgreSQL it also
	// wakes the leader (NOTIFY) when the transaction commits.
	AppendEvents(ctx context.Context, p *AppendEventsParams) error
	// PendingEvents returns up to p.Limit pending events in the order they
	// were appended.
	PendingEvents(ctx context.Context, p *PendingEventsParams) ([]*StoredEvent, error)
	// MarkEventsDone marks events handled (already done ones stay as they
	// are). FireTriggers also marks the events its fires name (Fire.EventID)
	// in its own transaction.
	MarkEventsDone(ctx context.Context, p *MarkEventsDoneParams) error
	// PruneEvents deletes events done before p.Before and returns how many.
	PruneEvents(ctx context.Context, p *PruneEventsParams) (int, error)
}

// StoredEvent is an event in the outbox.
type StoredEvent struct {
	ID int64
	Event
	// Origin is the worker id of the process that raised it.
	Origin string
}

// AppendEventsParams are the arguments of OutboxStore.AppendEvents.
type AppendEventsParams struct {
	Events []Event
	Origin string
	Now    time.Time
}

// PendingEventsParams are the arguments of OutboxStore.PendingEvents.
type PendingEventsParams struct {
	Limit int
}

// MarkEventsDoneParams are the arguments of OutboxStore.MarkEventsDone.
type MarkEventsDoneParams struct {
	IDs []int64
	Now time.Time
}

// PruneEventsParams are the arguments of OutboxStore.PruneEvents.
type PruneEventsParams struct {
	Before time.Time
}

// EncodeEventData is an event's context as the stores keep it (JSON).
func EncodeEventData(d map[string]any) (string, error) {
	if len(d) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(d)
	return string(b), err
}

// DecodeEventData reads it back with numbers as written (json.Number), so
// that a template prints 41, not 41.0 or 4.1e+01.
func DecodeEventData(s string) (map[string]any, error) {
	var d map[string]any
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		return nil, err
	}
	return d, nil
}

// PendingEventsSQL selects the oldest pending events in the order
// ScanStoredEvent reads them; both stores run it.
const PendingEventsSQL = `SELECT id, name, subject, data, origin, at FROM event_outbox
		WHERE done_at IS NULL ORDER BY id LIMIT ?`

// ScanStoredEvent reads one row of PendingEventsSQL through scan (the Scan
// of database/sql or pgx rows).
func ScanStoredEvent(scan func(dest ...any) error) (*StoredEvent, error) {
	var ev StoredEvent
	var data string
	var at int64
	if err := scan(&ev.ID, &ev.Name, &ev.Subject, &data, &ev.Origin, &at); err != nil {
		return nil, fmt.Errorf("pending events: %w", err)
	}
	var err error
	if ev.Data, err = DecodeEventData(data); err != nil {
		return nil, fmt.Errorf("pending event %d: %w", ev.ID, err)
	}
	ev.At = time.UnixMilli(at).UTC()
	return &ev, nil
}
