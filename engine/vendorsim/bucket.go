package vendorsim

import (
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"
)

// bucket is a token bucket: it holds at most burst tokens and gains rate
// tokens per second. A request takes one token or is refused with the time
// until the next token.
type bucket struct {
	mu     sync.Mutex
	rate   float64 // tokens per second; 0 = unlimited
	burst  float64
	tokens float64
	last   time.Time
}

// newBucket returns a full bucket. A rate of 0 or less means unlimited; a
// burst below 1 means one token.
func newBucket(rate float64, burst int, now time.Time) *bucket {
	b := &bucket{last: now}
	b.set(rate, burst)
	b.tokens = b.burst
	return b
}

// defaultBurst is the burst used when the configuration leaves it out: one
// second's worth of tokens, at least one.
func defaultBurst(rate float64) int {
	if rate < 1 {
		return 1
	}
	return int(math.Ceil(rate))
}

// set changes the rate and burst, keeping the tokens already there (capped
// to the new burst).
func (b *bucket) set(rate float64, burst int) {
	if burst < 1 {
		burst = defaultBurst(rate)
	}
	b.rate = rate
	b.burst = float64(burst)
	if b.tokens > b.burst {
		b.tokens = b.burst
	}
}

// setRate changes the rate at now, refilling first at the old rate.
func (b *bucket) setRate(rate float64, burst int, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	b.set(rate, burst)
}

// refill adds the tokens earned since the last call. Callers hold mu.
func (b *bucket) refill(now time.Time) {
	if now.After(b.last) {
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
}

// take takes one token at now. When none is left it returns false and the
// time until one will be.
func (b *bucket) take(now time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rate <= 0 {
		return true, 0
	}
	b.refill(now)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
	return false, wait
}

// tooMany answers 429 with the wait in a Retry-After header.
func (s *Server) tooMany(w http.ResponseWriter, wait time.Duration) {
	secs := int((wait + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	if s.cfg.RetryAfterDate {
		at := s.cfg.Now().Add(time.Duration(secs) * time.Second)
		w.Header().Set("Retry-After", at.UTC().Format(http.TimeFormat))
	} else {
		w.Header().Set("Retry-After", fmt.Sprint(secs))
	}
	s.fail(w, http.StatusTooManyRequests, "rate limit exceeded")
}
