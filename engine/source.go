package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"strings"
	"time"
)

// Source is one place input files arrive from (a watched folder, an FTP
// server, an S3 bucket). Every source follows the same arrival rule (ArrivalRule,
// Stability) and takes objects through the same ledger (Taker), so that
// each object version becomes exactly one job.
type Source interface {
	// Name is the source's name (its SourceRecord's).
	Name() string
	// Run watches the source until ctx is done, taking every object that
	// arrives and is stable. It returns nil when ctx is done.
	Run(ctx context.Context) error
	// Scan looks at the source now (twice, a stability window apart) and
	// takes every stable object it finds.
	Scan(ctx context.Context) (*ScanResult, error)
}

// ScanResult counts what one scan did.
type ScanResult struct {
	// Seen counts the candidate objects listed (ignored names excluded).
	Seen int `json:"seen"`
	// Ingested and Failed count the objects this scan took.
	Ingested int `json:"ingested"`
	Failed   int `json:"failed"`
}

// ObjectInfo is what a listing says about an object.
type ObjectInfo struct {
	// Key is the object's path in the source, with "/" separators.
	Key   string
	Size  int64
	MTime time.Time
	// ETag is the server's version tag, when it has one.
	ETag string
}

// sameVersion reports whether two looks saw the same version.
func (o ObjectInfo) sameVersion(p ObjectInfo) bool {
	return o.Size == p.Size && o.MTime.Equal(p.MTime) && o.ETag == p.ETag
}

// DefaultMinAge is the stability window when a source sets none.
const DefaultMinAge = 500 * time.Millisecond

// defaultIgnore are the names every source ignores: files still being
// written by browsers, downloaders and office programs (dotfiles too).
var defaultIgnore = []string{"*.part", "*.partial", "*.tmp", "*.crdownload", "~$*"}

// ArrivalRule says when a source takes an object. It is part of every
// source's config (JSON).
type ArrivalRule struct {
	// MinAgeMS is the stability window in milliseconds: an object is taken
	// once its mtime is at least this old and two looks at least this far
	// apart saw the same size, mtime and etag. 0 = DefaultMinAge.
	MinAgeMS int64 `json:"minAgeMs,omitempty"`
	// Ignore are more glob patterns (path.Match) of names to ignore,
	// matched against the base name and the whole key.
	Ignore []string `json:"ignore,omitempty"`
	// ReingestChanged: an object that changes after it was ingested
	// becomes a new job. Without it a changed object is left alone.
	ReingestChanged bool `json:"reingestChanged,omitempty"`
}

// MinAge is the stability window.
func (r ArrivalRule) MinAge() time.Duration {
	if r.MinAgeMS <= 0 {
		return DefaultMinAge
	}
	return time.Duration(r.MinAgeMS) * time.Millisecond
}

// Validate checks the globs.
func (r ArrivalRule) Validate() error {
	for _, g := range r.Ignore {
		if _, err := path.Match(g, ""); err != nil {
			return Errorf(EINVALID, "ignore pattern %q: %v", g, err)
		}
	}
	return nil
}

// Ignored reports whether the object named key (with "/" separators) is
// never taken: a dotfile, a partial name, or a configured glob.
func (r ArrivalRule) Ignored(key string) bool {
	base := path.Base(key)
	if strings.HasPrefix(base, ".") {
		return true
	}
	for _, set := range [][]string{defaultIgnore, r.Ignore} {
		for _, g := range set {
			if ok, _ := path.Match(g, base); ok {
				return true
			}
			if ok, _ := path.Match(g, key); ok {
				return true
			}
		}
	}
	return false
}

// Stability remembers the looks at objects not yet taken. It is not safe
// for concurrent use.
type Stability struct {
	minAge time.Duration
	looks  map[string]look
}

type look struct {
	info ObjectInfo
	// since is the first look that saw this version.
	since time.Time
}

// NewStability returns a tracker with the rule's window.
func NewStability(r ArrivalRule) *Stability {
	return &Stability{minAge: r.MinAge(), looks: map[string]look{}}
}

// Look records a look at an object at now and reports whether it is
// stable: the same version was already seen at least the window ago, and
// its mtime is at least the window old. When it is not, Wait says how long
// until it could be.
func (s *Stability) Look(info ObjectInfo, now time.Time) (stable bool, wait time.Duration) {
	prev, ok := s.looks[info.Key]
	if !ok || !prev.info.sameVersion(info) {
		s.looks[info.Key] = look{info: info, since: now}
		return false, s.minAge
	}
	wait = s.minAge - now.Sub(prev.since)
	if !info.MTime.After(now) {
		// An mtime in the future is another clock (a server's, or a
		// listing in its local time zone): only the two looks count.
		wait = max(wait, s.minAge-now.Sub(info.MTime))
	}
	if wait > 0 {
		return false, wait
	}
	return true, 0
}

