package engine

import (
	"context"
	"encoding/json"
	"time"
)

// Store is everything the engine needs from persistence. Implementations
// live in storage/* and must pass storage/storetest. Methods that take a
// Now use it for every timestamp they write, so tests control time.
//
// Errors: a missing row is ErrNotFound (wrapped is fine); a transition that
// the current state does not allow is an *Error with ECONFLICT.
type Store interface {
	// Close releases the store's connections.
	Close() error

	// DefaultUser returns the local user that owns work submitted without
	// an account (the CLI, the desktop window).
	DefaultUser(ctx context.Context) (*User, error)
	AccountStore
	HostRateStore
	SourceStore
	AutomationStore
	BlobStore

	// PutPipeline creates or replaces a pipeline by name, bumping its
	// version, and returns the stored pipeline.
	PutPipeline(ctx context.Context, p *PutPipelineParams) (*Pipeline, error)
	// GetPipeline returns the pipeline or ErrNotFound.
	GetPipeline(ctx context.Context, name string) (*Pipeline, error)
	// ListPipelines returns every pipeline ordered by name.
	ListPipelines(ctx context.Context) ([]*Pipeline, error)

	// CreateFile records an input file.
	CreateFile(ctx context.Context, p *CreateFileParams) (*File, error)

	// CreateJob creates a job in state INGESTING (invisible to workers).
	CreateJob(ctx context.Context, p *CreateJobParams) (*Job, error)
	// EnqueueJob creates a job with all its items in one transaction,
	// QUEUED at once (DONE when no item is PENDING): the path for small
	// submissions (API item lists, triggers) where latency matters. With a
	// DedupeKey it returns ErrDuplicate (wrapped) instead when another job
	// holds the key (CreateJobParams.DedupeKey); a unique index on the
	// unfinished jobs' keys backs this against concurrent writers.
	EnqueueJob(ctx context.Context, p *EnqueueJobParams) (*Job, error)
	// InsertItems appends a batch of items to an INGESTING job in one
	// transaction, bumping the job's counters and heartbeat in it. Items
	// are appended in input order: seqs must rise past every stored one
	// (EINVALID otherwise).
	InsertItems(ctx context.Context, p *InsertItemsParams) error
	// FinishIngest moves an INGESTING job to QUEUED with its final total.
	FinishIngest(ctx context.Context, p *FinishIngestParams) (*Job, error)
	// FailJob moves a job to FAILED with a reason (its input could not be
	// read) and removes the rows it had stored: a failed ingest keeps no
	// partial job that could later run or look complete.
	FailJob(ctx context.Context, p *FailJobParams) (*Job, error)
	// FailStaleIngests fails INGESTING jobs whose heartbeat is older than
	// p.Before (their ingest process died), as FailJob does, and returns them.
	FailStaleIngests(ctx context.Context, p *FailStaleIngestsParams) ([]*Job, error)
	// GetJob returns a job or ErrNotFound.
	GetJob(ctx context.Context, id int64) (*Job, error)
	// ListJobs returns jobs newest first, keyset-paginated by id.
	ListJobs(ctx context.Context, p *ListJobsParams) ([]*Job, error)
	// SetJobState performs a person's transition (pause, resume, cancel):
	// it succeeds only from one of p.From, else ECONFLICT. A job resumed
	// (To QUEUED) with no PENDING or PROCESSING item left becomes DONE; a
	// job resumed at its request limit gets another RequestCap. Canceling
	// turns the job's PENDING items into SKIPPED with reason "canceled";
	// items running then finish and keep their outcome.
	SetJobState(ctx context.Context, p *SetJobStateParams) (*Job, error)
	// DeleteJob removes a job with its items, attempts and blobs and
	// returns the removed job's stored file, if any, for the caller to
	// delete.
	DeleteJob(ctx context.Context, id int64) (*File, error)

	// ClaimItems claims up to p.Limit due PENDING items of runnable jobs in
	// one write transaction, fairly across jobs, and returns them
	// PROCESSING with the lease set and attempts incremented. A job with a
	// request limit never has more items claimed than its remaining budget.
	ClaimItems(ctx context.Context, p *ClaimItemsParams) ([]*Item, error)
	// CompleteItems writes the outcomes of many attempts in one
	// transaction, with the job counters and attempt records. An outcome
	// whose item is no longer PROCESSING under the same lease (same worker
	// and attempt) is not applied and is reported as stale. Every applied
	// outcome counts as a request of its job; a job that reaches its
	// request limit with work left is PAUSED with the reason.
	CompleteItems(ctx context.Context, p *CompleteItemsParams) (*CompleteItemsResult, error)
	// ReleaseItems gives back items the worker claimed but never started
	// (it is stopping): PENDING and due now, the claim's attempt not
	// counted, no attempt record. Items no longer held under that lease
	// are left alone. It returns how many it released.
	ReleaseItems(ctx context.Context, p *ReleaseItemsParams) (int, error)
	// RenewLeases extends the leases of items the worker still holds and
	// returns how many it extended.
	RenewLeases(ctx context.Context, p *RenewLeasesParams) (int, error)
	// ReapExpiredLeases returns PROCESSING items whose lease expired to
	// PENDING, or to ERROR (class poison) once the job's MaxAttempts are
	// spent, and returns how many it moved.
	ReapExpiredLeases(ctx context.Context, p *ReapParams) (int, error)
	// QueueSummary reports what is left to do across runnable jobs.
	QueueSummary(ctx context.Context, now time.Time) (*QueueSummary, error)
	// ChangeCounter returns a number that changes whenever another
	// connection or process commits to the store (a cheap poll).
	ChangeCounter(ctx context.Context) (int64, error)

	// GetItem returns an item with its input, normalised input and result.
	GetItem(ctx context.Context, id int64) (*Item, error)
	// ListItems returns one keyset page ordered by (updated_at, id). A
	// PENDING item's updated_at is the moment it is due, so pending items
	// list in the order they will be picked up.
	ListItems(ctx context.Context, p *ListItemsParams) (*ItemPage, error)
	// ItemMarks reads a job's items of p.Statuses (every status when empty)
	// in ListItems' order, keys only, in one snapshot, and returns how many
	// there are and the cursor that starts every p.Every-th row: a sparse
	// position index, so that row N of the grid is one ListItems call away
	// (After: Starts[N/Every], then N%Every rows to skip). A missing job is
	// ErrNotFound; Every < 1 is EINVALID.
	ItemMarks(ctx context.Context, p *ItemMarksParams) (*ItemMarks, error)
	// ScanItems calls fn for every item of a job in one of p.Statuses
	// (every item when empty), streaming, in ListItems' order: (updated_at,
	// id). The scan reads one snapshot, so it visits exactly the items, in
	// exactly the order, that a walk over ListItems pages with the same
	// job and statuses lists when nothing changes meanwhile; a status named
	// twice counts once. It stops at fn's first error and returns it; a
	// missing job is ErrNotFound.
	ScanItems(ctx context.Context, p *ScanItemsParams, fn func(*Item) error) error
	// ReprocessItems puts terminal items back to PENDING (due now, locks
	// cleared) and the job back to QUEUED; it returns how many it moved.
	// Jobs still INGESTING or FAILED (their input was never fully read)
	// cannot be reprocessed: ECONFLICT.
	ReprocessItems(ctx context.Context, p *ReprocessParams) (int64, error)
	// ListAttempts returns the attempts of an item, oldest first.
	ListAttempts(ctx context.Context, itemID int64) ([]*Attempt, error)
}

