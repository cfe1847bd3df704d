package adapt

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalidConfig matches, through errors.Is, every error returned by the
// Validate methods of this package.
var ErrInvalidConfig = errors.New("invalid adaptive configuration")

// ConfigError describes one invalid configuration setting. Validate methods
// return one ConfigError per problem, joined with errors.Join; errors.As
// finds the first.
type ConfigError struct {
	// Field is the name of the setting at fault, such as "INGEST_MIN_ROWS".
	Field string
	// Message is the whole human-readable explanation; it starts with Field.
	Message string
}

// Error implements error.
func (e *ConfigError) Error() string { return e.Message }

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// configErrorf returns a *ConfigError for field; the message is field
// followed by the formatted text.
func configErrorf(field, format string, args ...any) *ConfigError {
	return &ConfigError{Field: field, Message: field + " " + fmt.Sprintf(format, args...)}
}

// Names of the settings, as used in validation messages.
const (
	FieldIngestStartRows     = "INGEST_START_ROWS"
	FieldIngestMinRows       = "INGEST_MIN_ROWS"
	FieldIngestMaxRows       = "INGEST_MAX_ROWS"
	FieldIngestMaxBatchBytes = "INGEST_MAX_BATCH_BYTES"
	FieldIngestTargetP50     = "INGEST_TARGET_P50"
	FieldIngestTargetP95     = "INGEST_TARGET_P95"
	FieldClaimTargetSlice    = "CLAIM_TARGET_SLICE"
	FieldClaimMin            = "CLAIM_MIN"
	FieldClaimMax            = "CLAIM_MAX"
	FieldClaimSafety         = "CLAIM_SAFETY"
	FieldClaimConcurrency    = "CLAIM_CONCURRENCY"
	FieldLeaseFloor          = "LEASE_FLOOR"
	FieldLeaseCap            = "LEASE_CAP"
)

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// clampInt returns v limited to [lo, hi]; lo wins if lo > hi.
func clampInt(v, lo, hi int) int {
	if v > hi {
		v = hi
	}
	if v < lo {
		v = lo
	}
	return v
}
