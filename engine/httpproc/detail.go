package httpproc

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// Detail is what an attempt of the http processor reports; it is stored
// with the attempt (engine.Failure.Detail) when the attempt fails. Secret
// values never appear in it.
type Detail struct {
	// Method is the request's method.
	Method string `json:"method,omitempty"`
	// Status is the HTTP status, 0 when no answer came.
	Status int `json:"status"`
	// DurationMs is the time from sending to the end of the answer.
	DurationMs float64 `json:"durationMs"`
	// URL is the request URL with every secret value replaced by "***";
	// empty when the request could not be built.
	URL string `json:"url,omitempty"`
	// Traceparent is the W3C trace context header sent with the attempt.
	Traceparent string `json:"traceparent"`
	// Variant is the strategy used: 0 for the main request, i+1 for
	// variants[i].
	Variant int `json:"variant"`
}

// marshal encodes the detail.
func (d *Detail) marshal() []byte {
	b, _ := json.Marshal(d)
	return b
}

// IdempotencyKey is the Idempotency-Key header of every attempt of an item at
// a stage: "sluice-<item id>-<stage>".
func IdempotencyKey(it *engine.Item) string {
	return fmt.Sprintf("sluice-%d-%d", it.ID, it.Stage)
}

// NewTraceparent returns a fresh W3C traceparent header value, sampled:
// "00-<32 hex trace id>-<16 hex span id>-01".
func NewTraceparent() string {
	var b [24]byte
	for {
		_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
		if !allZero(b[:16]) && !allZero(b[16:]) {
			break
		}
	}
	return "00-" + hex.EncodeToString(b[:16]) + "-" + hex.EncodeToString(b[16:]) + "-01"
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// ParseRetryAfter reads a Retry-After header: a number of seconds or an
// HTTP date (relative to now; a date in the past gives 0). ok is false when
// the value is absent or unreadable.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d = at.Sub(now)
	if d < 0 {
		return 0, true
	}
	return min(d, maxRetryAfter), true
}

// maxRetryAfter caps what a server may ask for.
const maxRetryAfter = 24 * time.Hour
