package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/tabular"
)

// ImagePipeline is the built-in pipeline image uploads use by default.
const ImagePipeline = "image"

type createdJob struct {
	JobID   int64  `json:"jobId"`
	File    string `json:"file,omitempty"`
	Items   int64  `json:"items"`
	Skipped int64  `json:"skipped"`
	State   string `json:"state"`
}

type createOut struct {
	// JobID is the first job made (the only one for one file).
	JobID int64        `json:"jobId"`
	Jobs  []createdJob `json:"jobs"`
}

// createJob takes a multipart upload (CSV, XLSX or images in field "file")
// or a JSON list of items, and answers 201 once every row is durable.
func (s *Server) createJob(w http.ResponseWriter, r *http.Request, c *caller) error {
	if s.cfg.Ingester == nil {
		return engine.Errorf(engine.ECONFLICT, "this server does not take new jobs")
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxUploadBytes)
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var out *createOut
	var err error
	switch mt {
	case "application/json":
		out, err = s.createFromJSON(r, c)
	case "multipart/form-data":
		out, err = s.createFromUpload(r, c)
	default:
		return engine.Errorf(engine.EUNSUPPORTED, "send multipart/form-data (field \"file\", plus \"pipeline\") or application/json {\"pipeline\":...,\"items\":[...]}; got %q", mt)
	}
	if out != nil {
		for _, j := range out.Jobs {
			s.audit(r, c, "job.create", jobObject(j.JobID), fmt.Sprintf("%s, %d items", j.File, j.Items))
		}
		s.events.poke()
	}
	if err != nil {
		return withStoredJobs(err, out)
	}
	if len(out.Jobs) == 0 {
		return engine.FieldErrorf("file", "the upload holds no file")
	}
	out.JobID = out.Jobs[0].JobID
	return writeJSON(w, http.StatusCreated, out)
}

// withStoredJobs adds to an upload's error the jobs that earlier files of
// the same upload made: they are stored and will run, and the caller
// should know their ids.
func withStoredJobs(err error, out *createOut) error {
	if out == nil || engine.ErrorCode(err) == engine.EINTERNAL {
		return err
	}
	var kept []string
	for _, j := range out.Jobs {
		if j.State != string(engine.JobFailed) {
			kept = append(kept, fmt.Sprintf("job %d from %s", j.JobID, j.File))
		}
	}
	if len(kept) == 0 {
		return err
	}
	return engine.Errorf(engine.ErrorCode(err), "%s (stored before it: %s)", engine.ErrorMessage(err), strings.Join(kept, ", "))
}

type itemsIn struct {
	Pipeline string            `json:"pipeline"`
	Name     string            `json:"name"`
	Priority int               `json:"priority"`
	Items    []json.RawMessage `json:"items"`
}

func (s *Server) createFromJSON(r *http.Request, c *caller) (*createOut, error) {
	var in itemsIn
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, engine.Errorf(engine.EINVALID, "the request body is not the JSON expected: %v", err)
	}
	if len(in.Items) == 0 {
		return nil, engine.FieldErrorf("items", "give at least one item")
	}
	if len(in.Items) > engine.MaxEnqueueRows {
		return nil, engine.Errorf(engine.ETOOLARGE, "items: at most %d items in one request (got %d); upload a file for more", engine.MaxEnqueueRows, len(in.Items))
	}
	for i, it := range in.Items {
		if t := bytes.TrimSpace(it); len(t) == 0 || t[0] != '{' {
			return nil, engine.Errorf(engine.EINVALID, "items[%d]: an item is a JSON object", i)
		}
	}
	if in.Pipeline == "" {
		in.Pipeline = engine.DefaultPipeline
	}
	if in.Name == "" {
		in.Name = fmt.Sprintf("%d items", len(in.Items))
	}
	j, err := s.cfg.Ingester.Enqueue(r.Context(), engine.EnqueueRequest{UserID: c.user.ID, Pipeline: in.Pipeline, Name: in.Name,
		Source: "api", Priority: in.Priority, Rows: in.Items})
	if err != nil {
		return nil, err
	}
	return &createOut{Jobs: []createdJob{{JobID: j.ID, Items: j.TotalItems, Skipped: j.Counts.Skipped, State: string(j.State)}}}, nil
}

// uploadForm holds the non-file fields of an upload.
type uploadForm struct {
	pipeline, name, sheet string
	pipelineSet           bool
	priority              int
	csv                   tabular.Options
}

