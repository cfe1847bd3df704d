package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// Desktop is what the desktop window's JavaScript may call in Go besides
// the HTTP API (which it reaches through Wails' asset server, like a
// browser): only what a browser cannot do. It converts arguments and calls
// the same code as the API and the CLI; the Wails wiring (desktop_wails.go,
// built with -tags desktop) fills its Func fields with the runtime's
// dialogs, events and the OS notification.
type Desktop struct {
	// local is the API as the desktop window's user (api.LocalHandler).
	local http.Handler
	env   *Env
	ing   *engine.Ingester
	log   *slog.Logger

	// SaveDialogFunc asks where to save a file (suggested name and
	// extension); "" means the person cancelled.
	SaveDialogFunc func(suggested, ext string) (string, error)
	// EmitFunc sends an event to the window's JavaScript.
	EmitFunc func(name string, data any)
	// NotifyFunc shows an OS notification.
	NotifyFunc func(title, body string) error
}

// exportPath is the one kind of address SaveExport fetches: the grid's
// own export link.
var exportPath = regexp.MustCompile(`^/api/jobs/(\d+)/export$`)

// SaveExport asks where to save an export, then writes the answer of the
// export link (the same address the browser downloads, so the file holds
// exactly what the grid shows) to that file. It returns the path written,
// or "" when the person cancelled. The file appears whole or not at all.
func (d *Desktop) SaveExport(link string) (string, error) {
	u, err := url.Parse(link)
	if err != nil || u.Host != "" || u.Scheme != "" {
		return "", fmt.Errorf("not an export link: %q", link)
	}
	m := exportPath.FindStringSubmatch(u.Path)
	if m == nil {
		return "", fmt.Errorf("not an export link: %q", link)
	}
	format := u.Query().Get("format")
	if format == "" {
		format = "csv"
	}
	target, err := d.SaveDialogFunc(fmt.Sprintf("job-%s.%s", m[1], format), format)
	if err != nil || target == "" {
		return "", err
	}
	if err := d.saveFrom(u.RequestURI(), target); err != nil {
		d.log.Warn("saving an export failed", "link", link, "file", target, "err", err)
		return "", err
	}
	return target, nil
}

// saveFrom writes the answer of a GET of the local API to target, through
// a temporary file beside it renamed at the end.
func (d *Desktop) saveFrom(uri, target string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*.part")
	if err != nil {
		return fmt.Errorf("save export: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := &fileAnswer{f: tmp, header: http.Header{}}
	d.local.ServeHTTP(w, httptest.NewRequestWithContext(context.Background(), http.MethodGet, uri, nil))
	if w.err != nil {
		return fmt.Errorf("save export: %w", w.err)
	}
	if w.code != 0 && w.code != http.StatusOK {
		return errors.New(apiMessage(tmp, w.code))
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("save export: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save export: %w", err)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return fmt.Errorf("save export: %w", err)
	}
	return nil
}

// apiMessage reads the API's error message from an error answer written
// to f.
func apiMessage(f *os.File, code int) string {
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if _, err := f.Seek(0, io.SeekStart); err == nil {
		_ = json.NewDecoder(io.LimitReader(f, 1<<20)).Decode(&body)
	}
	if body.Error.Message != "" {
		return body.Error.Message
	}
	return fmt.Sprintf("the export failed (HTTP %d)", code)
}

// fileAnswer is an http.ResponseWriter that writes the body to a file.
type fileAnswer struct {
	f      *os.File
	header http.Header
	code   int
	err    error
}

func (a *fileAnswer) Header() http.Header { return a.header }
func (a *fileAnswer) WriteHeader(code int) {
	if a.code == 0 {
		a.code = code
	}
}
func (a *fileAnswer) Write(b []byte) (int, error) {
	if a.code == 0 {
		a.code = http.StatusOK
	}
	n, err := a.f.Write(b)
	if err != nil && a.err == nil {
		a.err = err
	}
	return n, err
}

// DroppedFile is what became of one file dropped on the window.
type DroppedFile struct {
	File  string `json:"file"`
	JobID int64  `json:"jobId,omitempty"`
	Items int64  `json:"items,omitempty"`
	Error string `json:"error,omitempty"`
}

// droppedEvent is the event the window gets after a drop.
const droppedEvent = "sluice:dropped"

// dropped makes jobs of files dropped on the window, as `sluice ingest`
// does (a CSV or XLSX file a job each, the images one job), and tells the
// window what became of each.
func (d *Desktop) dropped(ctx context.Context, paths []string) []DroppedFile {
	var outs []DroppedFile
	files, images, err := splitInputs(paths)
	if err != nil {
		outs = append(outs, DroppedFile{File: strings.Join(paths, ", "), Error: err.Error()})
	}
	for _, f := range files {
		o, _ := ingestFile(ctx, d.ing, f, engine.DefaultPipeline, "", defaultCSV())
		outs = append(outs, DroppedFile{File: f, JobID: o.JobID, Items: o.Items, Error: o.Error})
	}
	if len(images) > 0 {
		o, _ := ingestImages(ctx, d.ing, images, ImagePipeline)
		outs = append(outs, DroppedFile{File: o.File, JobID: o.JobID, Items: o.Items, Error: o.Error})
	}
	for _, o := range outs {
		if o.Error != "" {
			d.log.Warn("a dropped file did not become a job", "file", o.File, "err", o.Error)
		}
	}
	if d.EmitFunc != nil {
		d.EmitFunc(droppedEvent, outs)
	}
	return outs
}

// jobFinished shows an OS notification for a job this process finished.
func (d *Desktop) jobFinished(ctx context.Context, id int64) {
	if d.NotifyFunc == nil {
		return
	}
	j, err := d.env.Store.GetJob(ctx, id)
	if err != nil {
		d.log.Warn("reading a finished job failed", "job_id", id, "err", err)
		return
	}
	title, body := finishedText(j)
	if err := d.NotifyFunc(title, body); err != nil {
		d.log.Info("the OS notification could not be shown", "job_id", id, "err", err)
	}
}

// finishedText is the notification of a finished job.
func finishedText(j *engine.Job) (title, body string) {
	title = fmt.Sprintf("Job %d %s", j.ID, strings.ToLower(string(j.State)))
	c := j.Counts
	body = fmt.Sprintf("%s: %d of %d items done", j.Name, c.Done, j.TotalItems)
	if bad := c.Error + c.NotFound; bad > 0 {
		body += fmt.Sprintf(", %d need a look", bad)
	}
	return title, body
}
