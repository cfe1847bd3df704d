//go:build desktop

package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	wruntime "github.com/wailsapp/wails/v2/pkg/runtime"

	"github.com/sluicehq/sluice/engine"
)

// The desktop smoke test (make desktop-smoke, under Xvfb) sets
// SLUICE_DESKTOP_SMOKE to a file. The window then checks itself once its
// page has listed the jobs through the in-process API: the page uploads a
// CSV with a POST (a request body must reach Go through WebKit), a
// synthetic HTML drop on the page must not navigate away, and a file
// dropped on the window (the Wails drop event) must become a job. The
// outcome is written to the file as JSON, and the process exits non-zero
// when a check failed.

// smokeSeen is one request the window made.
type smokeSeen struct {
	Method string `json:"method"`
	URI    string `json:"uri"`
	Status int    `json:"status"`
	Agent  string `json:"userAgent,omitempty"`
}

// desktopSmoke runs the checks.
type desktopSmoke struct {
	marker string
	env    *Env
	mu     sync.Mutex
	seen   []smokeSeen
	poke   chan struct{}
	// Outcome, written to the marker.
	Requests []smokeSeen   `json:"requests"`
	Upload   *smokeJob     `json:"upload"`
	Dropped  []DroppedFile `json:"dropped"`
	Location string        `json:"locationAfterDrop"`
	Saved    string        `json:"savedExport"`
	dropCh   chan []DroppedFile
	Failures []string `json:"failures"`
	// Passed names the checks that passed, of Checks.
	Passed []string `json:"passed"`
	Checks int      `json:"checks"`
	done   chan struct{}
}

type smokeJob struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	Items int64  `json:"items"`
}

func newDesktopSmoke(env *Env) (*desktopSmoke, error) {
	marker := os.Getenv("SLUICE_DESKTOP_SMOKE")
	if marker == "" {
		return nil, nil
	}
	_ = os.Remove(marker)
	return &desktopSmoke{marker: marker, env: env, poke: make(chan struct{}, 1), done: make(chan struct{})}, nil
}

// wrap records every request of the window.
func (s *desktopSmoke) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &smokeStatus{ResponseWriter: w}
		if strings.HasPrefix(r.URL.Path, "/api/events") {
			s.record(smokeSeen{Method: r.Method, URI: r.URL.RequestURI(), Status: http.StatusOK, Agent: r.UserAgent()})
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(sw, r)
		s.record(smokeSeen{Method: r.Method, URI: r.URL.RequestURI(), Status: sw.code(), Agent: r.UserAgent()})
	})
}