func (f *uploadForm) set(field, v string) error {
	switch field {
	case "pipeline":
		f.pipeline, f.pipelineSet = v, true
	case "name":
		f.name = v
	case "sheet":
		f.sheet = v
	case "priority":
		n, err := strconv.Atoi(v)
		if err != nil {
			return engine.FieldErrorf("priority", "%q is not a whole number", v)
		}
		f.priority = n
	case "encoding":
		if err := tabular.CheckEncoding(v); err != nil {
			return engine.FieldErrorf("encoding", "%v", err)
		}
		f.csv.Encoding = v
	case "delimiter":
		d, err := tabular.ParseDelimiter(v)
		if err != nil {
			return engine.FieldErrorf("delimiter", "%v", err)
		}
		f.csv.Delimiter = d
	default:
		return engine.Errorf(engine.EINVALID, "unknown form field %q (fields: file, pipeline, name, sheet, priority, encoding, delimiter)", field)
	}
	return nil
}

// createFromUpload streams the parts: a CSV is ingested straight from the
// request; an XLSX is spooled to a temporary file (a workbook is read by
// random access); images are spooled under the data directory, then become
// one job whose ingest copies them into the store's blobs (readable by
// every worker machine) and the spool files are removed.
func (s *Server) createFromUpload(r *http.Request, c *caller) (*createOut, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, engine.Errorf(engine.EINVALID, "the upload is not a readable multipart form: %v", err)
	}
	form := uploadForm{pipeline: engine.DefaultPipeline}
	if v := r.URL.Query().Get("pipeline"); v != "" {
		form.pipeline, form.pipelineSet = v, true
	}
	out := &createOut{}
	var images []engine.ImageFile
	sawFile := false
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return out, uploadErr(err)
		}
		if part.FileName() == "" {
			if sawFile && part.FormName() != "file" {
				part.Close()
				return out, engine.FieldErrorf(part.FormName(), "send the form fields before the file")
			}
			v, err := io.ReadAll(io.LimitReader(part, 4097))
			part.Close()
			if err != nil {
				return out, uploadErr(err)
			}
			if len(v) > 4096 {
				return out, engine.FieldErrorf(part.FormName(), "the value is longer than 4096 bytes")
			}
			if err := form.set(part.FormName(), string(v)); err != nil {
				return out, err
			}
			continue
		}
		if part.FormName() != "file" {
			part.Close()
			return out, engine.Errorf(engine.EINVALID, "files go in the form field \"file\" (got %q)", part.FormName())
		}
		sawFile = true
		img, job, err := s.takePart(r, c, part, &form)
		part.Close()
		if job != nil {
			out.Jobs = append(out.Jobs, *job)
		}
		if err != nil {
			s.removeImages(images)
			return out, err
		}
		if img != nil {
			images = append(images, *img)
		}
	}
	if len(images) > 0 {
		pipeline := form.pipeline
		if !form.pipelineSet {
			pipeline = ImagePipeline
		}
		name := form.name
		if name == "" {
			name = fmt.Sprintf("%d images", len(images))
			if len(images) == 1 {
				name = images[0].Name
			}
		}
		res, err := s.cfg.Ingester.IngestImages(r.Context(), engine.IngestRequest{UserID: c.user.ID, Pipeline: pipeline, Name: name,
			Source: "upload", Priority: form.priority}, images)
		// The ingest copied the spooled images into the store's blobs.
		s.removeImages(images)
		if res != nil && res.Job != nil {
			out.Jobs = append(out.Jobs, createdJob{JobID: res.Job.ID, File: name, Items: res.Rows, State: string(res.Job.State)})
		}
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func uploadErr(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	return engine.Errorf(engine.EINVALID, "the upload broke off: %v", err)
}

// sniffLen is how much of a file is looked at to tell what it is.
const sniffLen = 8192

// takePart ingests one file part: a CSV or XLSX becomes a job at once; an
// image is saved and returned for the image job.
func (s *Server) takePart(r *http.Request, c *caller, part *multipart.Part, form *uploadForm) (*engine.ImageFile, *createdJob, error) {
	name := filepath.Base(strings.ReplaceAll(part.FileName(), `\`, "/"))
	br := bufio.NewReaderSize(part, 64<<10)
	head, err := br.Peek(sniffLen)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return nil, nil, uploadErr(err)
	}
	if len(head) == 0 {
		return nil, nil, engine.FieldErrorf("file", "%s is empty", name)
	}
	kind, mt := sniffUpload(name, head)
	switch kind {
	case kindImage:
		img, err := s.saveImage(name, mt, br)
		return img, nil, err
	case kindXLSX:
		job, err := s.ingestXLSX(r, c, name, br, form)
		return nil, job, err
	case kindCSV:
		job, err := s.ingestStream(r, c, name, br, form)
		return nil, job, err
	}
	return nil, nil, engine.Errorf(engine.EUNSUPPORTED, "%s: this is not a CSV, XLSX or image file (its content looks like %s)", name, mt)
}

const (
	kindOther = iota
	kindCSV
	kindXLSX
	kindImage
)

// sniffUpload tells what a file is from its first bytes, not its name: a
// binary file named .csv is refused.
func sniffUpload(name string, head []byte) (kind int, mediaType string) {
	mt := http.DetectContentType(head)
	ext := strings.ToLower(filepath.Ext(name))
	switch {
	case strings.HasPrefix(mt, "image/"):
		return kindImage, mt
	case bytes.HasPrefix(head, []byte("PK\x03\x04")):
		if ext == ".xlsx" || ext == ".xlsm" {
			return kindXLSX, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
		}
		return kindOther, "a zip archive (an XLSX workbook must be named .xlsx)"
	case bytes.HasPrefix(head, []byte{0xFF, 0xFE}), bytes.HasPrefix(head, []byte{0xFE, 0xFF}):
		return kindCSV, "text/csv; charset=utf-16"
	case strings.HasPrefix(mt, "text/plain"), strings.HasPrefix(mt, "text/csv"):
		return kindCSV, "text/csv"
	}
	if mt == "application/octet-stream" {
		mt = "binary data"
	}
	return kindOther, mt
}

func (s *Server) ingestStream(r *http.Request, c *caller, name string, in io.Reader, form *uploadForm) (*createdJob, error) {
	res, err := s.cfg.Ingester.IngestCSV(r.Context(), engine.IngestRequest{UserID: c.user.ID, Pipeline: form.pipeline,
		Name: nameOr(form.name, name), Source: "upload", SourceRef: name, Input: in, CSV: form.csv, Priority: form.priority})
	return s.ingestResult(name, res, err)
}

func (s *Server) ingestResult(name string, res *engine.IngestResult, err error) (*createdJob, error) {
	var job *createdJob
	if res != nil && res.Job != nil && err == nil {
		s.ingests.set(&ingestStats{JobID: res.Job.ID, Rows: res.Rows, Batches: res.Batches, FinalBatch: res.FinalBatch,
			Ms: float64(res.Took.Microseconds()) / 1000, At: s.now()})
		s.metrics.ingestSeconds.Observe(res.Took.Seconds())
	}
	if res != nil && res.Job != nil {
		job = &createdJob{JobID: res.Job.ID, File: name, Items: res.Rows, Skipped: res.Skipped, State: string(res.Job.State)}
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return job, err
		}
		if engine.ErrorCode(err) == engine.EINTERNAL {
			return job, err
		}
		return job, engine.Errorf(engine.ErrorCode(err), "%s: %s", name, engine.ErrorMessage(err))
	}
	return job, nil
}

func nameOr(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

func (s *Server) uploadDir(sub string) (string, error) {
	base := s.cfg.DataDir
	if base == "" {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "uploads", sub)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create upload folder: %w", err)
	}
	return dir, nil
}

func (s *Server) ingestXLSX(r *http.Request, c *caller, name string, in io.Reader, form *uploadForm) (*createdJob, error) {
	dir, err := s.uploadDir("tmp")
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "upload-*.xlsx")
	if err != nil {
		return nil, fmt.Errorf("spool upload: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = io.Copy(f, in)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, uploadErr(err)
	}
	rf, err := os.Open(f.Name())
	if err != nil {
		return nil, err
	}
	defer rf.Close()
	res, err := s.cfg.Ingester.IngestCSV(r.Context(), engine.IngestRequest{UserID: c.user.ID, Pipeline: form.pipeline,
		Name: nameOr(form.name, name), Source: "upload", SourceRef: name, Input: rf, Path: f.Name(), Sheet: form.sheet, Priority: form.priority})
	return s.ingestResult(name, res, err)
}

// saveImage spools an uploaded image under uploads/tmp/ with a unique
// name, until the image job's ingest copies it into the store.
func (s *Server) saveImage(name, mt string, in io.Reader) (*engine.ImageFile, error) {
	dir, err := s.uploadDir("tmp")
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "*-"+engine.SafeFileName(name))
	if err != nil {
		return nil, fmt.Errorf("save image: %w", err)
	}
	n, err := io.Copy(f, in)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, uploadErr(err)
	}
	return &engine.ImageFile{Path: f.Name(), Name: name, Size: n, MediaType: mt, Spooled: true}, nil
}

func (s *Server) removeImages(images []engine.ImageFile) {
	for _, im := range images {
		os.Remove(im.Path)
	}
}
