package engine

import (
	"errors"
	"fmt"
	"time"
)

// ErrorClass says how a failed attempt is retried (seed 004).
type ErrorClass string

// Error classes.
const (
	// ClassTransient: timeouts, 5xx, dropped connections. Retried with
	// exponential backoff and jitter.
	ClassTransient ErrorClass = "transient"
	// ClassRateLimited: the other side asked us to slow down. Retried after
	// its Retry-After (or backoff), up to a larger cap.
	ClassRateLimited ErrorClass = "rate_limited"
	// ClassNotFound: the lookup found nothing. Retried only while another
	// query variant remains.
	ClassNotFound ErrorClass = "not_found"
	// ClassPermanent: retrying cannot help (bad input, 4xx). Never retried.
	ClassPermanent ErrorClass = "permanent"
	// ClassPoison: the item crashed or timed out its worker repeatedly
	// (expired leases). Never retried automatically.
	ClassPoison ErrorClass = "poison"
)

// Failure is a classified processing failure returned by processors.
type Failure struct {
	Class ErrorClass
	// RetryAfter is the delay the other side asked for (rate limits).
	RetryAfter time.Duration
	// Detail is stored with the attempt (HTTP status, exit code, ...).
	Detail []byte
	Err    error
}

// Error implements error.
func (e *Failure) Error() string {
	if e.Err == nil {
		return string(e.Class)
	}
	return e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *Failure) Unwrap() error { return e.Err }

// Transient wraps err as a transient failure.
func Transient(err error) error { return &Failure{Class: ClassTransient, Err: err} }

// Permanent wraps err as a permanent failure.
func Permanent(err error) error { return &Failure{Class: ClassPermanent, Err: err} }

// NotFoundf returns a not-found failure with a message.
func NotFoundf(format string, args ...any) error {
	return &Failure{Class: ClassNotFound, Err: fmt.Errorf(format, args...)}
}

// RateLimited wraps err as a rate-limited failure that should wait at least
// after before the next attempt.
func RateLimited(err error, after time.Duration) error {
	return &Failure{Class: ClassRateLimited, RetryAfter: after, Err: err}
}

// ClassOf returns the class of err: the class of an *Failure in its chain,
// transient for anything else (an unclassified error is assumed to be worth
// one more try).
func ClassOf(err error) ErrorClass {
	var ie *Failure
	if errors.As(err, &ie) && ie.Class != "" {
		return ie.Class
	}
	return ClassTransient
}

func asFailure(err error, target **Failure) bool { return errors.As(err, target) }
