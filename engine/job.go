package engine

import (
	"fmt"
	"time"
)

// JobState is the queue state of a job.
type JobState string

// Job states. INGESTING is the state a job has while its rows are being
// persisted; it becomes QUEUED only once every row is durable, so a job that
// looks complete always is.
const (
	JobIngesting JobState = "INGESTING"
	JobQueued    JobState = "QUEUED"
	JobRunning   JobState = "RUNNING"
	JobPaused    JobState = "PAUSED"
	JobDone      JobState = "DONE"
	JobFailed    JobState = "FAILED"
	JobCanceled  JobState = "CANCELED"
)

// JobStates lists every job state in display order.
var JobStates = []JobState{JobIngesting, JobQueued, JobRunning, JobPaused, JobDone, JobFailed, JobCanceled}

// Runnable reports whether items of a job in this state may be claimed.
func (s JobState) Runnable() bool { return s == JobQueued || s == JobRunning }

// Terminal reports whether the job has finished (it may still be reprocessed).
func (s JobState) Terminal() bool { return s == JobDone || s == JobFailed || s == JobCanceled }

// ParseJobState parses a state name as spelled by the API (upper case).
func ParseJobState(s string) (JobState, error) {
	for _, st := range JobStates {
		if string(st) == s {
			return st, nil
		}
	}
	return "", Errorf(EINVALID, "unknown job state %q", s)
}

// ItemCounts holds a job's exact item counters by status. Stores keep them in
// the same transaction as the item rows they count.
type ItemCounts struct {
	Pending    int64 `json:"PENDING"`
	Processing int64 `json:"PROCESSING"`
	Done       int64 `json:"DONE"`
	Error      int64 `json:"ERROR"`
	NotFound   int64 `json:"NOT_FOUND"`
	Skipped    int64 `json:"SKIPPED"`
}

// Get returns the counter for one status.
func (c ItemCounts) Get(s ItemStatus) int64 {
	switch s {
	case ItemPending:
		return c.Pending
	case ItemProcessing:
		return c.Processing
	case ItemDone:
		return c.Done
	case ItemError:
		return c.Error
	case ItemNotFound:
		return c.NotFound
	case ItemSkipped:
		return c.Skipped
	}
	return 0
}

// Add adds n to the counter of status s.
func (c *ItemCounts) Add(s ItemStatus, n int64) {
	switch s {
	case ItemPending:
		c.Pending += n
	case ItemProcessing:
		c.Processing += n
	case ItemDone:
		c.Done += n
	case ItemError:
		c.Error += n
	case ItemNotFound:
		c.NotFound += n
	case ItemSkipped:
		c.Skipped += n
	default:
		panic(fmt.Sprintf("engine: unknown item status %q", s))
	}
}

// Total is the sum of all counters.
func (c ItemCounts) Total() int64 {
	return c.Pending + c.Processing + c.Done + c.Error + c.NotFound + c.Skipped
}

// Finished is the number of items in a terminal status.
func (c ItemCounts) Finished() int64 { return c.Done + c.Error + c.NotFound + c.Skipped }

// Failed is the number of items that ended in ERROR or NOT_FOUND.
func (c ItemCounts) Failed() int64 { return c.Error + c.NotFound }

// Job is one unit of submitted work: a file or a list of rows, run through
// one pipeline.
type Job struct {
	ID        int64    `json:"id"`
	UserID    int64    `json:"userId"`
	Pipeline  string   `json:"pipeline"`
	Name      string   `json:"name"`
	Source    string   `json:"source"`
	SourceRef string   `json:"sourceRef,omitempty"`
	FileID    int64    `json:"fileId,omitempty"`
	State     JobState `json:"state"`
	Priority  int      `json:"priority"`
	// TotalItems is the number of rows ingested; it is final once the job
	// has left INGESTING.
	TotalItems int64      `json:"totalItems"`
	Counts     ItemCounts `json:"counts"`
	// MaxAttempts bounds how often the reaper gives an item back after its
	// lease expired (a worker died holding it).
	MaxAttempts int `json:"maxAttempts"`
	// Requests counts the attempts that ran (the spending cap counts them).
	Requests int64 `json:"requests"`
	// RequestLimit is the spending cap in force (0 = none): the job is
	// PAUSED when Requests reaches it; resuming raises it by RequestCap.
	RequestLimit  int64      `json:"requestLimit,omitempty"`
	RequestCap    int64      `json:"requestCap,omitempty"`
	LastError     string     `json:"lastError,omitempty"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
	StartedAt     *time.Time `json:"startedAt,omitempty"`
	FinishedAt    *time.Time `json:"finishedAt,omitempty"`
	LastHeartbeat *time.Time `json:"lastHeartbeat,omitempty"`
}

// JobView is a job as the CLI and the API show it: the stored job plus
// derived progress figures.
type JobView struct {
	*Job
	Processed   int64   `json:"processed"`
	Failed      int64   `json:"failed"`
	Percent     float64 `json:"percent"`
	ItemsPerSec float64 `json:"itemsPerSec"`
	// ETASeconds is the estimated time left at the current rate (null when
	// unknown).
	ETASeconds *float64 `json:"etaSeconds"`
}

// ViewJob derives the progress figures of j at now.
func ViewJob(j *Job, now time.Time) JobView {
	v := JobView{Job: j, Processed: j.Counts.Finished(), Failed: j.Counts.Failed()}
	if j.TotalItems > 0 {
		v.Percent = 100 * float64(v.Processed) / float64(j.TotalItems)
	}
	if j.StartedAt != nil {
		end := now
		if j.FinishedAt != nil {
			end = *j.FinishedAt
		}
		if el := end.Sub(*j.StartedAt).Seconds(); el > 0 {
			v.ItemsPerSec = float64(j.Counts.Done+j.Counts.Error+j.Counts.NotFound) / el
		}
		left := j.Counts.Pending + j.Counts.Processing
		if v.ItemsPerSec > 0 && !j.State.Terminal() {
			eta := float64(left) / v.ItemsPerSec
			v.ETASeconds = &eta
		}
	}
	return v
}

// JobControl is a transition people ask for by name, with the states it is
// allowed from.
type JobControl struct {
	From  []JobState
	To    JobState
	Short string
}

// JobControls are the transitions of pause, resume and cancel.
var JobControls = map[string]JobControl{
	"pause":  {[]JobState{JobQueued, JobRunning}, JobPaused, "Stop handing out a job's items (in-flight items finish)"},
	"resume": {[]JobState{JobPaused}, JobQueued, "Let a paused job's items be processed again"},
	"cancel": {[]JobState{JobQueued, JobRunning, JobPaused}, JobCanceled, "Stop a job: items not yet run become SKIPPED (canceled); running ones finish"},
}
