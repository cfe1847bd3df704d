package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// SaveHostRates upserts the rates in one transaction. Its commit skips the
// fsync: a learned rate lost to a power failure costs a slower start, no
// correctness.
func (s *Store) SaveHostRates(ctx context.Context, rates []engine.HostRate, now time.Time) error {
	for i := range rates {
		if err := rates[i].Validate(); err != nil {
			return err
		}
	}
	if len(rates) == 0 {
		return nil
	}
	err := s.lightTx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO host_rates (host, rate, ceiling, concurrency, updated_at)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (host) DO UPDATE SET rate = excluded.rate, ceiling = excluded.ceiling,
				concurrency = excluded.concurrency, updated_at = excluded.updated_at`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, r := range rates {
			if _, err := st.ExecContext(ctx, r.Host, r.Rate, r.Ceiling, r.Concurrency, ms(now)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save host rates: %w", err)
	}
	return nil
}

// LoadHostRates returns every saved rate ordered by host.
func (s *Store) LoadHostRates(ctx context.Context) ([]engine.HostRate, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT host, rate, ceiling, concurrency, updated_at FROM host_rates ORDER BY host`)
	if err != nil {
		return nil, fmt.Errorf("load host rates: %w", err)
	}
	defer rows.Close()
	var out []engine.HostRate
	for rows.Next() {
		var r engine.HostRate
		var at int64
		if err := rows.Scan(&r.Host, &r.Rate, &r.Ceiling, &r.Concurrency, &at); err != nil {
			return nil, fmt.Errorf("load host rates: %w", err)
		}
		r.UpdatedAt = fromMS(at)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load host rates: %w", err)
	}
	return out, nil
}

// DeleteHostRates removes the rates of hosts, or all of them.
func (s *Store) DeleteHostRates(ctx context.Context, hosts ...string) (int, error) {
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if len(hosts) == 0 {
			res, err := tx.ExecContext(ctx, `DELETE FROM host_rates`)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		}
		for _, h := range hosts {
			res, err := tx.ExecContext(ctx, `DELETE FROM host_rates WHERE host = ?`, h)
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += k
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete host rates: %w", err)
	}
	return int(n), nil
}
