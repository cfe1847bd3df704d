package adapt

import (
	"sync"
	"time"
)

// Point is one timestamped sample of a Series.
type Point struct {
	// T is when the sample was taken.
	T time.Time `json:"t"`
	// V is the sampled value.
	V float64 `json:"v"`
}

// Series is a fixed-size ring of timestamped samples, kept for plots in the
// UI: once full, each new sample replaces the oldest. It is safe for
// concurrent use.
type Series struct {
	mu   sync.Mutex
	buf  []Point
	next int // index of the slot the next sample goes to
	full bool
}

// SeriesSnapshot is a point-in-time copy of a Series.
type SeriesSnapshot struct {
	// Capacity is the number of samples the series keeps.
	Capacity int `json:"capacity"`
	// Points are the samples, oldest first.
	Points []Point `json:"points"`
}

// NewSeries returns an empty series keeping the last capacity samples; a
// capacity below 1 counts as 1.
func NewSeries(capacity int) *Series {
	return &Series{buf: make([]Point, max(capacity, 1))}
}

// Add appends the sample v taken at t, evicting the oldest sample once the
// series is full. NaN and infinite values are ignored, since JSON cannot
// carry them.
func (s *Series) Add(t time.Time, v float64) {
	if !finite(v) {
		return
	}
	s.mu.Lock()
	s.buf[s.next] = Point{T: t, V: v}
	s.next++
	if s.next == len(s.buf) {
		s.next, s.full = 0, true
	}
	s.mu.Unlock()
}

// Points returns a copy of the samples in the order they were added, oldest
// first; never nil.
func (s *Series) Points() []Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.points()
}

// PointsSince returns the samples taken after t, oldest first; never nil.
// A client that keeps the time of the last point it has asks only for what
// came since.
func (s *Series) PointsSince(t time.Time) []Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.points()
	i := 0
	for i < len(ps) && !ps[i].T.After(t) {
		i++
	}
	return ps[i:]
}

// points copies the samples; it must be called with s.mu held.
func (s *Series) points() []Point {
	if !s.full {
		return append([]Point{}, s.buf[:s.next]...)
	}
	out := make([]Point, 0, len(s.buf))
	out = append(out, s.buf[s.next:]...)
	return append(out, s.buf[:s.next]...)
}

// Len returns the number of samples held.
func (s *Series) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.full {
		return len(s.buf)
	}
	return s.next
}

// Cap returns the number of samples the series keeps.
func (s *Series) Cap() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buf)
}

// Snapshot returns a copy of the current state.
func (s *Series) Snapshot() SeriesSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SeriesSnapshot{Capacity: len(s.buf), Points: s.points()}
}
