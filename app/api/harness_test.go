package api

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/imageproc"
	"github.com/sluicehq/sluice/storage/sqlite"
)

// harness is a real server on a real SQLite file, with three accounts:
// owner and other (users) and admin, each with an API token.
type harness struct {
	t     *testing.T
	st    *sqlite.Store
	srv   *Server
	ts    *httptest.Server
	ing   *engine.Ingester
	notif *engine.Notifier
	reg   *engine.Registry
	data  string

	owner, other, admin          *engine.User
	ownerTok, otherTok, adminTok string
	ownerPassword                string
}

type harnessOpt func(*harnessSetup)

// harnessSetup is what options change: the server's configuration, and
// whether its background parts run.
type harnessSetup struct {
	Config
	noHub bool
}

// noHub is a harness option: the event hub does not run by itself (a test
// drives its scans).
func noHub(s *harnessSetup) { s.noHub = true }

func newHarness(t *testing.T, opts ...harnessOpt) *harness {
	t.Helper()
	data := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(data, "sluice.db"), sqlite.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	notif := engine.NewNotifier()
	ing, err := engine.NewIngester(engine.IngesterConfig{Store: st, Notifier: notif})
	require.NoError(t, err)
	reg := engine.NewRegistry()
	reg.Register("image", imageproc.New(imageproc.Config{Blobs: st}))
	h := &harness{t: t, st: st, ing: ing, notif: notif, reg: reg, data: data, ownerPassword: "owner-password-1"}
	cfg := Config{Store: st, Ingester: ing, PoolStats: func() map[string]sql.DBStats { return st.PoolStats() }, Notifier: notif, Registry: reg, DataDir: data, PendingView: true,
		ScanSource: func(_ context.Context, name string) (any, error) {
			// The real scan (app.Env.scanSource) is tested with the folder
			// adapter; here only the route's access and answer matter.
			return map[string]any{"source": name, "seen": 0}, nil
		},
		NewRunner: func(c engine.RunnerConfig) (*engine.Runner, error) {
			c.Store, c.Registry, c.Notifier = st, reg, notif
			return engine.NewRunner(c)
		}}
	setup := harnessSetup{Config: cfg}
	for _, o := range opts {
		o(&setup)
	}
	h.srv, err = New(setup.Config)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if !setup.noHub {
		h.srv.Start(ctx)
	}
	h.ts = httptest.NewServer(h.srv.Handler())
	t.Cleanup(func() { h.srv.Close(); h.ts.Close() })

	now := time.Now()
	h.owner, h.ownerTok, err = CreateUser(t.Context(), st, "owner", false, h.ownerPassword, now)
	require.NoError(t, err)
	h.other, h.otherTok, err = CreateUser(t.Context(), st, "other", false, "", now)
	require.NoError(t, err)
	h.admin, h.adminTok, err = CreateUser(t.Context(), st, "admin", true, "admin-password-1", now)
	require.NoError(t, err)
	return h
}

// request is one call: token "" is anonymous.
type request struct {
	method, path, token string
	body                []byte
	ctype               string
	header              map[string]string
	cookies             []*http.Cookie
}

func (h *harness) do(r request) (*http.Response, []byte) {
	h.t.Helper()
	req, err := http.NewRequest(r.method, h.ts.URL+r.path, bytes.NewReader(r.body))
	require.NoError(h.t, err)
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.ctype != "" {
		req.Header.Set("Content-Type", r.ctype)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	for _, c := range r.cookies {
		req.AddCookie(c)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	return resp, b
}

func (h *harness) get(path, token string) (*http.Response, []byte) {
	return h.do(request{method: "GET", path: path, token: token})
}

func (h *harness) postJSON(path, token string, v any) (*http.Response, []byte) {
	b, err := json.Marshal(v)
	require.NoError(h.t, err)
	return h.do(request{method: "POST", path: path, token: token, body: b, ctype: "application/json"})
}

// decode unmarshals an answer, failing the test with the body on error.
func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(b, &v), "body: %s", b)
	return v
}

// errorCode returns error.code of an error answer.
func errorCode(t *testing.T, b []byte) string {
	t.Helper()
	return decode[errorBody](t, b).Error.Code
}

// upload posts files as multipart, with form fields first.
func (h *harness) upload(token string, fields map[string]string, files ...namedFile) (*http.Response, []byte) {
	h.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		require.NoError(h.t, mw.WriteField(k, v))
	}
	for _, f := range files {
		w, err := mw.CreateFormFile("file", f.name)
		require.NoError(h.t, err)
		_, err = w.Write(f.data)
		require.NoError(h.t, err)
	}
	require.NoError(h.t, mw.Close())
	return h.do(request{method: "POST", path: "/api/jobs", token: token, body: buf.Bytes(), ctype: mw.FormDataContentType()})
}

type namedFile struct {
	name string
	data []byte
}

// csvOf makes a CSV with a header and n rows.
func csvOf(n int) []byte {
	var b strings.Builder
	b.WriteString("sku,name,price\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "S%04d,Item %d,%d.50\n", i, i, i)
	}
	return []byte(b.String())
}

// ownerJob enqueues a job of n items for the owner and returns it.
func (h *harness) ownerJob(n int) *engine.Job {
	h.t.Helper()
	rows := make([]json.RawMessage, n)
	for i := range rows {
		rows[i] = json.RawMessage(fmt.Sprintf(`{"sku":"S%d"}`, i+1))
	}
	j, err := h.ing.Enqueue(h.t.Context(), engine.EnqueueRequest{UserID: h.owner.ID, Pipeline: engine.DefaultPipeline, Name: "t", Source: "api", Rows: rows})
	require.NoError(h.t, err)
	return j
}

// ownerImageJob ingests one small PNG for the owner through a pipeline of
// the image processor and processes it: its item has a stored image and a
// stored thumbnail.
func (h *harness) ownerImageJob() *engine.Job {
	h.t.Helper()
	_, err := h.st.PutPipeline(h.t.Context(), &engine.PutPipelineParams{Pipeline: &engine.Pipeline{Name: "images-test",
		Stages: []engine.Stage{{Processor: "image"}}}, Now: time.Now()})
	require.NoError(h.t, err)
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for x := range 40 {
		img.Set(x, x%30, color.RGBA{200, 10, 10, 255})
	}
	var b bytes.Buffer
	require.NoError(h.t, png.Encode(&b, img))
	path := filepath.Join(h.t.TempDir(), "pic.png")
	require.NoError(h.t, os.WriteFile(path, b.Bytes(), 0o600))
	res, err := h.ing.IngestImages(h.t.Context(), engine.IngestRequest{UserID: h.owner.ID, Pipeline: "images-test", Name: "pic",
		Source: "api"}, []engine.ImageFile{{Path: path, Name: "pic.png", Size: int64(b.Len()), MediaType: "image/png"}})
	require.NoError(h.t, err)
	h.drain()
	return res.Job
}

// drain processes everything due with a runner in the test.
func (h *harness) drain() {
	h.t.Helper()
	r, err := engine.NewRunner(engine.RunnerConfig{Store: h.st, Registry: h.reg, Notifier: h.notif, Drain: true})
	require.NoError(h.t, err)
	ctx, cancel := context.WithTimeout(h.t.Context(), 30*time.Second)
	defer cancel()
	_, err = r.Run(ctx)
	require.NoError(h.t, err)
}

func listAll(jobID int64) *engine.ListItemsParams {
	return &engine.ListItemsParams{JobID: jobID, Limit: 1000}
}
