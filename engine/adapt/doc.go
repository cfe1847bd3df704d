// Package adapt holds the adaptive controllers of Sluice.
//
// Sluice is built on "bounds, not fixed constants": rather than hard-coding
// a batch size, a claim size or a lease length, each value moves within
// configured bounds in response to live signals such as commit latency and
// the measured time per item.
//
//   - EWMA is the exponentially weighted moving average the controllers use
//     to smooth their signals.
//   - Ingest sizes the insert transactions of persist-first ingest from the
//     commit latency it observes.
//   - Claim sizes each claim so that it represents a target slice of work
//     for the worker goroutines it is spread over.
//   - Lease and RenewAfter derive the lease of a claim from the same
//     measurements.
//   - Series keeps a short ring of timestamped samples for plots.
//
// Every type is safe for concurrent use and has a Snapshot method whose
// result marshals to camelCase JSON for `sluice stats --json` and the UI.
// Nothing in this package reads the clock: durations and timestamps are
// always passed in by the caller, which keeps the controllers deterministic
// and testable.
//
// Configuration structs share one convention: a zero field means "use the
// default", WithDefaults fills those in (without ever contradicting a value
// that was set), and Validate reports every remaining problem as a
// *ConfigError naming the setting, for example
// "INGEST_MIN_ROWS (100) must be ≤ INGEST_MAX_ROWS (50)". Constructors never
// fail: they apply the defaults and force any invalid value back into a
// usable range, so Validate is where bad input should be rejected.
package adapt
