package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sluicehq/sluice/engine"
)

// AppendEvents stores events in the outbox.
func (s *Store) AppendEvents(ctx context.Context, p *engine.AppendEventsParams) error {
	if len(p.Events) == 0 {
		return nil
	}
	// Without its own fsync (lightTx): the append survives a crash of the
	// process (it is in the WAL), and the next FULL commit, at the latest
	// the leader's fire of this very event, syncs it; only a power failure
	// in between loses it. One fsync less on the event → job path.
	err := s.lightTx(ctx, func(tx *sql.Tx) error {
		for _, ev := range p.Events {
			data, err := engine.EncodeEventData(ev.Data)
			if err != nil {
				return fmt.Errorf("event %s: %w", ev.Name, err)
			}
			if _, err := s.txExec(ctx, tx, appendEventSQL, ev.Name, ev.Subject, data, p.Origin, ms(ev.At), ms(p.Now)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("append events: %w", err)
	}
	return nil
}

const appendEventSQL = `INSERT INTO event_outbox (name, subject, data, origin, at, created_at) VALUES (?, ?, ?, ?, ?, ?)`

// PendingEvents returns the oldest pending events.
func (s *Store) PendingEvents(ctx context.Context, p *engine.PendingEventsParams) ([]*engine.StoredEvent, error) {
	rows, err := s.r.QueryContext(ctx, engine.PendingEventsSQL, max(p.Limit, 1))
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

const markEventDoneSQL = `UPDATE event_outbox SET done_at = ? WHERE id = ? AND done_at IS NULL`

// MarkEventsDone marks events handled.
func (s *Store) MarkEventsDone(ctx context.Context, p *engine.MarkEventsDoneParams) error {
	if len(p.IDs) == 0 {
		return nil
	}
	err := s.lightTx(ctx, func(tx *sql.Tx) error {
		for _, id := range p.IDs {
			if _, err := s.txExec(ctx, tx, markEventDoneSQL, ms(p.Now), id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("mark events done: %w", err)
	}
	return nil
}

// PruneEvents deletes events done before p.Before.
func (s *Store) PruneEvents(ctx context.Context, p *engine.PruneEventsParams) (int, error) {
	var n int64
	err := s.lightTx(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM event_outbox WHERE done_at IS NOT NULL AND done_at < ?`, ms(p.Before))
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	return int(n), nil
}
