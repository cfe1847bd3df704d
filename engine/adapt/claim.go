package adapt

import (
	"errors"
	"math"
	"sync"
	"time"
)

// Defaults of ClaimConfig.
const (
	DefaultClaimTargetSlice = 5 * time.Second
	DefaultClaimMin         = 1
	DefaultClaimMax         = 1000
	DefaultClaimSafety      = 0.7
	DefaultClaimConcurrency = 1
)

// ClaimItemAlpha is the smoothing factor of the per-item duration average
// kept by Claim.
const ClaimItemAlpha = 0.1

// MinPressure is the smallest pressure multiplier SetPressure accepts;
// lower values are raised to it.
const MinPressure = 0.01

// ClaimConfig bounds the claim-size controller. A zero field takes its
// default.
type ClaimConfig struct {
	// TargetSlice is the amount of work one claim should represent
	// (CLAIM_TARGET_SLICE, default 5s).
	TargetSlice time.Duration
	// Min and Max bound the number of items per claim (CLAIM_MIN, default 1;
	// CLAIM_MAX, default 1000).
	Min, Max int
	// Safety scales the computed size down to leave headroom, in (0, 1]
	// (CLAIM_SAFETY, default 0.7).
	Safety float64
	// Concurrency is the number of worker goroutines the claimed items are
	// spread over (CLAIM_CONCURRENCY, default 1).
	Concurrency int
}

// WithDefaults returns c with every zero field set to its default. A
// default never contradicts a value that was set: an unset Max is at least
// Min.
func (c ClaimConfig) WithDefaults() ClaimConfig {
	if c.TargetSlice == 0 {
		c.TargetSlice = DefaultClaimTargetSlice
	}
	if c.Min == 0 {
		c.Min = DefaultClaimMin
	}
	if c.Max == 0 {
		c.Max = max(DefaultClaimMax, c.Min)
	}
	if c.Safety == 0 {
		c.Safety = DefaultClaimSafety
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultClaimConcurrency
	}
	return c
}

// Validate reports every problem of c once defaults are applied, as
// *ConfigError values joined with errors.Join; nil means c is usable.
func (c ClaimConfig) Validate() error {
	c = c.WithDefaults()
	var errs []error
	if c.TargetSlice <= 0 {
		errs = append(errs, configErrorf(FieldClaimTargetSlice, "must be > 0 (got %s)", c.TargetSlice))
	}
	if c.Min < 1 {
		errs = append(errs, configErrorf(FieldClaimMin, "must be ≥ 1 (got %d)", c.Min))
	}
	if c.Max < 1 {
		errs = append(errs, configErrorf(FieldClaimMax, "must be ≥ 1 (got %d)", c.Max))
	}
	if c.Min >= 1 && c.Max >= 1 && c.Min > c.Max {
		errs = append(errs, configErrorf(FieldClaimMin, "(%d) must be ≤ %s (%d)", c.Min, FieldClaimMax, c.Max))
	}
	if !(c.Safety > 0 && c.Safety <= 1) {
		errs = append(errs, configErrorf(FieldClaimSafety, "must be in (0, 1] (got %v)", c.Safety))
	}
	if c.Concurrency < 1 {
		errs = append(errs, configErrorf(FieldClaimConcurrency, "must be ≥ 1 (got %d)", c.Concurrency))
	}
	return errors.Join(errs...)
}

// sanitize returns c with defaults applied and every invalid value forced
// into a usable range.
func (c ClaimConfig) sanitize() ClaimConfig {
	c = c.WithDefaults()
	if c.TargetSlice <= 0 {
		c.TargetSlice = DefaultClaimTargetSlice
	}
	c.Min = max(c.Min, 1)
	c.Max = max(c.Max, c.Min)
	switch {
	case !(c.Safety > 0):
		c.Safety = DefaultClaimSafety
	case c.Safety > 1:
		c.Safety = 1
	}
	c.Concurrency = max(c.Concurrency, 1)
	return c
}