func (s *desktopSmoke) record(e smokeSeen) {
	s.mu.Lock()
	s.seen = append(s.seen, e)
	s.mu.Unlock()
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// waitFor waits until a recorded request matches.
func (s *desktopSmoke) waitFor(ctx context.Context, what string, ok func(smokeSeen) bool) bool {
	for {
		s.mu.Lock()
		for _, e := range s.seen {
			if ok(e) {
				s.mu.Unlock()
				return true
			}
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			s.fail("timed out waiting for " + what)
			return false
		case <-s.poke:
		}
	}
}

func (s *desktopSmoke) fail(msg string) {
	s.mu.Lock()
	s.Failures = append(s.Failures, msg)
	s.mu.Unlock()
}

// smokeChecks is how many checks the smoke test makes.
const smokeChecks = 6

func (s *desktopSmoke) pass(name string) {
	s.mu.Lock()
	s.Passed = append(s.Passed, name)
	s.mu.Unlock()
}

// smokeCSV is what the page uploads.
const smokeCSV = "sku,name\nSMOKE-1,first\nSMOKE-2,second\n"

// start runs the checks once the window is up.
func (s *desktopSmoke) start(wctx context.Context, d *Desktop) {
	go func() {
		defer close(s.done)
		defer s.write()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		if !s.waitFor(ctx, "the page to list the jobs (GET /api/jobs)", func(e smokeSeen) bool {
			return e.Method == "GET" && strings.HasPrefix(e.URI, "/api/jobs?") && e.Status == 200 || e.Method == "GET" && e.URI == "/api/jobs" && e.Status == 200
		}) {
			return
		}
		s.pass("the page loaded and listed the jobs through Go")
		// 1. The page's own upload (the file picker's change event): a
		// POST with a multipart body must reach Go through WebKit.
		// The page asks for the jobs beside /api/me and draws once both
		// are in, so the picker may not be there yet: look for it first.
		wruntime.WindowExecJS(wctx, `(function(){var t0=Date.now();(function look(){`+
			`var inp=document.getElementById("new-files");`+
			`if(!inp){if(Date.now()-t0<20000)setTimeout(look,50);return}`+
			`var dt=new DataTransfer();`+
			`dt.items.add(new File([`+jsString(smokeCSV)+`], "smoke-upload.csv", {type:"text/csv"}));`+
			`inp.files=dt.files;inp.dispatchEvent(new Event("change",{bubbles:true}));})()})()`)
		if !s.waitFor(ctx, "the page's upload (POST /api/jobs answered 201)", func(e smokeSeen) bool {
			return e.Method == "POST" && e.URI == "/api/jobs" && e.Status == http.StatusCreated
		}) {
			return
		}
		s.Upload = s.findJob(ctx, "smoke-upload.csv")
		if s.Upload == nil || s.Upload.Items != 2 {
			s.fail(fmt.Sprintf("the uploaded CSV is not a job of 2 items: %+v", s.Upload))
		} else {
			s.pass("the page's upload became a job")
		}
		// 2. An HTML drop of a file on the page must be cancelled (else
		// WebKit opens the file in place of the app) and leave the page.
		wruntime.WindowExecJS(wctx, `(function(){var dt=new DataTransfer();`+
			`dt.items.add(new File(["x"], "dropped.csv", {type:"text/csv"}));`+
			`var ev=new DragEvent("drop",{dataTransfer:dt,bubbles:true,cancelable:true});`+
			`document.body.dispatchEvent(new DragEvent("dragover",{dataTransfer:dt,bubbles:true,cancelable:true}));`+
			`document.body.dispatchEvent(ev);`+
			`setTimeout(function(){fetch("/api/me?smoke-location="+encodeURIComponent(location.href)+"&smoke-prevented="+ev.defaultPrevented)},300);})()`)
		if !s.waitFor(ctx, "the page to report its address after a drop", func(e smokeSeen) bool {
			return strings.Contains(e.URI, "smoke-location=")
		}) {
			return
		}
		s.mu.Lock()
		for _, e := range s.seen {
			if i := strings.Index(e.URI, "smoke-location="); i >= 0 {
				s.Location, _ = url.QueryUnescape(e.URI[i+len("smoke-location="):])
			}
		}
		s.mu.Unlock()
		if !strings.Contains(s.Location, "smoke-prevented=true") || strings.Contains(s.Location, "file:") {
			s.fail("the page did not cancel an HTML drop (WebKit would open the dropped file): " + s.Location)
		} else {
			s.pass("an HTML drop left the page in place")
		}
		// 3. A file dropped on the window: the event Wails' GTK drop
		// handler sends, with the path; Go makes a job of it and tells
		// the page.
		path := filepath.Join(s.env.Data, "smoke-dropped.csv")
		if err := os.WriteFile(path, []byte("sku\nDROP-1\nDROP-2\nDROP-3\n"), 0o600); err != nil {
			s.fail(err.Error())
			return
		}
		s.dropCh = make(chan []DroppedFile, 1)
		wruntime.EventsEmit(wctx, "wails:file-drop", 0, 0, []string{path})
		select {
		case s.Dropped = <-s.dropCh:
		case <-ctx.Done():
		}
		if len(s.Dropped) != 1 || s.Dropped[0].JobID == 0 || s.Dropped[0].Items != 3 {
			s.fail(fmt.Sprintf("the dropped file did not become a job of 3 items: %+v", s.Dropped))
		} else {
			s.pass("a file dropped on the window became a job")
		}
		// 4. The Jobs page lists both new jobs.
		if s.Upload != nil && len(s.Dropped) == 1 {
			ids := fmt.Sprintf("[%d,%d]", s.Upload.ID, s.Dropped[0].JobID)
			wruntime.WindowExecJS(wctx, `(function(){var ids=`+ids+`,t0=Date.now();(function look(){`+
				`var ok=ids.every(function(id){return !!document.querySelector('table.jobs tr[data-job="'+id+'"]')});`+
				`if(ok||Date.now()-t0>10000){fetch("/api/me?smoke-listed="+ok);return}setTimeout(look,100)})()})()`)
			if s.waitFor(ctx, "the Jobs page to list the new jobs", func(e smokeSeen) bool { return strings.Contains(e.URI, "smoke-listed=") }) {
				if s.sawURI("smoke-listed=true") {
					s.pass("the Jobs page lists the uploaded and the dropped job")
				} else {
					s.fail("the Jobs page did not list the uploaded and the dropped job within 10 s")
				}
			}
		}
		// 5. Save an export through the binding (the Save dialog answers
		// with a path in the data directory).
		target := filepath.Join(s.env.Data, "smoke-export.csv")
		d.SaveDialogFunc = func(string, string) (string, error) { return target, nil }
		wruntime.WindowExecJS(wctx, `window.go.app.Desktop.SaveExport("/api/jobs/1/export?format=csv").then(function(p){fetch("/api/me?smoke-saved="+encodeURIComponent(p))},function(e){fetch("/api/me?smoke-saved=error:"+encodeURIComponent(String(e)))})`)
		if s.waitFor(ctx, "the export to be saved", func(e smokeSeen) bool { return strings.Contains(e.URI, "smoke-saved=") }) {
			b, err := os.ReadFile(target)
			lines := strings.Count(string(b), "\n")
			s.Saved = fmt.Sprintf("%s: %d lines", target, lines)
			if err != nil || lines < 2 {
				s.fail(fmt.Sprintf("the saved export is not the job's rows: %v, %d lines", err, lines))
			} else {
				s.pass("an export was saved where the Save dialog said")
			}
		}
		// Let the page show the new jobs (live updates) before the screenshot.
		time.Sleep(1500 * time.Millisecond)
	}()
}

// findJob finds the job made from a file name.
func (s *desktopSmoke) findJob(ctx context.Context, name string) *smokeJob {
	jobs, err := s.env.Store.ListJobs(ctx, &engine.ListJobsParams{Limit: 100})
	if err != nil {
		s.fail(err.Error())
		return nil
	}
	for _, j := range jobs {
		if j.Name == name {
			return &smokeJob{ID: j.ID, Name: j.Name, Items: j.TotalItems}
		}
	}
	return nil
}

func (s *desktopSmoke) write() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Requests = s.seen
	s.Checks = smokeChecks
	b, err := json.MarshalIndent(s, "", "  ")
	if err == nil {
		tmp := s.marker + ".tmp"
		if err = os.WriteFile(tmp, b, 0o600); err == nil {
			err = os.Rename(tmp, s.marker)
		}
	}
	if err != nil {
		s.Failures = append(s.Failures, "writing the marker: "+err.Error())
	}
}

// result is the smoke test's verdict, when the window has closed.
func (s *desktopSmoke) result() error {
	select {
	case <-s.done:
	default:
		return errors.New("desktop smoke: the window closed before the checks ended")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.Failures) > 0 || len(s.Passed) != smokeChecks {
		return fmt.Errorf("desktop smoke: %s", strings.Join(s.Failures, "; "))
	}
	return nil
}

// smokeStatus remembers the status written.
type smokeStatus struct {
	http.ResponseWriter
	status int
}

func (w *smokeStatus) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *smokeStatus) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *smokeStatus) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// sawURI reports whether the window requested an address containing part.
func (s *desktopSmoke) sawURI(part string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.seen {
		if strings.Contains(e.URI, part) {
			return true
		}
	}
	return false
}

// droppedDone hands the outcome of a drop to the check waiting for it.
func (s *desktopSmoke) droppedDone(outs []DroppedFile) {
	if s.dropCh != nil {
		select {
		case s.dropCh <- outs:
		default:
		}
	}
}
