package engine

import (
	"encoding/json"
	"strings"
	"time"
)

// ItemStatus is the status of one work item.
//
// Transitions (the only ones a store performs):
//
//	PENDING    -> PROCESSING                      claim
//	PROCESSING -> DONE | ERROR | NOT_FOUND | SKIPPED  completion
//	PROCESSING -> PENDING                         retry (later run_at), next stage, expired lease
//	PROCESSING -> ERROR                           expired lease with attempts spent
//	ERROR | NOT_FOUND | DONE | SKIPPED -> PENDING reprocess (by a person)
//	(new)      -> PENDING | SKIPPED               ingest (SKIPPED: malformed row)
type ItemStatus string

// Item statuses, spelled as in the design (seed 000).
const (
	ItemPending    ItemStatus = "PENDING"
	ItemProcessing ItemStatus = "PROCESSING"
	ItemDone       ItemStatus = "DONE"
	ItemError      ItemStatus = "ERROR"
	ItemNotFound   ItemStatus = "NOT_FOUND"
	ItemSkipped    ItemStatus = "SKIPPED"
)

// ItemStatuses lists every item status in display order.
var ItemStatuses = []ItemStatus{ItemPending, ItemProcessing, ItemDone, ItemError, ItemNotFound, ItemSkipped}

// Terminal reports whether an item in this status stays there until someone
// reprocesses it.
func (s ItemStatus) Terminal() bool {
	return s == ItemDone || s == ItemError || s == ItemNotFound || s == ItemSkipped
}

// ParseItemStatus parses one status name.
func ParseItemStatus(s string) (ItemStatus, error) {
	for _, st := range ItemStatuses {
		if string(st) == s {
			return st, nil
		}
	}
	return "", Errorf(EINVALID, "unknown item status %q (want one of %s)", s, joinStatuses(ItemStatuses))
}

// ParseItemStatuses parses a comma-separated list such as "ERROR,NOT_FOUND".
// Names are matched case-insensitively; an empty string gives nil.
func ParseItemStatuses(list string) ([]ItemStatus, error) {
	var out []ItemStatus
	for _, p := range strings.Split(list, ",") {
		p = strings.ToUpper(strings.TrimSpace(p))
		if p == "" {
			continue
		}
		st, err := ParseItemStatus(p)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func joinStatuses(ss []ItemStatus) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = string(s)
	}
	return strings.Join(parts, ", ")
}

// Item is one row (or image) of a job.
type Item struct {
	ID       int64  `json:"id"`
	JobID    int64  `json:"jobId"`
	UserID   int64  `json:"userId"`
	Pipeline string `json:"pipeline"`
	// Seq is the item's position in its input, from 1.
	Seq   int64 `json:"seq"`
	Stage int   `json:"stage"`
	// Input is the row as read, keyed by header. Listings leave it out
	// unless asked.
	Input json.RawMessage `json:"input,omitempty"`
	// Normalized has trimmed values and canonical keys; processors read it.
	Normalized json.RawMessage `json:"normalized,omitempty"`
	// Result is the item's output in the grid's shape.
	Result json.RawMessage `json:"result,omitempty"`
	Status ItemStatus      `json:"status"`
	// Attempts counts the attempts at the current stage.
	Attempts       int        `json:"attempts"`
	RunAt          time.Time  `json:"runAt"`
	LastError      string     `json:"lastError,omitempty"`
	LastErrorCode  string     `json:"lastErrorCode,omitempty"`
	LockedBy       string     `json:"lockedBy,omitempty"`
	LockedAt       *time.Time `json:"lockedAt,omitempty"`
	LeaseExpiresAt *time.Time `json:"leaseExpiresAt,omitempty"`
	// Strategy is the index of the query variant the next attempt uses.
	Strategy int `json:"strategy"`
	// UpdatedAt is the time of the last change; for a PENDING item it is
	// the moment the item is due (equal to RunAt), so that pending items
	// list, and are claimed, in the order they will run.
	UpdatedAt time.Time `json:"updatedAt"`
}

// Attempt is the audit record of one processing attempt of an item.
type Attempt struct {
	ItemID     int64         `json:"itemId"`
	JobID      int64         `json:"jobId"`
	AttemptNo  int           `json:"attempt"`
	Stage      int           `json:"stage"`
	WorkerID   string        `json:"worker"`
	StartedAt  time.Time     `json:"startedAt"`
	FinishedAt time.Time     `json:"finishedAt"`
	Outcome    ItemStatus    `json:"outcome"`
	ErrorClass ErrorClass    `json:"errorClass,omitempty"`
	Error      string        `json:"error,omitempty"`
	Duration   time.Duration `json:"durationNs"`
	// Detail holds processor specifics: an HTTP status, an exit code, a
	// trace id, output tails.
	Detail json.RawMessage `json:"detail,omitempty"`
}