// Forget drops an object (taken, or gone).
func (s *Stability) Forget(key string) { delete(s.looks, key) }

// Pending returns the keys looked at and not yet taken.
func (s *Stability) Pending() []string {
	out := make([]string, 0, len(s.looks))
	for k := range s.looks {
		out = append(out, k)
	}
	return out
}

// Taker takes stable objects through the ledger into jobs: claim (the
// object INGESTING, in one transaction, so no other look or process takes
// it), copy to a temporary file under TempDir with its size checked and its
// SHA-256 computed, ingest from the copy as a job whose SourceRef names the
// ledger row, then mark the object DONE or FAILED with the job.
//
// A crash at any point leaves the object INGESTING; RecoverSourceObjects
// (Recover) settles it by its job: a job that got past INGESTING makes it
// DONE (it is not ingested again), a failed job or none gives it back to be
// taken again (an INGESTING job is failed by the stale-ingest reaper
// first). Workers never see a job before all its rows are stored, so giving
// an object back never runs half a file.
type Taker struct {
	Store    Store
	Ingester *Ingester
	Clock    Clock
	Log      *slog.Logger
	// TempDir holds the copies while they are ingested.
	TempDir string
	// RecoverAfter is how old a claim must be before Recover settles it
	// (another process may be between its claim and its job). 0 = 1 min.
	RecoverAfter time.Duration
	// Events, when set, receives source.file.ingested for every object
	// that became a job.
	Events *Events
}

// TakeRequest is one stable object to take.
type TakeRequest struct {
	Source *SourceRecord
	Rule   ArrivalRule
	Info   ObjectInfo
	// Open opens the object for reading.
	Open func(ctx context.Context) (io.ReadCloser, error)
}

// TakeResult says what became of an object.
type TakeResult struct {
	// Object is the ledger row: the one claimed, or the one that stood in
	// the way (Claimed false).
	Object  *SourceObject
	Claimed bool
	Job     *Job
	// Err is why a claimed object FAILED, or why its copy was cut short
	// (Retry).
	Err error
	// Retry: the copy was interrupted (ErrInterrupted). The object is not
	// failed: it stays INGESTING until Recover gives it back, and is then
	// taken again.
	Retry bool
}

func (t *Taker) now() time.Time {
	if t.Clock == nil {
		return time.Now()
	}
	return t.Clock.Now()
}

func (t *Taker) log() *slog.Logger {
	if t.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return t.Log
}

// Recover settles the source's stale INGESTING objects.
func (t *Taker) Recover(ctx context.Context, source string) (int, error) {
	after := t.RecoverAfter
	if after <= 0 {
		after = time.Minute
	}
	now := t.now()
	return t.Store.RecoverSourceObjects(ctx, &RecoverSourceObjectsParams{Source: source, Before: now.Add(-after), Now: now})
}

// Settle settles the source's stale claims (Recover), logging what it did.
func (t *Taker) Settle(ctx context.Context, source string) {
	if n, err := t.Recover(ctx, source); err != nil {
		t.log().Warn("recover source objects", "source", source, "err", err)
	} else if n > 0 {
		t.log().Info("settled interrupted ingests", "source", source, "objects", n)
	}
}

// RecordPoll notes a look at the source in the store: its time, and err
// ("" for a good look, which clears the last error). It returns err. A
// look cut short by ctx is not recorded: stopping is not the source's
// fault.
func (t *Taker) RecordPoll(ctx context.Context, source string, err error) error {
	if ctx.Err() != nil {
		return err
	}
	msg := ""
	if err != nil {
		msg = ErrorMessage(err)
		if ErrorCode(err) == EINTERNAL {
			msg = err.Error()
		}
	}
	if rerr := t.Store.RecordSourcePoll(context.WithoutCancel(ctx), source, msg, t.now()); rerr != nil && !IsNotFound(rerr) {
		t.log().Warn("record source poll", "source", source, "err", rerr)
	}
	return err
}

