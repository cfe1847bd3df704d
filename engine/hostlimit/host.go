package hostlimit

import (
	"math"
	"time"
)

// bucket is a token bucket driven by explicit times, so a fake clock works.
// Tokens may go negative: each reservation takes one token at once and the
// caller waits until the debt is repaid.
type bucket struct {
	rate   float64 // tokens per second
	burst  float64 // capacity
	tokens float64
	last   time.Time
}

// burstFor is the bucket capacity for a rate: 0.2 s worth, at least 1.
func burstFor(rate float64) float64 { return math.Max(1, math.Ceil(rate*burstSeconds)) }

func newBucket(rate float64, now time.Time) bucket {
	b := bucket{rate: rate, burst: burstFor(rate), last: now}
	b.tokens = b.burst
	return b
}

// refill adds the tokens earned since the last call.
func (b *bucket) refill(now time.Time) {
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(b.burst, b.tokens+el*b.rate)
		b.last = now
	}
}

// reserve takes one token and returns how long to wait before using it.
func (b *bucket) reserve(now time.Time) time.Duration {
	b.refill(now)
	b.tokens--
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// unreserve gives back a token taken by reserve and not used.
func (b *bucket) unreserve(now time.Time) {
	b.refill(now)
	b.tokens = math.Min(b.burst, b.tokens+1)
}

// setRate changes the rate from now on; tokens earned so far are kept.
func (b *bucket) setRate(rate float64, now time.Time) {
	b.refill(now)
	b.rate = rate
	b.burst = burstFor(rate)
	b.tokens = math.Min(b.tokens, b.burst)
}

// host is the pacing state of one host. All fields are guarded by Limiter.mu.
type host struct {
	name        string
	bucket      bucket
	conc        int
	inFlight    int
	pausedUntil time.Time
	changed     chan struct{} // closed and replaced when waiters should look again

	slowStart    bool
	ceiling      float64   // rate at the last 429; 0 if none yet
	lastDecrease time.Time // time of the last multiplicative decrease

	// Current window.
	winStart     time.Time
	outcomes     int
	rateLimited  int
	errs         int // ServerError, Timeout, NetworkError
	acquired     int
	bucketWaited bool
	slotWaited   bool
	peakInFlight int

	// Totals since the host was first seen.
	totalOK, totalRateLimited, totalErrors int64
}

func newHost(name string, c *Config, now time.Time) *host {
	return &host{
		name:      name,
		bucket:    newBucket(c.InitialRate, now),
		conc:      c.InitialConcurrency,
		changed:   make(chan struct{}),
		slowStart: true,
		winStart:  now,
	}
}

// signal wakes every waiter of the host so it re-checks its conditions.
func (h *host) signal() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// roll closes the current window if Window has passed, adapting the limits
// to what it saw, and starts a new window aligned to the old one.
func (h *host) roll(c *Config, now time.Time) {
	el := now.Sub(h.winStart)
	if el < c.Window {
		return
	}
	h.adapt(c, now)
	h.winStart = h.winStart.Add(el / c.Window * c.Window)
	h.outcomes, h.rateLimited, h.errs, h.acquired = 0, 0, 0, 0
	h.bucketWaited, h.slotWaited = false, false
	h.peakInFlight = h.inFlight
}

// adapt applies the end-of-window rules to the window just closed.
func (h *host) adapt(c *Config, now time.Time) {
	if h.outcomes == 0 || h.rateLimited > 0 {
		return // nothing learned, or the 429 rule already acted
	}
	if h.errs > 0 {
		if float64(h.errs) >= errorShare*float64(h.outcomes) {
			h.decrease(c, now, errorFactor)
		}
		return
	}
	rate := h.bucket.rate
	if h.bucketWaited || float64(h.acquired) >= 0.5*rate*c.Window.Seconds() {
		switch {
		case h.slowStart:
			rate *= slowStartFactor
		case h.ceiling > 0 && rate < recoverTarget*h.ceiling:
			rate += math.Max(c.AdditiveStep, (recoverTarget*h.ceiling-rate)/2)
		default:
			rate += c.AdditiveStep
		}
		h.setRate(c, rate, now)
	}
	if h.slotWaited || h.peakInFlight >= h.conc {
		h.setConc(c, h.conc+1)
	}
}

// record counts one outcome in the current window and applies the
// immediate 429 rule.
func (h *host) record(c *Config, o Outcome, now time.Time) {
	h.outcomes++
	switch o {
	case OK, ClientError:
		if o == OK {
			h.totalOK++
		} else {
			h.totalErrors++
		}
	case RateLimited:
		h.rateLimited++
		h.totalRateLimited++
		if h.canDecrease(c, now) {
			h.ceiling = h.bucket.rate
		}
		h.decrease(c, now, rateLimitedFactor)
	default:
		h.errs++
		h.totalErrors++
	}
}

func (h *host) canDecrease(c *Config, now time.Time) bool {
	return h.lastDecrease.IsZero() || now.Sub(h.lastDecrease) >= c.Window
}

// decrease multiplies rate and concurrency by f, at most once per Window.
func (h *host) decrease(c *Config, now time.Time, f float64) {
	if !h.canDecrease(c, now) {
		return
	}
	h.lastDecrease = now
	h.slowStart = false
	h.setRate(c, h.bucket.rate*f, now)
	h.setConc(c, int(float64(h.conc)*f))
}

func (h *host) setRate(c *Config, rate float64, now time.Time) {
	h.bucket.setRate(clampF(rate, c.MinRate, c.MaxRate), now)
}

func (h *host) setConc(c *Config, n int) {
	n = clampI(n, c.MinConcurrency, c.MaxConcurrency)
	if n > h.conc {
		defer h.signal()
	}
	h.conc = n
}