// User is an account. The default local user has ID 1.
type User struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"createdAt"`
	// HasPassword tells whether the account can sign in with a password.
	HasPassword bool `json:"hasPassword"`
	// PasswordHash is filled only by GetUser and GetUserByName.
	PasswordHash string `json:"-"`
}

// IsAdmin reports whether the account may see and manage everything.
func (u *User) IsAdmin() bool { return u != nil && u.Role == RoleAdmin }

// File is an input file.
type File struct {
	ID     int64  `json:"id"`
	UserID int64  `json:"userId"`
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	// MediaType is the detected content type ("text/csv", ...).
	MediaType string `json:"mediaType,omitempty"`
	Source    string `json:"source"`
	SourceRef string `json:"sourceRef,omitempty"`
	// StoredPath is a copy kept in the data directory (relative to it), or
	// empty when none was kept.
	StoredPath string    `json:"storedPath,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
}

// PutPipelineParams are the arguments of Store.PutPipeline.
type PutPipelineParams struct {
	Pipeline *Pipeline
	Now      time.Time
}

// CreateFileParams are the arguments of Store.CreateFile.
type CreateFileParams struct {
	File *File
	Now  time.Time
}

// CreateJobParams are the arguments of Store.CreateJob.
type CreateJobParams struct {
	UserID      int64
	Pipeline    string
	Name        string
	Source      string
	SourceRef   string
	FileID      int64
	Priority    int
	MaxAttempts int
	// RequestCap is the pipeline's spending cap (0 = none).
	RequestCap int64
	// DedupeKey, when set, makes EnqueueJob refuse (ErrDuplicate) while a
	// job with the same key is not finished (INGESTING, QUEUED, RUNNING or
	// PAUSED) or was created less than DedupeWindow before Now.
	DedupeKey    string
	DedupeWindow time.Duration
	Now          time.Time
}