// Claim is the claim-size controller of time-sliced workers: it chooses
// how many items one claim takes so that the claim represents about
// TargetSlice of work for the workers it is spread over.
//
// It keeps an EWMA (alpha ClaimItemAlpha) of the time per processed item and
// sizes claims as
//
//	clamp(⌊TargetSlice / avgItem × Concurrency × Safety × pressure⌋, Min, Max)
//
// An average of zero (items faster than the clock resolution) gives Max.
// Before the first observation the size is one item per worker,
// clamp(Concurrency, Min, Max): nothing is known about the items yet, the
// lease of such a claim is only its floor, and the first completions
// calibrate the controller quickly.
//
// Claim is safe for concurrent use.
type Claim struct {
	mu       sync.Mutex
	cfg      ClaimConfig
	item     ewma // item duration in milliseconds
	pressure float64
}

// ClaimSnapshot is a point-in-time copy of a Claim controller.
type ClaimSnapshot struct {
	// Size is the current claim size, as returned by Size.
	Size int `json:"size"`
	// AvgItemMs is the smoothed time per item in milliseconds.
	AvgItemMs float64 `json:"avgItemMs"`
	// Pressure is the current pressure multiplier (1 = none).
	Pressure float64 `json:"pressure"`
	// Observed counts the items observed.
	Observed int64 `json:"observed"`
	// Min, Max and Concurrency are the bounds and worker count in force.
	Min         int `json:"min"`
	Max         int `json:"max"`
	Concurrency int `json:"concurrency"`
	// TargetSliceMs is the configured slice of work per claim.
	TargetSliceMs float64 `json:"targetSliceMs"`
}

// NewClaim returns a controller with no observation and no pressure. It
// applies WithDefaults and forces invalid values into range instead of
// failing; use ClaimConfig.Validate to reject bad configuration.
func NewClaim(c ClaimConfig) *Claim {
	return &Claim{cfg: c.sanitize(), item: ewma{alpha: ClaimItemAlpha}, pressure: 1}
}

// ObserveItem records the processing time of one item. Negative durations
// count as zero.
func (c *Claim) ObserveItem(d time.Duration) {
	ms := float64(max(d, 0)) / float64(time.Millisecond)
	c.mu.Lock()
	c.item.observe(ms)
	c.mu.Unlock()
}

// AvgItem returns the smoothed time per item, 0 before any observation.
func (c *Claim) AvgItem() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return msToDuration(c.item.value)
}

// Size returns the number of items the next claim should take.
func (c *Claim) Size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size()
}

// size computes Size; it must be called with c.mu held.
func (c *Claim) size() int {
	cfg := c.cfg
	if c.item.count == 0 {
		return clampInt(cfg.Concurrency, cfg.Min, cfg.Max)
	}
	avg := c.item.value
	if avg <= 0 {
		return cfg.Max
	}
	slice := float64(cfg.TargetSlice) / float64(time.Millisecond)
	n := slice / avg * float64(cfg.Concurrency) * cfg.Safety * c.pressure
	// The epsilon keeps products such as 50 × 0.7 from flooring to 34.
	n = math.Floor(n + 1e-9)
	if n >= float64(cfg.Max) {
		return cfg.Max
	}
	return clampInt(int(n), cfg.Min, cfg.Max)
}

// SetPressure sets the multiplier applied to the claim size while CPU or
// memory is under pressure: 1 means none, smaller values shrink claims.
// Values are clamped to [MinPressure, 1]; NaN is ignored.
func (c *Claim) SetPressure(f float64) {
	if math.IsNaN(f) {
		return
	}
	f = min(max(f, MinPressure), 1)
	c.mu.Lock()
	c.pressure = f
	c.mu.Unlock()
}

// SetConcurrency changes the number of worker goroutines claims are spread
// over, for when workers are added or removed at run time. Values below 1
// count as 1.
func (c *Claim) SetConcurrency(n int) {
	c.mu.Lock()
	c.cfg.Concurrency = max(n, 1)
	c.mu.Unlock()
}

// Snapshot returns a copy of the current state.
func (c *Claim) Snapshot() ClaimSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ClaimSnapshot{
		Size:          c.size(),
		AvgItemMs:     c.item.value,
		Pressure:      c.pressure,
		Observed:      c.item.count,
		Min:           c.cfg.Min,
		Max:           c.cfg.Max,
		Concurrency:   c.cfg.Concurrency,
		TargetSliceMs: float64(c.cfg.TargetSlice) / float64(time.Millisecond),
	}
}

// msToDuration converts milliseconds to a Duration, saturating at the
// largest Duration.
func msToDuration(ms float64) time.Duration {
	ns := ms * float64(time.Millisecond)
	if ns >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ns)
}
