// Package hostlimit decides, per remote host, how fast and how many requests
// at once Sluice may send, adapting both to the answers the host gives.
//
// Every host has a token bucket (requests per second, with a small burst) and
// a concurrency limit (requests in flight). Both adapt by AIMD — additive
// increase, multiplicative decrease — once per Config.Window:
//
//   - A window whose outcomes are all healthy (OK or ClientError) and in
//     which the limit was actually used raises the rate by AdditiveStep and
//     the concurrency by one. Before the first congestion signal the host is
//     in "slow start" and the rate grows ×1.5 per window instead. After a
//     decrease the rate climbs back quickly (half the remaining distance per
//     window) towards 90% of the rate at which the last 429 happened, then
//     probes additively above it.
//   - A RateLimited (429) outcome halves the rate and the concurrency at
//     once, at most once per Window.
//   - ServerError, Timeout and NetworkError are ambiguous signals: they are
//     judged when the window closes. If they make up at least 10% of the
//     window's outcomes, rate and concurrency shrink ×0.7 (at most once per
//     Window, shared with the 429 rule); a smaller non-zero share only holds
//     the limits (no increase).
//   - ClientError (4xx other than 429) is neutral: it counts as an outcome
//     of a healthy window.
//
// Retry-After pauses a host for every caller. Adaptation happens lazily
// inside Acquire and release using Config.Now, so no goroutine runs in the
// background and tests can drive the Limiter with a fake clock.
package hostlimit

import (
	"math"
	"time"
)

// Config tunes a Limiter. Zero fields take their documented defaults.
type Config struct {
	// InitialRate is the rate, in requests per second, that an unknown host
	// starts with. Default 5.
	InitialRate float64
	// MinRate and MaxRate bound every host's rate. Defaults 0.5 and 1000.
	MinRate, MaxRate float64
	// AdditiveStep is the rate increase per healthy window. Default
	// InitialRate/10, at least 0.5.
	AdditiveStep float64
	// Window is how often rate and concurrency adapt. Default 1s.
	Window time.Duration
	// InitialConcurrency, MinConcurrency and MaxConcurrency set the starting
	// value and bounds of each host's concurrency limit. Defaults 4, 1, 64.
	InitialConcurrency, MinConcurrency, MaxConcurrency int
	// Now returns the current time. Default time.Now.
	Now func() time.Time
	// After returns a channel that receives once d has passed, like
	// time.After (the default). Tests with a fake clock may advance the
	// clock by d and return a ready channel.
	After func(d time.Duration) <-chan time.Time
}

// Adaptation factors and thresholds; see the package documentation.
const (
	rateLimitedFactor = 0.5  // on a 429
	errorFactor       = 0.7  // on a window with too many 5xx/timeouts/network errors
	errorShare        = 0.10 // share of such outcomes that triggers errorFactor
	slowStartFactor   = 1.5  // growth per healthy window before the first congestion
	recoverTarget     = 0.9  // fast recovery aims at this fraction of the ceiling
	burstSeconds      = 0.2  // bucket burst, in seconds of rate
)

// withDefaults returns c with zero fields replaced by defaults and bounds
// made consistent.
func (c Config) withDefaults() Config {
	if c.MinRate <= 0 {
		c.MinRate = 0.5
	}
	if c.MaxRate <= 0 {
		c.MaxRate = 1000
	}
	if c.MaxRate < c.MinRate {
		c.MaxRate = c.MinRate
	}
	if c.InitialRate <= 0 {
		c.InitialRate = 5
	}
	c.InitialRate = clampF(c.InitialRate, c.MinRate, c.MaxRate)
	if c.AdditiveStep <= 0 {
		c.AdditiveStep = math.Max(0.5, c.InitialRate/10)
	}
	if c.Window <= 0 {
		c.Window = time.Second
	}
	if c.MinConcurrency <= 0 {
		c.MinConcurrency = 1
	}
	if c.MaxConcurrency <= 0 {
		c.MaxConcurrency = 64
	}
	if c.MaxConcurrency < c.MinConcurrency {
		c.MaxConcurrency = c.MinConcurrency
	}
	if c.InitialConcurrency <= 0 {
		c.InitialConcurrency = 4
	}
	c.InitialConcurrency = clampI(c.InitialConcurrency, c.MinConcurrency, c.MaxConcurrency)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.After == nil {
		c.After = time.After
	}
	return c
}

// Outcome is how one request to a host ended, as far as pacing cares.
type Outcome int

// Outcomes reported to the release func returned by Acquire.
const (
	// OK is a successful answer (2xx, 3xx).
	OK Outcome = iota
	// RateLimited is a 429 answer: halve the pace.
	RateLimited
	// ServerError is a 5xx answer.
	ServerError
	// Timeout means no answer came in time.
	Timeout
	// ClientError is a 4xx other than 429; it says nothing about load.
	ClientError
	// NetworkError is a failure to connect or a broken connection.
	NetworkError
)

// String returns the outcome's lower-case name.
func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case RateLimited:
		return "rate_limited"
	case ServerError:
		return "server_error"
	case Timeout:
		return "timeout"
	case ClientError:
		return "client_error"
	case NetworkError:
		return "network_error"
	}
	return "unknown"
}

// OutcomeForStatus maps an HTTP status code to an Outcome: 429 is
// RateLimited, 408 and 504 are Timeout, other 5xx are ServerError, other 4xx
// are ClientError, and everything else is OK.
func OutcomeForStatus(code int) Outcome {
	switch {
	case code == 429:
		return RateLimited
	case code == 408 || code == 504:
		return Timeout
	case code >= 500:
		return ServerError
	case code >= 400:
		return ClientError
	}
	return OK
}

func clampF(v, lo, hi float64) float64 { return math.Min(hi, math.Max(lo, v)) }

func clampI(v, lo, hi int) int { return min(hi, max(lo, v)) }
