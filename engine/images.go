package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ImageFile is one image to ingest: the item's input is its metadata.
// IngestImages copies the file at Path into the store's blobs and records
// the key in Blob; the image processor reads it there, so a worker on any
// machine sharing the store can process it.
type ImageFile struct {
	// Blob is the key of the stored copy (set by IngestImages).
	Blob string `json:"blob,omitempty"`
	// Path is where the file was read from; kept in the input as a
	// reference unless Spooled.
	Path      string `json:"path,omitempty"`
	Name      string `json:"name"`
	Size      int64  `json:"size"`
	MediaType string `json:"mediaType,omitempty"`
	// Spooled marks Path as a temporary copy (an upload) that means
	// nothing once ingested: it is left out of the input.
	Spooled bool `json:"-"`
}

// imageBatch is how many image items one insert transaction carries.
const imageBatch = 1000

// IngestImages creates one job with an item per image file (seed 000: one
// code path for CSV and image jobs). Like a CSV job, it becomes visible to
// workers only once every item is durable.
func (g *Ingester) IngestImages(ctx context.Context, req IngestRequest, files []ImageFile) (*IngestResult, error) {
	if len(files) == 0 {
		return nil, Errorf(EINVALID, "no image files given")
	}
	pl, err := g.resolve(ctx, &req.UserID, &req.Pipeline)
	if err != nil {
		return nil, err
	}
	start := g.clock.Now()
	job, err := g.store.CreateJob(ctx, &CreateJobParams{
		UserID: req.UserID, Pipeline: pl.Name, Name: req.Name, Source: req.Source, SourceRef: req.SourceRef,
		Priority: req.Priority + pl.Priority, MaxAttempts: pl.MaxLeaseAttempts(), RequestCap: pl.MaxRequestsPerJob, Now: start,
	})
	if err != nil {
		return nil, err
	}
	res := &IngestResult{Job: job}
	fail := func(err error) (*IngestResult, error) {
		if failed, ferr := g.store.FailJob(context.WithoutCancel(ctx), &FailJobParams{JobID: job.ID,
			Reason: "ingest failed: " + ErrorMessage(err), Now: g.clock.Now()}); ferr == nil {
			res.Job = failed
		}
		return res, err
	}
	batch := make([]NewItem, 0, min(len(files), imageBatch))
	for i, f := range files {
		if f.Blob == "" {
			if f, err = g.storeImage(ctx, job.ID, int64(i+1), f); err != nil {
				return fail(err)
			}
		}
		in, err := json.Marshal(f)
		if err != nil {
			return fail(fmt.Errorf("encode image %s: %w", f.Path, err))
		}
		batch = append(batch, NewItem{Seq: int64(i + 1), Input: in, Normalized: in, Status: ItemPending})
		if len(batch) == cap(batch) || i == len(files)-1 {
			if err := g.store.InsertItems(ctx, &InsertItemsParams{JobID: job.ID, Items: batch, Now: g.clock.Now()}); err != nil {
				return fail(fmt.Errorf("store image items: %w", err))
			}
			res.Batches++
			res.Rows += int64(len(batch))
			if req.Progress != nil {
				req.Progress(res.Rows)
			}
			batch = batch[:0]
		}
	}
	done, err := g.store.FinishIngest(ctx, &FinishIngestParams{JobID: job.ID, Now: g.clock.Now()})
	if err != nil {
		return res, err
	}
	res.Job = done
	res.Took = g.clock.Now().Sub(start)
	g.log.Debug("image job ingested", "job_id", job.ID, "images", res.Rows)
	g.notifier.Notify()
	return res, nil
}

// storeImage copies the image file of item seq into the job's blobs
// ("jobs/<job>/in/<seq>-<name>") and returns f with the key, streaming it
// one chunk at a time.
func (g *Ingester) storeImage(ctx context.Context, jobID, seq int64, f ImageFile) (ImageFile, error) {
	r, err := os.Open(f.Path)
	if err != nil {
		return f, Errorf(EINVALID, "%s: %v", f.Name, err)
	}
	defer r.Close()
	key := JobBlobKey(jobID, fmt.Sprintf("in/%d-%s", seq, SafeFileName(f.Name)))
	b, err := g.store.PutBlob(ctx, &PutBlobParams{Key: key, JobID: jobID, MediaType: f.MediaType, Body: r, Now: g.clock.Now()})
	if err != nil {
		return f, fmt.Errorf("store image %s: %w", f.Name, err)
	}
	f.Blob, f.Size = b.Key, b.Size
	if f.Spooled {
		f.Path = ""
	}
	return f, nil
}

// SafeFileName keeps the letters, digits, dot, dash and underscore of a
// file's base name (its last 80 bytes at most, no leading dot), for a
// readable blob key or spool file name.
func SafeFileName(name string) string {
	name = filepath.Base(strings.ReplaceAll(name, `\`, "/"))
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	out := b.String()
	if len(out) > 80 {
		out = out[len(out)-80:]
	}
	return strings.TrimLeft(out, ".")
}
