package adapt

import (
	"fmt"
	"sync"
)

// ewma is the unsynchronised core shared by EWMA and the controllers, which
// guard it with their own mutex.
type ewma struct {
	alpha  float64
	value  float64
	count  int64
	seeded bool
}

// observe folds v into the average; non-finite values are ignored.
func (e *ewma) observe(v float64) {
	if !finite(v) {
		return
	}
	if e.seeded {
		e.value += e.alpha * (v - e.value)
	} else {
		e.value, e.seeded = v, true
	}
	e.count++
}

// set replaces the average; non-finite values are ignored.
func (e *ewma) set(v float64) {
	if !finite(v) {
		return
	}
	e.value, e.seeded = v, true
}

// EWMA is an exponentially weighted moving average. The first observation
// sets the value directly; each later observation v moves it by
// alpha × (v − value). It is safe for concurrent use.
type EWMA struct {
	mu sync.Mutex
	e  ewma
}

// EWMASnapshot is a point-in-time copy of an EWMA.
type EWMASnapshot struct {
	// Value is the current average.
	Value float64 `json:"value"`
	// Count is the number of observations folded in.
	Count int64 `json:"count"`
	// Alpha is the smoothing factor.
	Alpha float64 `json:"alpha"`
}

// NewEWMA returns an empty average with smoothing factor alpha, the weight
// of each new observation (for example 0.2). alpha must be in (0, 1];
// NewEWMA panics otherwise, as that is a programming error.
func NewEWMA(alpha float64) *EWMA {
	if !(alpha > 0 && alpha <= 1) {
		panic(fmt.Sprintf("adapt: EWMA alpha must be in (0, 1], got %v", alpha))
	}
	return &EWMA{e: ewma{alpha: alpha}}
}

// Observe folds v into the average. NaN and infinite values are ignored and
// not counted, so one bad sample cannot poison the average.
func (a *EWMA) Observe(v float64) {
	a.mu.Lock()
	a.e.observe(v)
	a.mu.Unlock()
}

// Value returns the current average, 0 before any observation or Set.
func (a *EWMA) Value() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.e.value
}

// Count returns the number of observations folded in (Set does not count).
func (a *EWMA) Count() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.e.count
}

// Set replaces the average with v, for example to seed it from a persisted
// value. The next observation is then blended with v rather than replacing
// it. NaN and infinite values are ignored.
func (a *EWMA) Set(v float64) {
	a.mu.Lock()
	a.e.set(v)
	a.mu.Unlock()
}

// Snapshot returns a copy of the current state.
func (a *EWMA) Snapshot() EWMASnapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	return EWMASnapshot{Value: a.e.value, Count: a.e.count, Alpha: a.e.alpha}
}
