package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/engine"
)

// AppendEvents stores events in the outbox and wakes the leader's
// dispatcher (NOTIFY 'e', delivered at commit).
func (s *Store) AppendEvents(ctx context.Context, p *engine.AppendEventsParams) error {
	if len(p.Events) == 0 {
		return nil
	}
	names, subjects, datas, ats := make([]string, len(p.Events)), make([]string, len(p.Events)),
		make([]string, len(p.Events)), make([]int64, len(p.Events))
	for i, ev := range p.Events {
		data, err := engine.EncodeEventData(ev.Data)
		if err != nil {
			return fmt.Errorf("append events: event %s: %w", ev.Name, err)
		}
		names[i], subjects[i], datas[i], ats[i] = ev.Name, ev.Subject, data, ms(ev.At)
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := exec(ctx, tx, `INSERT INTO event_outbox (name, subject, data, origin, at, created_at)
			SELECT n, s, d, ?::text, a, ?::bigint FROM unnest(?::text[], ?::text[], ?::text[], ?::bigint[]) WITH ORDINALITY AS e(n, s, d, a, o)
			ORDER BY o`, p.Origin, ms(p.Now), names, subjects, datas, ats); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, s.channel, wakeEvent)
		return err
	})
	if err != nil {
		return fmt.Errorf("append events: %w", err)
	}
	return nil
}

// PendingEvents returns the oldest pending events.
func (s *Store) PendingEvents(ctx context.Context, p *engine.PendingEventsParams) ([]*engine.StoredEvent, error) {
	rows, err := query(ctx, s.pool, engine.PendingEventsSQL, max(p.Limit, 1))
	if err != nil {
		return nil, fmt.Errorf("pending events: %w", err)
	}
	defer rows.Close()
	var out []*engine.StoredEvent
	for rows.Next() {
		ev, err := engine.ScanStoredEvent(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, rows.Err()
}

// MarkEventsDone marks events handled.
func (s *Store) MarkEventsDone(ctx context.Context, p *engine.MarkEventsDoneParams) error {
	if len(p.IDs) == 0 {
		return nil
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		return markEventsDone(ctx, tx, p.IDs, ms(p.Now))
	})
	if err != nil {
		return fmt.Errorf("mark events done: %w", err)
	}
	return nil
}

func markEventsDone(ctx context.Context, tx pgx.Tx, ids []int64, now int64) error {
	_, err := exec(ctx, tx, `UPDATE event_outbox SET done_at = ? WHERE id = ANY(?) AND done_at IS NULL`, now, ids)
	return err
}

// PruneEvents deletes events done before p.Before.
func (s *Store) PruneEvents(ctx context.Context, p *engine.PruneEventsParams) (int, error) {
	n, err := exec(ctx, s.pool, `DELETE FROM event_outbox WHERE done_at IS NOT NULL AND done_at < ?`, ms(p.Before))
	if err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	return int(n), nil
}
