package engine

import (
	"errors"
	"math/rand/v2"
	"time"
)

// ClassPolicy bounds the retries of one error class.
type ClassPolicy struct {
	// MaxAttempts is the number of attempts (the first included) after which
	// an item failing with this class becomes terminal. 0 = the default.
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// Delays before retry 1, 2, ...; the last one repeats. Each is jittered
	// by ±Jitter.
	Delays []Duration `json:"delays,omitempty"`
}

// RetryPolicy says, per error class, how often and how late a failed item is
// tried again. Permanent errors are never retried; poison items (leases that
// kept expiring) become ERROR when the transient budget is spent.
type RetryPolicy struct {
	Transient   ClassPolicy `json:"transient,omitzero"`
	RateLimited ClassPolicy `json:"rateLimited,omitzero"`
	// NotFound: MaxAttempts 0 means "until every query variant was tried"
	// (so a processor with no variants makes NOT_FOUND final at once).
	NotFound ClassPolicy `json:"notFound,omitzero"`
	// Jitter is the fraction (0..1) by which delays are spread; nil means
	// the default 0.2, and an explicit 0 means none.
	Jitter *float64 `json:"jitter,omitempty"`
}

// DefaultRetryPolicy returns the defaults: transient up to 5 attempts about
// 1 s, 5 s, 30 s and 2 min apart; rate-limited up to 20 attempts, never
// sooner than Retry-After; not-found once per query variant, 30 s apart.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{
		Transient: ClassPolicy{MaxAttempts: 5, Delays: []Duration{
			Duration(time.Second), Duration(5 * time.Second), Duration(30 * time.Second), Duration(2 * time.Minute)}},
		RateLimited: ClassPolicy{MaxAttempts: 20, Delays: []Duration{
			Duration(2 * time.Second), Duration(10 * time.Second), Duration(30 * time.Second),
			Duration(time.Minute), Duration(5 * time.Minute)}},
		NotFound: ClassPolicy{Delays: []Duration{Duration(30 * time.Second), Duration(5 * time.Minute)}},
		Jitter:   new(0.2),
	}
}

// WithDefaults fills every zero field from DefaultRetryPolicy.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	d := DefaultRetryPolicy()
	fill := func(c *ClassPolicy, def ClassPolicy) {
		if c.MaxAttempts == 0 {
			c.MaxAttempts = def.MaxAttempts
		}
		if len(c.Delays) == 0 {
			c.Delays = def.Delays
		}
	}
	fill(&p.Transient, d.Transient)
	fill(&p.RateLimited, d.RateLimited)
	fill(&p.NotFound, d.NotFound)
	if p.Jitter == nil {
		p.Jitter = d.Jitter
	}
	return p
}

// Decision is what happens to an item after a failed attempt.
type Decision struct {
	// Retry is true when the item goes back to PENDING at RunAt.
	Retry bool
	RunAt time.Time
	// Status is the terminal status when Retry is false.
	Status ItemStatus
	// NextStrategy is the query variant for the next attempt.
	NextStrategy int
}

// Decide applies the policy to an attempt that failed with err. attempts is
// the number of attempts made so far (including this one), strategy the
// variant this attempt used and variants the number of query variants the
// stage has (0 when it has none).
func (p RetryPolicy) Decide(err error, attempts, strategy, variants int, now time.Time, rnd *rand.Rand) Decision {
	p = p.WithDefaults()
	class := ClassOf(err)
	switch class {
	case ClassPermanent, ClassPoison:
		return Decision{Status: ItemError, NextStrategy: strategy}
	case ClassNotFound:
		// Retry only while another variant remains (and, when set, while
		// attempts stay under NotFound.MaxAttempts). The default counts
		// variants, not attempts: a transient failure on the way does
		// not use up a variant.
		max := p.NotFound.MaxAttempts
		if strategy+1 < variants && (max == 0 || attempts < max) {
			return Decision{Retry: true, RunAt: now.Add(p.delay(p.NotFound, attempts, rnd)), NextStrategy: strategy + 1}
		}
		return Decision{Status: ItemNotFound, NextStrategy: strategy}
	case ClassRateLimited:
		if attempts >= p.RateLimited.MaxAttempts {
			return Decision{Status: ItemError, NextStrategy: strategy}
		}
		d := p.delay(p.RateLimited, attempts, rnd)
		var ie *Failure
		if errors.As(err, &ie) && ie.RetryAfter > d {
			d = ie.RetryAfter
		}
		return Decision{Retry: true, RunAt: now.Add(d), NextStrategy: strategy}
	default:
		if attempts >= p.Transient.MaxAttempts {
			return Decision{Status: ItemError, NextStrategy: strategy}
		}
		return Decision{Retry: true, RunAt: now.Add(p.delay(p.Transient, attempts, rnd)), NextStrategy: strategy}
	}
}

// delay is the jittered wait before the retry that follows attempt n (n ≥ 1).
func (p RetryPolicy) delay(c ClassPolicy, n int, rnd *rand.Rand) time.Duration {
	if len(c.Delays) == 0 {
		return time.Second
	}
	i := n - 1
	if i >= len(c.Delays) {
		i = len(c.Delays) - 1
	}
	if i < 0 {
		i = 0
	}
	base := float64(c.Delays[i])
	if rnd != nil && p.Jitter != nil && *p.Jitter > 0 {
		base *= 1 + *p.Jitter*(2*rnd.Float64()-1)
	}
	return time.Duration(base)
}