// EnqueueJobParams are the arguments of Store.EnqueueJob.
type EnqueueJobParams struct {
	Job   CreateJobParams
	Items []NewItem
}

// NewItem is one row to insert.
type NewItem struct {
	Seq        int64
	Input      json.RawMessage
	Normalized json.RawMessage
	// Status is PENDING or SKIPPED (a malformed row, with LastError).
	Status    ItemStatus
	LastError string
}

// InsertItemsParams are the arguments of Store.InsertItems.
type InsertItemsParams struct {
	JobID int64
	Items []NewItem
	Now   time.Time
}

// FinishIngestParams are the arguments of Store.FinishIngest.
type FinishIngestParams struct {
	JobID int64
	Now   time.Time
}

// FailJobParams are the arguments of Store.FailJob.
type FailJobParams struct {
	JobID  int64
	Reason string
	Now    time.Time
}

// FailStaleIngestsParams are the arguments of Store.FailStaleIngests.
type FailStaleIngestsParams struct {
	// Before: jobs whose last heartbeat is older than this are stale.
	Before time.Time
	Reason string
	Now    time.Time
}

// ListJobsParams are the arguments of Store.ListJobs.
type ListJobsParams struct {
	// UserID 0 lists every user's jobs.
	UserID int64
	States []JobState
	// BeforeID continues a listing: jobs with smaller ids (0 = from the top).
	BeforeID int64
	Limit    int
}

// SetJobStateParams are the arguments of Store.SetJobState.
type SetJobStateParams struct {
	JobID int64
	From  []JobState
	To    JobState
	Now   time.Time
}

// ClaimItemsParams are the arguments of Store.ClaimItems.
type ClaimItemsParams struct {
	WorkerID string
	Limit    int
	// MaxJobs is how many runnable jobs one claim spreads over (fairness);
	// each gets an equal share of Limit. 0 = 8.
	MaxJobs  int
	LeaseFor time.Duration
	Now      time.Time
	// JobID, when set, claims only that job's items.
	JobID int64
	// MaxInFlightPerJob caps a job's PROCESSING items (across every
	// worker): a claim never takes a job past it. 0 = no limit.
	MaxInFlightPerJob int
	// MaxInFlightPerUser caps the PROCESSING items of one user's jobs taken
	// together, so that one owner cannot take every worker. 0 = no limit.
	MaxInFlightPerUser int
	// StageLimits cap the PROCESSING items of a pipeline's stage across
	// every worker and process (Stage.MaxInFlight): a claim never takes a
	// stage past its limit. Empty = no stage is bounded.
	StageLimits []StageLimit
}