// Take takes one stable object. The error is an error of the store or of
// ctx (the object's fate is then settled by Recover); an object that could
// not be read or ingested is FAILED in the result, with Err.
func (t *Taker) Take(ctx context.Context, req TakeRequest) (*TakeResult, error) {
	obj, claimed, err := t.Store.ClaimSourceObject(ctx, &ClaimSourceObjectParams{
		Source: req.Source.Name, Key: req.Info.Key, Size: req.Info.Size, MTime: req.Info.MTime, ETag: req.Info.ETag,
		Reingest: req.Rule.ReingestChanged, Now: t.now(),
	})
	if err != nil || !claimed {
		return &TakeResult{Object: obj}, err
	}
	res := &TakeResult{Object: obj, Claimed: true}
	log := t.log().With("source", req.Source.Name, "key", req.Info.Key, "object_id", obj.ID)
	tmp, sum, err := t.fetch(ctx, req)
	if tmp != "" {
		defer os.Remove(tmp)
	}
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if errors.Is(err, ErrInterrupted) {
			// Nothing was ingested: like a crash, the claim waits for
			// Recover, which gives the object back to be copied again.
			log.Warn("source object copy interrupted: retried later", "err", err)
			res.Err, res.Retry = err, true
			return res, nil
		}
		return t.finish(ctx, res, log, nil, sum, err)
	}
	f, err := os.Open(tmp)
	if err != nil {
		return t.finish(ctx, res, log, nil, sum, err)
	}
	defer f.Close()
	ing, err := t.Ingester.IngestCSV(ctx, IngestRequest{
		Pipeline: req.Source.Pipeline, Name: path.Base(req.Info.Key), Source: JobSource, SourceRef: SourceObjectRef(obj.ID),
		Input: f, Path: tmp,
	})
	var job *Job
	if ing != nil {
		job = ing.Job
	}
	if err != nil && ctx.Err() != nil {
		// Interrupted: the job is FAILED as interrupted and the object
		// stays INGESTING until Recover gives it back.
		return res, ctx.Err()
	}
	return t.finish(ctx, res, log, job, sum, err)
}

// finish records the outcome of a claimed object.
func (t *Taker) finish(ctx context.Context, res *TakeResult, log *slog.Logger, job *Job, sum string, ingestErr error) (*TakeResult, error) {
	p := &FinishSourceObjectParams{ID: res.Object.ID, State: ObjectDone, SHA256: sum, Now: t.now()}
	if job != nil {
		p.JobID = job.ID
	}
	if ingestErr != nil {
		p.State, p.Error = ObjectFailed, ErrorMessage(ingestErr)
		if ErrorCode(ingestErr) == EINTERNAL {
			p.Error = ingestErr.Error()
		}
		res.Err = ingestErr
		log.Warn("source object failed", "err", p.Error)
	} else {
		log.Info("source object ingested", "job_id", p.JobID)
	}
	obj, err := t.Store.FinishSourceObject(context.WithoutCancel(ctx), p)
	if err != nil {
		return res, err
	}
	res.Object, res.Job = obj, job
	if ingestErr == nil && job != nil {
		t.Events.Publish(Event{Name: EventFileIngested, Subject: SourceObjectRef(obj.ID), At: t.now(), Data: map[string]any{
			"source": obj.Source, "key": obj.Key, "size": obj.Size, "sha256": sum, "jobId": job.ID,
			"pipeline": job.Pipeline, "rows": job.TotalItems, "objectId": obj.ID,
		}})
	}
	return res, nil
}

// ErrChanged means an object changed while it was copied.
var ErrChanged = errors.New("the file changed while it was copied")

// ErrInterrupted marks an error of the way to the object (a connection
// dropped, a server gone), not of the object: its copy is retried.
var ErrInterrupted = errors.New("copy interrupted")

// Interrupted wraps err as ErrInterrupted (nil stays nil).
func Interrupted(err error) error {
	if err == nil || errors.Is(err, ErrInterrupted) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrInterrupted, err)
}

// fetch copies the object to a new temporary file and returns its path and
// SHA-256. A copy whose size is not the listed one is ErrChanged.
func (t *Taker) fetch(ctx context.Context, req TakeRequest) (string, string, error) {
	if err := os.MkdirAll(t.TempDir, 0o700); err != nil {
		return "", "", err
	}
	rc, err := req.Open(ctx)
	if err != nil {
		return "", "", err
	}
	defer rc.Close()
	// The temporary name is the ledger's, never the object's: a hostile
	// name cannot reach outside TempDir. The extension is kept for type
	// detection when it is plain.
	ext := path.Ext(req.Info.Key)
	if len(ext) > 8 || strings.ContainsAny(ext, `/\ `) {
		ext = ""
	}
	f, err := os.CreateTemp(t.TempDir, "source-*"+ext)
	if err != nil {
		return "", "", err
	}
	name := f.Name()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), ctxReader{ctx, rc})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return name, "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if n != req.Info.Size {
		return name, sum, fmt.Errorf("%w (%d bytes copied, %d listed)", ErrChanged, n, req.Info.Size)
	}
	return name, sum, nil
}

// ctxReader stops a copy when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
