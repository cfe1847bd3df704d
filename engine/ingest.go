package engine

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine/adapt"
	"github.com/sluicehq/sluice/engine/tabular"
)

// Ingester persists the rows of input files as the items of new jobs, in
// adaptive batches, before anything processes them (persist-first).
type Ingester struct {
	store    Store
	notifier *Notifier
	clock    Clock
	log      *slog.Logger
	cfg      adapt.IngestConfig
	events   *Events

	// A small cache keeps two catalogue reads off every small enqueue:
	// the default user never changes; pipelines are re-read after
	// pipelineTTL, like the runner's.
	mu          sync.Mutex
	defaultUser int64
	pipelines   map[string]cachedPipeline
}

type cachedPipeline struct {
	p  *Pipeline
	at time.Time
}

// IngesterConfig configures an Ingester.
type IngesterConfig struct {
	Store    Store
	Notifier *Notifier
	Clock    Clock
	Logger   *slog.Logger
	Batch    adapt.IngestConfig
	// Events, when set, receives job.failed for an input that could not
	// be read.
	Events *Events
}

// NewIngester validates the configuration and returns an ingester.
func NewIngester(c IngesterConfig) (*Ingester, error) {
	if c.Store == nil {
		return nil, errors.New("ingester: no store")
	}
	batch := c.Batch.WithDefaults()
	if err := batch.Validate(); err != nil {
		return nil, Errorf(EINVALID, "%v", err)
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return &Ingester{store: c.Store, notifier: c.Notifier, clock: c.Clock, log: c.Logger.WithGroup("ingest"), cfg: batch, events: c.Events,
		pipelines: map[string]cachedPipeline{}}, nil
}

// resolve fills in the default user and pipeline name and returns the
// pipeline, or EINVALID when it does not exist.
func (g *Ingester) resolve(ctx context.Context, userID *int64, name *string) (*Pipeline, error) {
	if *name == "" {
		*name = DefaultPipeline
	}
	now := g.clock.Now()
	g.mu.Lock()
	uid := g.defaultUser
	cp, ok := g.pipelines[*name]
	g.mu.Unlock()
	if *userID == 0 {
		if uid == 0 {
			u, err := g.store.DefaultUser(ctx)
			if err != nil {
				return nil, err
			}
			uid = u.ID
			g.mu.Lock()
			g.defaultUser = uid
			g.mu.Unlock()
		}
		*userID = uid
	}
	if ok && now.Sub(cp.at) < pipelineTTL {
		return cp.p, nil
	}
	pl, err := g.store.GetPipeline(ctx, *name)
	if IsNotFound(err) {
		return nil, Errorf(EINVALID, "pipeline %q does not exist (see `sluice pipelines`)", *name)
	}
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.pipelines[*name] = cachedPipeline{p: pl, at: now}
	g.mu.Unlock()
	return pl, nil
}

// IngestRequest describes one file to ingest.
type IngestRequest struct {
	UserID    int64
	Pipeline  string
	Name      string
	Source    string
	SourceRef string
	FileID    int64
	Priority  int
	// Input is read once, streaming (CSV).
	Input io.Reader
	CSV   tabular.Options
	// Path names the input file. XLSX needs it (a workbook is a zip, read
	// by random access); a file whose first bytes are a zip signature is
	// read as XLSX when Path is set.
	Path string
	// Sheet is the XLSX sheet to read; "" = the first.
	Sheet string
	// Progress, when set, is called after each committed batch with the
	// number of rows stored so far.
	Progress func(rows int64)
}

// IngestResult reports an ingest.
type IngestResult struct {
	Job *Job
	// Rows is the number of items stored (SKIPPED rows included).
	Rows    int64
	Skipped int64
	Took    time.Duration
	// Batches and FinalBatch describe the adaptive batching.
	Batches    int
	FinalBatch int
}

// IngestCSV creates a job from a CSV stream. The job is QUEUED (or DONE when
// no row needs processing) only once every row is durable. When the input
// cannot be read as CSV, the job is FAILED with the line and the reason and
// the error is returned with the job.
func (g *Ingester) IngestCSV(ctx context.Context, req IngestRequest) (*IngestResult, error) {
	pl, err := g.resolve(ctx, &req.UserID, &req.Pipeline)
	if err != nil {
		return nil, err
	}
	start := g.clock.Now()
	job, err := g.store.CreateJob(ctx, &CreateJobParams{
		UserID: req.UserID, Pipeline: pl.Name, Name: req.Name, Source: req.Source, SourceRef: req.SourceRef,
		FileID: req.FileID, Priority: req.Priority + pl.Priority, MaxAttempts: pl.MaxLeaseAttempts(), RequestCap: pl.MaxRequestsPerJob, Now: start,
	})
	if err != nil {
		return nil, err
	}
	log := g.log.With("job_id", job.ID)
	log.Debug("job created", "state", job.State, "pipeline", pl.Name, "name", req.Name)
	res := &IngestResult{Job: job}
	if err := g.ingestRows(ctx, job.ID, req, res, log); err != nil {
		reason := ErrorMessage(err)
		var fe *tabular.FormatError
		if errors.As(err, &fe) {
			reason = fmt.Sprintf("%s: %s", displayName(req.Name), fe.Error())
		} else if ctx.Err() != nil {
			reason = "ingest interrupted: " + ctx.Err().Error()
		} else if ErrorCode(err) == EINTERNAL {
			reason = "ingest failed: " + err.Error()
		}
		// The failure must be recorded even when ctx is done.
		failed, ferr := g.store.FailJob(context.WithoutCancel(ctx), &FailJobParams{JobID: job.ID, Reason: reason, Now: g.clock.Now()})
		if ferr == nil {
			res.Job = failed
			g.events.Publish(JobEvent(EventJobFailed, failed, g.clock.Now()))
		}
		// The caller gets the error; this is the log's record of it.
		log.Info("ingest failed", "reason", reason, "rows", res.Rows)
		if fe != nil {
			return res, Errorf(EINVALID, "%s", reason)
		}
		return res, err
	}
	done, err := g.store.FinishIngest(ctx, &FinishIngestParams{JobID: job.ID, Now: g.clock.Now()})
	if err != nil {
		return res, err
	}
	res.Job = done
	res.Took = g.clock.Now().Sub(start)
	log.Debug("job ingested", "state", done.State, "rows", res.Rows, "skipped", res.Skipped, "took", res.Took)
	g.notifier.Notify()
	return res, nil
}

func displayName(name string) string {
	if name == "" {
		return "input"
	}
	return name
}

type rowBatch struct {
	items []NewItem
	bytes int
}

// ingestRows parses on one goroutine and inserts on this one, so that
// parsing and encoding overlap with SQLite's work on a second core.
func (g *Ingester) ingestRows(ctx context.Context, jobID int64, req IngestRequest, res *IngestResult, log *slog.Logger) error {
	r, err := openRows(req, log)
	if err != nil {
		return err
	}
	defer r.Close()
	ctrl := adapt.NewIngest(g.cfg)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// One batch waits while one is inserted and one is parsed: memory
	// stays bounded by three batches of MaxBatchBytes.
	batches := make(chan rowBatch, 1)
	parseErr := make(chan error, 1)
	go func() {
		defer close(batches)
		parseErr <- g.parse(ctx, r, ctrl, batches)
	}()
	for b := range batches {
		t0 := time.Now()
		err := g.store.InsertItems(ctx, &InsertItemsParams{JobID: jobID, Items: b.items, Now: g.clock.Now()})
		ctrl.Observe(len(b.items), b.bytes, time.Since(t0), err)
		if err != nil {
			cancel()
			for range batches {
			}
			<-parseErr
			return fmt.Errorf("store rows: %w", err)
		}
		res.Batches++
		res.Rows += int64(len(b.items))
		for i := range b.items {
			if b.items[i].Status == ItemSkipped {
				res.Skipped++
			}
		}
		if req.Progress != nil {
			req.Progress(res.Rows)
		}
	}
	res.FinalBatch = ctrl.Rows()
	return <-parseErr
}

func (g *Ingester) parse(ctx context.Context, r rowSource, ctrl *adapt.Ingest, out chan<- rowBatch) error {
	header, keys := r.Header(), r.Keys()
	var seq int64
	b := rowBatch{items: make([]NewItem, 0, ctrl.Rows())}
	// Rows' JSON is appended to one buffer; items slice into it (a buffer
	// that grows leaves earlier items on the old array, which they keep).
	buf := make([]byte, 0, 64<<10)
	send := func() error {
		select {
		case out <- b:
		case <-ctx.Done():
			return ctx.Err()
		}
		b = rowBatch{items: make([]NewItem, 0, ctrl.Rows())}
		buf = make([]byte, 0, max(cap(buf), 64<<10))
		return nil
	}
	for {
		row, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		seq++
		start := len(buf)
		buf = tabular.AppendObject(buf, header, row.Fields, false)
		mid := len(buf)
		buf = tabular.AppendObject(buf, keys, row.Fields, true)
		it := NewItem{Seq: seq, Status: ItemPending}
		it.Input = buf[start:mid:mid]
		if bytes.Equal(buf[mid:], it.Input) {
			// Canonical headers and clean values: one copy serves both.
			buf = buf[:mid]
			it.Normalized = it.Input
		} else {
			it.Normalized = buf[mid:len(buf):len(buf)]
		}
		if row.Err != "" {
			it.Status = ItemSkipped
			it.LastError = row.Err
		}
		b.items = append(b.items, it)
		b.bytes += len(buf) - start
		if len(b.items) >= ctrl.Rows() || b.bytes >= ctrl.MaxBytes() {
			if err := send(); err != nil {
				return err
			}
		}
	}
	if len(b.items) > 0 {
		return send()
	}
	return nil
}

// rowSource is what ingest reads rows from: a CSV stream or an XLSX sheet.
type rowSource interface {
	Header() []string
	Keys() []string
	Next() (*tabular.Row, error)
	Close() error
}

// csvSource adapts the CSV reader (which owns no resource) to rowSource.
type csvSource struct{ *tabular.CSVReader }

func (csvSource) Close() error { return nil }

// openRows opens the request's input: XLSX when it starts with a zip
// signature (a workbook) and has a path, CSV otherwise.
func openRows(req IngestRequest, log *slog.Logger) (rowSource, error) {
	in := bufio.NewReaderSize(req.Input, 64<<10)
	head, _ := in.Peek(4)
	if tabular.IsXLSX(head) {
		if req.Path == "" {
			return nil, &tabular.FormatError{Reason: "an XLSX workbook can only be ingested from a file"}
		}
		x, err := tabular.OpenXLSX(req.Path, tabular.XLSXOptions{Sheet: req.Sheet})
		if err != nil {
			return nil, err
		}
		log.Debug("reading xlsx", "sheet", req.Sheet, "columns", len(x.Header()))
		return x, nil
	}
	// Each row is encoded into JSON before the next is read.
	opts := req.CSV
	opts.ReuseRecord = true
	r, err := tabular.NewCSVReader(in, opts)
	if err != nil {
		return nil, err
	}
	log.Debug("reading csv", "delimiter", string(r.Delimiter()), "encoding", r.Encoding(), "columns", len(r.Header()))
	return csvSource{r}, nil
}