// StageLimit is the in-flight limit of one stage of one pipeline.
type StageLimit struct {
	Pipeline string
	Stage    int
	Max      int
}

// Outcome is the result of one attempt, for Store.CompleteItems.
type Outcome struct {
	ItemID int64
	JobID  int64
	// Attempt must equal the item's attempts as claimed (lease guard).
	Attempt int
	// Status is the item's new status: DONE, ERROR, NOT_FOUND, SKIPPED, or
	// PENDING for a retry (at RunAt) or the next stage (NextStage).
	Status ItemStatus
	// Stage is the stage this attempt ran (recorded with the attempt).
	Stage int
	// NextStage, for a PENDING outcome, is the stage the item runs next:
	// Stage for a retry, Stage+1 to advance. Advancing starts the item's
	// attempt count again (each stage has its own retry budget).
	NextStage int
	RunAt     time.Time
	// Result replaces the item's result when not nil.
	Result     json.RawMessage
	ErrorClass ErrorClass
	Error      string
	Strategy   int
	StartedAt  time.Time
	Duration   time.Duration
	Detail     json.RawMessage
	// HandOff, on an outcome that advances the item (PENDING, NextStage >
	// Stage, due now), asks to keep the item: if its job is still QUEUED or
	// RUNNING, the item stays PROCESSING under the same worker at
	// NextStage with its first attempt of that stage begun (attempts 1)
	// and its lease until LeaseUntil, in the same write as this stage's
	// result and attempt record, so the worker goes on without a claim.
	// Otherwise the outcome advances the item as without HandOff.
	HandOff    bool
	LeaseUntil time.Time

	// item is the runner's claimed item, to go on with after a hand-off.
	item *Item
}

// CompleteItemsParams are the arguments of Store.CompleteItems.
type CompleteItemsParams struct {
	WorkerID string
	Outcomes []Outcome
	Now      time.Time
}

// CompleteItemsResult says what CompleteItems did.
type CompleteItemsResult struct {
	Applied int
	// Stale lists items whose outcome was dropped (lease lost).
	Stale []int64
	// Finished lists jobs that became DONE in this transaction.
	Finished []int64
	// HandedOff lists items whose HandOff was granted: they are PROCESSING
	// at their next stage under the worker's lease (attempts 1).
	HandedOff []int64
}

// ReleaseItemsParams are the arguments of Store.ReleaseItems.
type ReleaseItemsParams struct {
	WorkerID string
	// Items are the claimed items (ID, JobID, Stage and Attempts as claimed).
	Items []*Item
	Now   time.Time
}

// RenewLeasesParams are the arguments of Store.RenewLeases.
type RenewLeasesParams struct {
	WorkerID string
	ItemIDs  []int64
	LeaseFor time.Duration
	Now      time.Time
}

// ReapParams are the arguments of Store.ReapExpiredLeases.
type ReapParams struct {
	Now   time.Time
	Limit int
}

// QueueSummary is what is left to do.
type QueueSummary struct {
	// Due is the number of PENDING items of runnable jobs with run_at ≤ now.
	Due int64 `json:"due"`
	// Later is the number of PENDING items of runnable jobs not yet due.
	Later int64 `json:"later"`
	// Processing is the number of PROCESSING items in any job.
	Processing int64 `json:"processing"`
	// Ingesting is the number of jobs still being ingested.
	Ingesting int64 `json:"ingesting"`
	// NextRunAt is the earliest run_at among the Later items.
	NextRunAt *time.Time `json:"nextRunAt,omitempty"`
}

// Idle reports whether nothing is left to do or to wait for.
func (q *QueueSummary) Idle() bool {
	return q.Due == 0 && q.Later == 0 && q.Processing == 0 && q.Ingesting == 0
}

// Cursor is a keyset position in the (updated_at, id) order.
type Cursor struct {
	UpdatedAt time.Time
	ID        int64
}

