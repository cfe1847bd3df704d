package engine

import (
	"context"
	"math"
	"time"
)

// HostRate is the pace a remote host was last seen to accept, as learned by
// the per-host limiter (engine/hostlimit) of some process. It is kept in
// the store so that a restarted process resumes near it instead of from
// slow start.
type HostRate struct {
	// Host is the host as the http processor names it (host[:port]).
	Host string `json:"host"`
	// Rate is the limiter's rate when saved, in requests per second.
	Rate float64 `json:"rate"`
	// Ceiling is the rate at which the host last answered 429 (0: never).
	Ceiling float64 `json:"ceiling,omitempty"`
	// Concurrency is the limiter's limit on requests in flight.
	Concurrency int `json:"concurrency"`
	// UpdatedAt is when the rate was last saved.
	UpdatedAt time.Time `json:"updatedAt"`
}

// RestartFraction is the share of the ceiling a restarted process starts
// at, at most: a rate at or above the ceiling has been answered 429.
const RestartFraction = 0.9

// RestartRate is the rate a restarted process should start the host at:
// the saved rate, but at most RestartFraction of the ceiling.
//
// The saved rate is wherever the limiter's saw-tooth was at the moment of
// the save: just after a halving (safe, but low) or just before the next
// 429, above what the host accepts. Starting above the ceiling would spend
// the host's whole burst at once and be answered with a 429 within the
// first second (halving the rate and pausing the host for its
// Retry-After); 90% of the rate that last drew a 429 is the highest pace
// known to be below it. A host that never answered 429 starts at its
// saved rate, which it accepted.
func (r HostRate) RestartRate() float64 {
	if r.Ceiling > 0 {
		return math.Min(r.Rate, RestartFraction*r.Ceiling)
	}
	return r.Rate
}

// HostRateStore keeps the learned host rates. Part of Store.
type HostRateStore interface {
	// SaveHostRates inserts or replaces the rates by host, each with
	// UpdatedAt = now (the rates' own UpdatedAt is ignored), in one
	// transaction. A rate without a host, or with a rate that is not a
	// positive number, is EINVALID and nothing is saved.
	SaveHostRates(ctx context.Context, rates []HostRate, now time.Time) error
	// LoadHostRates returns every saved rate ordered by host.
	LoadHostRates(ctx context.Context) ([]HostRate, error)
	// DeleteHostRates removes the rates of the given hosts (of every host
	// when none is given) and returns how many were removed.
	DeleteHostRates(ctx context.Context, hosts ...string) (int, error)
}
