package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The checks and decisions below are part of the Store contract that do
// not depend on the database: every store calls them, so that they agree.

// ValidateRole checks an account's role.
func ValidateRole(role string) error {
	if role != RoleAdmin && role != RoleUser {
		return Errorf(EINVALID, "role %q is not %s or %s", role, RoleAdmin, RoleUser)
	}
	return nil
}

// ValidateTokenKind checks a token's kind.
func ValidateTokenKind(kind string) error {
	switch kind {
	case TokenAPI, TokenSession, TokenSignIn:
		return nil
	}
	return Errorf(EINVALID, "token kind %q is not api, session or signin", kind)
}

// Validate checks one learned rate before anything is written.
func (r *HostRate) Validate() error {
	if strings.TrimSpace(r.Host) == "" {
		return Errorf(EINVALID, "a host rate needs a host")
	}
	if !(r.Rate > 0) || math.IsInf(r.Rate, 0) {
		return Errorf(EINVALID, "host %s: rate %v is not a positive number", r.Host, r.Rate)
	}
	if !(r.Ceiling >= 0) || math.IsInf(r.Ceiling, 0) {
		return Errorf(EINVALID, "host %s: ceiling %v is not a non-negative number", r.Host, r.Ceiling)
	}
	if r.Concurrency < 0 {
		return Errorf(EINVALID, "host %s: concurrency %d is negative", r.Host, r.Concurrency)
	}
	return nil
}

// Prepare checks a new source and returns its after-action and its config
// as stored ("{}" when empty).
func (src *SourceRecord) Prepare() (after, config string, err error) {
	if strings.TrimSpace(src.Name) == "" || src.Kind == "" || src.Pipeline == "" {
		return "", "", Errorf(EINVALID, "a source needs a name, a kind and a pipeline")
	}
	if after, err = ParseAfter(src.After); err != nil {
		return "", "", err
	}
	if src.Poll < 0 {
		return "", "", Errorf(EINVALID, "source %s: poll %s is negative", src.Name, src.Poll)
	}
	config = string(src.Config)
	if config == "" {
		config = "{}"
	}
	if !json.Valid([]byte(config)) {
		return "", "", Errorf(EINVALID, "source %s: config is not JSON", src.Name)
	}
	return after, config, nil
}

// DecodePipeline reads a stored pipeline spec with its version and time.
func DecodePipeline(spec []byte, version int, updated time.Time) (*Pipeline, error) {
	var p Pipeline
	if err := json.Unmarshal(spec, &p); err != nil {
		return nil, fmt.Errorf("decode pipeline: %w", err)
	}
	p.Version = version
	p.UpdatedAt = updated
	return &p, nil
}

// DistinctStatuses returns statuses without repeats, or every status when
// it is empty: a filter that names a status twice still lists its items once.
func DistinctStatuses(statuses []ItemStatus) []ItemStatus {
	if len(statuses) == 0 {
		return ItemStatuses
	}
	out := make([]ItemStatus, 0, len(statuses))
	for _, st := range statuses {
		if !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	return out
}

// TargetStatuses returns the statuses a reprocess moves: p.Statuses, or by
// default every terminal status for named items and ERROR and NOT_FOUND
// for a whole job.
func (p *ReprocessParams) TargetStatuses() []ItemStatus {
	switch {
	case len(p.Statuses) > 0:
		return p.Statuses
	case len(p.ItemIDs) > 0:
		return []ItemStatus{ItemDone, ItemError, ItemNotFound, ItemSkipped}
	}
	return []ItemStatus{ItemError, ItemNotFound}
}

// Next returns what an outcome makes of its item: the stage it is at
// afterwards and the moment stored as its run_at and updated_at (the due
// time of a retry, now otherwise). A status that cannot end an attempt is
// EINVALID.
func (o *Outcome) Next(now time.Time) (stage int, at time.Time, err error) {
	switch o.Status {
	case ItemDone, ItemError, ItemNotFound, ItemSkipped:
		return o.Stage, now, nil
	case ItemPending:
		if !o.RunAt.IsZero() {
			now = o.RunAt
		}
		return o.NextStage, now, nil
	}
	return 0, time.Time{}, Errorf(EINVALID, "outcome of item %d: status %q cannot end an attempt", o.ItemID, o.Status)
}

// WantsHandOff reports whether the outcome asks to keep its item for its
// next stage and may: it advances the item (PENDING at a later stage), due
// now, with a lease. The store grants it only while the job is runnable.
func (o *Outcome) WantsHandOff(now time.Time) bool {
	return o.HandOff && o.Status == ItemPending && o.NextStage > o.Stage && !o.RunAt.After(now) && o.LeaseUntil.After(now)
}

// SpreadClaim shares a claim of limit items fairly across jobs (in the
// order they should be served): each gets an equal share of what is left,
// then the jobs that filled their share get what the others left. claim
// takes up to n items of a job and returns how many it took.
func SpreadClaim(jobs []int64, limit int, claim func(job int64, n int) (int, error)) error {
	remaining := limit
	full := make([]int64, 0, len(jobs))
	for i, job := range jobs {
		share := (remaining + len(jobs) - i - 1) / (len(jobs) - i)
		n, err := claim(job, share)
		if err != nil {
			return err
		}
		remaining -= n
		if n == share {
			full = append(full, job)
		}
	}
	for _, job := range full {
		if remaining <= 0 {
			break
		}
		n, err := claim(job, remaining)
		if err != nil {
			return err
		}
		remaining -= n
	}
	return nil
}

// RecoveredObject says what becomes of a ledger object left INGESTING by a
// process that died, given the newest job made from it (jobState "" when
// none was): without a job, or with a FAILED one, it is SEEN again (taken
// anew); with a job still INGESTING it is left alone (keep false); with any
// other job it is DONE, as that job's.
func RecoveredObject(jobState JobState) (state SourceObjectState, keep bool) {
	switch jobState {
	case "", JobFailed:
		return ObjectSeen, false
	case JobIngesting:
		return "", true
	}
	return ObjectDone, false
}
