package engine

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// AutomationStore keeps what seed 003 adds: command definitions, triggers
// (with the scheduler's fire bookkeeping), the scheduler's leadership and
// worker heartbeats. Part of Store; storage/storetest/automation.go is its
// contract.
type AutomationStore interface {
	OutboxStore

	// PutDefinition creates or replaces a definition by key, bumping its
	// version, and returns the stored one.
	PutDefinition(ctx context.Context, d *Definition, now time.Time) (*Definition, error)
	// GetDefinition returns a definition or ErrNotFound.
	GetDefinition(ctx context.Context, key string) (*Definition, error)
	// ListDefinitions returns every definition ordered by key.
	ListDefinitions(ctx context.Context) ([]*Definition, error)

	// CreateTrigger stores a new trigger (ECONFLICT when the name is
	// taken) with its first NextFireAt, and returns it.
	CreateTrigger(ctx context.Context, t *Trigger, now time.Time) (*Trigger, error)
	// UpdateTrigger replaces a trigger's settings (all but its name, kind
	// and event, and its fire history) and NextFireAt, and returns it;
	// ErrNotFound when there is none by that name.
	UpdateTrigger(ctx context.Context, t *Trigger, now time.Time) (*Trigger, error)
	// DeleteTrigger removes a trigger or returns ErrNotFound.
	DeleteTrigger(ctx context.Context, name string) error
	// ListTriggers returns triggers ordered by name, of one kind when
	// p.Kind is set, for one event when p.Event is set.
	ListTriggers(ctx context.Context, p *ListTriggersParams) ([]*Trigger, error)
	// FireTriggers records fires in one transaction, in order, and returns
	// one result per fire. A schedule fire moves the trigger's NextFireAt
	// from Due to Next only when it still equals Due: a fire whose trigger
	// is gone or whose Due was already handled (by another scheduler, or by
	// this one before a restart) changes nothing (Fired false). A fired
	// trigger's job is enqueued as EnqueueJob does in the same transaction,
	// or, when its dedupe key is held (ErrDuplicate), not: Deduped, and the
	// fire still counts. A fire with Build instead of Job is probed by its
	// DedupeKey first and built only when it will enqueue. The trigger
	// records LastFireAt (Due; now for event fires), LastResult ("job",
	// "deduped", "skipped") and LastJobID.
	FireTriggers(ctx context.Context, fires []Fire, now time.Time) ([]FireResult, error)

	// AcquireLeadership makes p.Holder the holder of the named lease
	// until now+p.For when the lease is free, expired or already its own,
	// and reports whether it holds it. Both stores keep a row: an advisory
	// lock held by a session could not run out at a time the caller gives.
	AcquireLeadership(ctx context.Context, p *LeadershipParams) (bool, error)
	// ReleaseLeadership gives up the lease if p.Holder holds it.
	ReleaseLeadership(ctx context.Context, p *LeadershipParams) error

	// HeartbeatWorker inserts or updates a worker's row (LastSeen = now).
	HeartbeatWorker(ctx context.Context, w *Worker, now time.Time) error
	// RemoveWorker deletes a worker's row (it stopped cleanly).
	RemoveWorker(ctx context.Context, id string) error
	// ListWorkers returns the workers ordered by id.
	ListWorkers(ctx context.Context) ([]*Worker, error)
	// ReclaimDeadWorkers ends (expires just before now) the leases of PROCESSING items
	// held by workers whose LastSeen is before p.StaleBefore, so that the
	// next ReapExpiredLeases gives them back at once instead of when their
	// lease would have run out. Workers not seen since p.ForgetBefore are
	// deleted. It returns how many leases it ended.
	ReclaimDeadWorkers(ctx context.Context, p *ReclaimParams) (int, error)
}

// Trigger kinds.
const (
	TriggerEvent    = "event"
	TriggerSchedule = "schedule"
)

// Missed-run policies of schedule triggers.
const (
	// MissedSkip drops ticks that passed while no scheduler ran.
	MissedSkip = "skip"
	// MissedOnce runs one job for any number of missed ticks.
	MissedOnce = "once"
)

// Job sources (jobs.source).
const (
	SourceManual   = "manual"
	SourceEvent    = "event"
	SourceSchedule = "schedule"
	SourceSystem   = "system"
)

