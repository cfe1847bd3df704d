package adapt

import (
	"errors"
	"time"
)

// Defaults of LeaseConfig.
const (
	DefaultLeaseFloor = 30 * time.Second
	DefaultLeaseCap   = 10 * time.Minute
)

// LeaseConfig bounds the lease of claimed items. A zero field takes its
// default.
type LeaseConfig struct {
	// Floor is the shortest lease (LEASE_FLOOR, default 30s).
	Floor time.Duration
	// Cap is the longest lease (LEASE_CAP, default 10m).
	Cap time.Duration
}

// WithDefaults returns c with every zero field set to its default. A
// default never contradicts a value that was set: an unset Floor is at most
// Cap and an unset Cap at least Floor.
func (c LeaseConfig) WithDefaults() LeaseConfig {
	switch {
	case c.Floor == 0 && c.Cap == 0:
		c.Floor, c.Cap = DefaultLeaseFloor, DefaultLeaseCap
	case c.Floor == 0:
		c.Floor = DefaultLeaseFloor
		if c.Cap > 0 {
			c.Floor = min(c.Floor, c.Cap)
		}
	case c.Cap == 0:
		c.Cap = max(DefaultLeaseCap, c.Floor)
	}
	return c
}

// Validate reports every problem of c once defaults are applied, as
// *ConfigError values joined with errors.Join; nil means c is usable.
func (c LeaseConfig) Validate() error {
	c = c.WithDefaults()
	var errs []error
	if c.Floor <= 0 {
		errs = append(errs, configErrorf(FieldLeaseFloor, "must be > 0 (got %s)", c.Floor))
	}
	if c.Cap <= 0 {
		errs = append(errs, configErrorf(FieldLeaseCap, "must be > 0 (got %s)", c.Cap))
	}
	if c.Floor > 0 && c.Cap > 0 && c.Floor > c.Cap {
		errs = append(errs, configErrorf(FieldLeaseFloor, "(%s) must be ≤ %s (%s)", c.Floor, FieldLeaseCap, c.Cap))
	}
	return errors.Join(errs...)
}

// sanitize returns c with defaults applied and non-positive bounds replaced
// by their defaults.
func (c LeaseConfig) sanitize() LeaseConfig {
	c = c.WithDefaults()
	if c.Cap <= 0 {
		c.Cap = max(DefaultLeaseCap, c.Floor)
	}
	if c.Floor <= 0 {
		c.Floor = min(DefaultLeaseFloor, c.Cap)
	}
	return c
}

// Lease returns the lease to take on a claim of claimed items spread over
// concurrency workers whose items take avgItem each on average:
//
//	clamp(2 × avgItem × ⌈claimed / concurrency⌉, Floor, Cap)
//
// ⌈claimed / concurrency⌉ × avgItem is the expected time to finish
// everything claimed in one go: claimed items wait in a local queue, so the
// last item of a claim may start only after the others ahead of it on its
// worker. The factor 2 is headroom for variance. (A lease of 2 × avgItem
// alone would suffice only if every item started as soon as it was
// claimed.) Items still running when half their lease is gone are renewed;
// see RenewAfter.
//
// c takes its defaults first, and a non-positive Floor or Cap takes its
// default too. A non-positive avgItem or claimed gives Floor; a concurrency
// below 1 counts as 1. The result is never below Floor, even for an invalid
// config whose Floor exceeds Cap, since expiring a lease too early is worse
// than holding it too long.
func Lease(c LeaseConfig, avgItem time.Duration, claimed, concurrency int) time.Duration {
	c = c.sanitize()
	concurrency = max(concurrency, 1)
	var d time.Duration
	if avgItem > 0 && claimed > 0 {
		rounds := (claimed + concurrency - 1) / concurrency
		// Compare in float64 so that huge products saturate instead of
		// overflowing.
		if f := 2 * float64(avgItem) * float64(rounds); f >= float64(c.Cap) {
			d = c.Cap
		} else {
			d = time.Duration(f)
		}
	}
	return max(min(d, c.Cap), c.Floor)
}

// RenewAfter returns how long after taking (or renewing) a lease of length
// lease an item still running should renew it: half the lease, so that one
// missed renewal still leaves time for another. A non-positive lease gives
// 0.
func RenewAfter(lease time.Duration) time.Duration {
	return max(lease/2, 0)
}