// ListItemsParams are the arguments of Store.ListItems.
type ListItemsParams struct {
	// JobID 0 lists across jobs (the global Pending view).
	JobID int64
	// UserID restricts to one owner; 0 means every owner.
	UserID int64
	// Statuses filters; empty means every status.
	Statuses []ItemStatus
	// Pipeline restricts to items of jobs on that pipeline ("" = any): the
	// pending view's job type.
	Pipeline string
	After    *Cursor
	Limit    int
	// WithInput includes the full input; listings leave it out.
	WithInput bool
}

// ItemPage is one page of items and the cursor of the next, nil at the end.
type ItemPage struct {
	Items []*Item
	Next  *Cursor
}

// ItemMarksParams are the arguments of Store.ItemMarks.
type ItemMarksParams struct {
	JobID int64
	// Statuses filters; empty means every status.
	Statuses []ItemStatus
	// Every is the distance in rows between two marks.
	Every int
}

// ItemMarks is a sparse position index of a job's filtered items.
type ItemMarks struct {
	// Total is the number of items the filter lists.
	Total int64
	// Every is the distance between two marks (the params' Every).
	Every int
	// Starts[k] is the ListItems After cursor whose page begins at row
	// k*Every (row 0 is the first): nil for k = 0, else the key of row
	// k*Every-1. There is one entry for every k with k*Every < Total (one,
	// nil, when Total is 0).
	Starts []*Cursor
}

// MarkCollector builds ItemMarks from the keys of a filter's rows, given
// in ListItems' order (a store that walks every key uses it).
type MarkCollector struct {
	m ItemMarks
}

// NewMarkCollector starts marks every `every` rows (EINVALID below 1).
func NewMarkCollector(every int) (*MarkCollector, error) {
	if every < 1 {
		return nil, FieldErrorf("every", "must be at least 1, not %d", every)
	}
	return &MarkCollector{m: ItemMarks{Every: every, Starts: []*Cursor{nil}}}, nil
}

// Add counts the next row, whose key is (updatedAt, id).
func (c *MarkCollector) Add(updatedAt time.Time, id int64) {
	c.m.Total++
	if c.m.Total%int64(c.m.Every) == 0 {
		c.m.Starts = append(c.m.Starts, &Cursor{UpdatedAt: updatedAt, ID: id})
	}
}

// Marks returns the index; a last mark with no row after it is dropped.
func (c *MarkCollector) Marks() *ItemMarks {
	m := c.m
	if n := int((m.Total + int64(m.Every) - 1) / int64(m.Every)); n >= 1 && len(m.Starts) > n {
		m.Starts = m.Starts[:n]
	}
	return &m
}

// ScanItemsParams are the arguments of Store.ScanItems.
type ScanItemsParams struct {
	JobID int64
	// Statuses filters; empty means every status.
	Statuses []ItemStatus
	// WithInput includes input and normalised input.
	WithInput bool
	// GridOnly fills only what the grid's cells show: JobID, Seq, Status,
	// Attempts, LastError and Result. ID and UpdatedAt may be left zero (a
	// store may read less for them: the export walks a million rows, and
	// each value a row hands over costs). It excludes WithInput (EINVALID).
	GridOnly bool
}

// ReprocessParams are the arguments of Store.ReprocessItems. With ItemIDs,
// exactly those items (of the job, in a terminal status) are reprocessed;
// otherwise every item of the job in one of Statuses (default ERROR and
// NOT_FOUND).
type ReprocessParams struct {
	JobID         int64
	ItemIDs       []int64
	Statuses      []ItemStatus
	ResetAttempts bool
	Now           time.Time
}

// Elector decides which one of many processes sharing a store runs a duty
// (reaping expired leases, scheduling). TryLead returns true while this
// process holds the duty; it never waits for another holder.
type Elector interface {
	TryLead(ctx context.Context) (bool, error)
}

// ElectingStore is a Store shared by processes on many machines that can
// elect one of them per duty (PostgreSQL's advisory locks). A store without
// it is used by one process at a time in this respect: every runner on it
// does every duty, which is safe, only redundant.
type ElectingStore interface {
	// Elector returns the election of one duty; every process names the
	// same duty the same way ("reaper", "scheduler").
	Elector(duty string) Elector
}
