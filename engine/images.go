package engine

import (
	"context"
	"encoding/json"
	"fmt"
)

// ImageFile is one image to ingest: the item's input is its metadata, and
// the image processor reads the file at Path.
type ImageFile struct {
	Path      string `json:"path"`
	Name      string `json:"name"`
	Size      int64  `json:"size"`
	MediaType string `json:"mediaType,omitempty"`
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