// Trigger starts jobs on an event of Sluice's own or on a schedule.
type Trigger struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Event is the event name (kind event).
	Event string `json:"event,omitempty"`
	// Cron and TZ are the schedule (kind schedule): a 5-field cron
	// expression or a descriptor (@hourly, @every 1m), in an IANA zone.
	Cron string `json:"cron,omitempty"`
	TZ   string `json:"tz,omitempty"`
	// Definition or Pipeline is what the jobs run (exactly one is set).
	Definition string `json:"definition,omitempty"`
	Pipeline   string `json:"pipeline,omitempty"`
	// Payload is a JSON object template: each string value is a
	// text/template rendered with the event or schedule context.
	Payload  json.RawMessage `json:"payload,omitempty"`
	Priority int             `json:"priority,omitempty"`
	// DedupeWindow: no second job of this trigger with the same dedupe key
	// is created while one is unfinished or within this window of it.
	DedupeWindow Duration `json:"dedupeWindow,omitzero"`
	// Missed is the schedule's missed-run policy: skip or once.
	Missed  string `json:"missed,omitempty"`
	Enabled bool   `json:"enabled"`
	// NextFireAt is the next due time of a schedule (UTC).
	NextFireAt *time.Time `json:"nextFireAt,omitempty"`
	LastFireAt *time.Time `json:"lastFireAt,omitempty"`
	LastJobID  int64      `json:"lastJobId,omitempty"`
	// LastResult says what the last fire did: "job", "deduped",
	// "skipped" (missed ticks) or an error.
	LastResult string    `json:"lastResult,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
}

// ListTriggersParams are the arguments of AutomationStore.ListTriggers.
type ListTriggersParams struct {
	Kind  string
	Event string
}

// Fire is one firing of a trigger, for AutomationStore.FireTriggers.
type Fire struct {
	Trigger string
	// Due is the stored NextFireAt this fire handles (schedules); zero for
	// event triggers, which have none.
	Due time.Time
	// Next becomes the trigger's NextFireAt (schedules).
	Next time.Time
	// Job is the job to enqueue, with its dedupe key; nil (and no Build)
	// records a skipped fire (missed ticks under the skip policy).
	Job *EnqueueJobParams
	// Build, when Job is nil, makes the job; the store calls it only for a
	// fire that counts and whose DedupeKey is free, so that a deduped fire
	// (the usual fire of a frequent schedule) renders no payload. An error
	// records the fire as skipped and is returned in FireResult.Err.
	Build func() (*EnqueueJobParams, error)
	// DedupeKey and DedupeWindow are those of the job Build makes.
	DedupeKey    string
	DedupeWindow time.Duration
	// EventID, when set, is the outbox event this fire handles: the store
	// marks it done in the fire's transaction, whatever the fire did.
	EventID int64
}

// MakesJob reports whether the fire enqueues a job (unless deduped).
func (f *Fire) MakesJob() bool { return f.Job != nil || f.Build != nil }

// Dedupe returns the dedupe key and window of the fire's job.
func (f *Fire) Dedupe() (string, time.Duration) {
	if f.Job != nil {
		return f.Job.Job.DedupeKey, f.Job.Job.DedupeWindow
	}
	return f.DedupeKey, f.DedupeWindow
}

// JobParams returns the fire's job, building it when needed.
func (f *Fire) JobParams() (*EnqueueJobParams, error) {
	if f.Job != nil || f.Build == nil {
		return f.Job, nil
	}
	return f.Build()
}

// FireResult says what one Fire did.
type FireResult struct {
	// Fired is false when the fire was already handled or the trigger is
	// gone; nothing was written.
	Fired bool
	// Job is the enqueued job; nil when skipped or deduped.
	Job *Job
	// Deduped is true when a job with the same dedupe key stood in the way.
	Deduped bool
	// Err is why Build could not make the job (the fire counted, skipped).
	Err error
}

// LeadershipParams are the arguments of Acquire/ReleaseLeadership.
type LeadershipParams struct {
	Name   string
	Holder string
	For    time.Duration
	Now    time.Time
}

// Worker is a worker process's heartbeat (seed 003 job_workers).
type Worker struct {
	// ID is host:pid:boot, the id its items are locked by.
	ID        string    `json:"id"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"startedAt"`
	LastSeen  time.Time `json:"lastSeen"`
	// Running is the number of items it had in process at its last beat.
	Running int `json:"running"`
	// Scheduler tells whether it held the scheduler lease at its last beat.
	Scheduler bool `json:"scheduler,omitempty"`
}

// ReclaimParams are the arguments of AutomationStore.ReclaimDeadWorkers.
type ReclaimParams struct {
	StaleBefore  time.Time
	ForgetBefore time.Time
	Now          time.Time
}

// ErrDuplicate is returned (wrapped) by EnqueueJob when a job with the same
// dedupe key is unfinished or was created within the dedupe window.
var ErrDuplicate = &Error{Code: ECONFLICT, Message: "a job with the same dedupe key is unfinished or within its dedupe window"}

// IsDuplicate reports whether err is ErrDuplicate.
func IsDuplicate(err error) bool { return errors.Is(err, ErrDuplicate) }
