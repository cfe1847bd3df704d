package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Source kinds.
const (
	SourceFolder = "folder"
	SourceFTP    = "ftp"
	SourceS3     = "s3"
)

// After-actions: what a source does with an object once it is ingested.
const (
	AfterMove   = "move"
	AfterDelete = "delete"
	AfterLeave  = "leave"
)

// Folders (or prefixes) beside a source's files where the after-action
// move puts them: ingested ones in DoneFolder, failed ones in FailedFolder.
// Sources never take files from them.
const (
	DoneFolder   = "done"
	FailedFolder = "failed"
)

// ParseAfter checks an after-action ("" = move).
func ParseAfter(s string) (string, error) {
	switch s {
	case "":
		return AfterMove, nil
	case AfterMove, AfterDelete, AfterLeave:
		return s, nil
	}
	return "", Errorf(EINVALID, "after-action %q: want move, delete or leave", s)
}

// SourceRecord is a configured source as stored: where files arrive, which
// pipeline their jobs run, and how the source has fared.
type SourceRecord struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Config is the kind's own settings (a folder's path, recursion, ...).
	// It never holds secrets: those are named, not stored.
	Config   json.RawMessage `json:"config"`
	Pipeline string          `json:"pipeline"`
	After    string          `json:"after"`
	Poll     time.Duration   `json:"poll"`
	Enabled  bool            `json:"enabled"`
	// LastPollAt is when the source last looked, LastError what went wrong
	// then ("" when the look succeeded).
	LastPollAt *time.Time `json:"lastPollAt,omitempty"`
	LastError  string     `json:"lastError,omitempty"`
	// Ingested and Failed count the objects that became jobs and those
	// that could not be ingested.
	Ingested  int64     `json:"ingested"`
	Failed    int64     `json:"failed"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// SourceObjectState is where an object is in the ledger.
type SourceObjectState string

// Ledger states: SEEN (known, not taken: new, or given back after a crash)
// → INGESTING (claimed by one process, its job being written) → DONE (a job
// holds its rows) or FAILED (it could not be read or ingested).
const (
	ObjectSeen      SourceObjectState = "SEEN"
	ObjectIngesting SourceObjectState = "INGESTING"
	ObjectDone      SourceObjectState = "DONE"
	ObjectFailed    SourceObjectState = "FAILED"
)

// SourceObject is one version of one object of a source in the ledger. A
// version is (key, size, mtime, etag): the same version is never ingested
// twice.
type SourceObject struct {
	ID     int64             `json:"id"`
	Source string            `json:"source"`
	Key    string            `json:"key"`
	Size   int64             `json:"size"`
	MTime  time.Time         `json:"mtime"`
	ETag   string            `json:"etag,omitempty"`
	SHA256 string            `json:"sha256,omitempty"`
	JobID  int64             `json:"jobId,omitempty"`
	State  SourceObjectState `json:"state"`
	Error  string            `json:"error,omitempty"`
	// Attempts counts the claims of this version (a crash gives one back).
	Attempts  int       `json:"attempts"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// JobSource is the Source of jobs made by sources; their SourceRef is
// SourceObjectRef of the ledger row, which is how a crash between a job's
// ingest and the ledger's update is resolved (RecoverSourceObjects).
const JobSource = "source"

// SourceObjectRef is the SourceRef of the job made from ledger object id.
func SourceObjectRef(id int64) string { return fmt.Sprintf("source-object:%d", id) }

// SourceStore keeps the configured sources and the ledger of their
// objects. Part of Store.
type SourceStore interface {
	// CreateSource stores a new source (ECONFLICT when the name is taken,
	// EINVALID without a name, kind or pipeline).
	CreateSource(ctx context.Context, src *SourceRecord, now time.Time) (*SourceRecord, error)
	// GetSource returns a source or ErrNotFound.
	GetSource(ctx context.Context, name string) (*SourceRecord, error)
	// ListSources returns every source ordered by name.
	ListSources(ctx context.Context) ([]*SourceRecord, error)
	// DeleteSource removes a source with its ledger (ErrNotFound when
	// missing). Jobs it made are kept.
	DeleteSource(ctx context.Context, name string) error
	// RecordSourcePoll notes a look at the source: its time and its error
	// ("" for a good look, which clears the last one).
	RecordSourcePoll(ctx context.Context, name, lastError string, now time.Time) error

	// ClaimSourceObject takes one stable object version for ingest, in one
	// transaction, so that of any number of processes and repeated events
	// exactly one gets Claimed = true, the object INGESTING. A version
	// already in the ledger is claimed only from SEEN. A changed version
	// of a key (other size, mtime or etag) is claimed when the key's latest
	// version FAILED, or when it is DONE and p.Reingest says so; never
	// while another version of the key is INGESTING. The object returned
	// is the claimed one or the one that stood in the way.
	ClaimSourceObject(ctx context.Context, p *ClaimSourceObjectParams) (*SourceObject, bool, error)
	// FinishSourceObject moves an INGESTING object to DONE or FAILED with
	// its job, checksum and error, and counts it on its source; from any
	// other state it is ECONFLICT.
	FinishSourceObject(ctx context.Context, p *FinishSourceObjectParams) (*SourceObject, error)
	// RecoverSourceObjects settles the INGESTING objects of a source
	// claimed before p.Before (their process may have died), by their job
	// (the job whose SourceRef is SourceObjectRef of the object): a job
	// that got past INGESTING (QUEUED, RUNNING, PAUSED, DONE, CANCELED)
	// makes the object DONE with it; a FAILED job or no job at all puts the
	// object back to SEEN, to be claimed again; a job still INGESTING
	// leaves it alone. It returns how many objects it moved.
	RecoverSourceObjects(ctx context.Context, p *RecoverSourceObjectsParams) (int, error)
	// ListSourceObjects returns a source's ledger, newest first.
	ListSourceObjects(ctx context.Context, p *ListSourceObjectsParams) ([]*SourceObject, error)
}

// ClaimSourceObjectParams are the arguments of Store.ClaimSourceObject.
type ClaimSourceObjectParams struct {
	Source string
	Key    string
	Size   int64
	MTime  time.Time
	ETag   string
	// Reingest: a DONE key whose object changed becomes a new job.
	Reingest bool
	Now      time.Time
}

// FinishSourceObjectParams are the arguments of Store.FinishSourceObject.
type FinishSourceObjectParams struct {
	ID int64
	// State is ObjectDone or ObjectFailed.
	State  SourceObjectState
	JobID  int64
	SHA256 string
	Error  string
	Now    time.Time
}

// RecoverSourceObjectsParams are the arguments of Store.RecoverSourceObjects.
type RecoverSourceObjectsParams struct {
	Source string
	Before time.Time
	Now    time.Time
}

// ListSourceObjectsParams are the arguments of Store.ListSourceObjects.
type ListSourceObjectsParams struct {
	Source string
	// States filters; empty means every state.
	States []SourceObjectState
	// Limit 0 means every object.
	Limit int
}
