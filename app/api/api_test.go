package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xuri/excelize/v2"

	"github.com/sluicehq/sluice/engine"
)

type jobOut struct {
	ID         int64            `json:"id"`
	UserID     int64            `json:"userId"`
	State      string           `json:"state"`
	TotalItems int64            `json:"totalItems"`
	Counts     map[string]int64 `json:"counts"`
	Pipeline   string           `json:"pipeline"`
}

type itemsPage struct {
	Items []struct {
		ID           int64          `json:"id"`
		Seq          int64          `json:"seq"`
		Status       string         `json:"status"`
		Attempts     int            `json:"attempts"`
		Result       map[string]any `json:"result"`
		InputSummary string         `json:"inputSummary"`
		Input        map[string]any `json:"input"`
		UpdatedAt    time.Time      `json:"updatedAt"`
	} `json:"items"`
	Next *string `json:"next"`
}

// TestUploadCSVGridAndExport: an upload answers once every row is stored;
// keyset pages cover every item once, in (updatedAt, id) order, without the
// full input; the CSV export has the columns of /columns.
func TestUploadCSVGridAndExport(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resp, body := h.upload(h.ownerTok, map[string]string{"pipeline": "noop"}, namedFile{"goods.csv", csvOf(250)})
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	created := decode[createOut](t, body)
	require.Positive(t, created.JobID)
	// Persist-first: the answer came after every row was durable.
	j, err := h.st.GetJob(t.Context(), created.JobID)
	require.NoError(t, err)
	require.Equal(t, int64(250), j.TotalItems)
	require.Equal(t, h.owner.ID, j.UserID)
	h.drain()

	seen := map[int64]bool{}
	var last struct {
		at time.Time
		id int64
	}
	path := fmt.Sprintf("/api/jobs/%d/items?pageSize=100", created.JobID)
	pages := 0
	for {
		resp, body := h.get(path, h.ownerTok)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		page := decode[itemsPage](t, body)
		pages++
		for _, it := range page.Items {
			require.False(t, seen[it.ID], "item %d twice", it.ID)
			seen[it.ID] = true
			require.Equal(t, "DONE", it.Status)
			require.Nil(t, it.Input, "listings carry no full input")
			require.Contains(t, it.InputSummary, "sku: S")
			after := it.UpdatedAt.After(last.at) || (it.UpdatedAt.Equal(last.at) && it.ID > last.id)
			require.True(t, after, "order by (updatedAt, id)")
			last.at, last.id = it.UpdatedAt, it.ID
		}
		if page.Next == nil {
			break
		}
		path = fmt.Sprintf("/api/jobs/%d/items?pageSize=100&after=%s", created.JobID, *page.Next)
	}
	require.Len(t, seen, 250)
	require.Equal(t, 3, pages)

	resp, body = h.get(fmt.Sprintf("/api/jobs/%d/columns", created.JobID), h.ownerTok)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	cols := decode[struct {
		Columns []columnOut `json:"columns"`
	}](t, body).Columns
	var labels []string
	for _, c := range cols {
		labels = append(labels, c.Label)
	}
	resp, body = h.get(fmt.Sprintf("/api/jobs/%d/export?format=csv", created.JobID), h.ownerTok)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Disposition"), fmt.Sprintf("job-%d.csv", created.JobID))
	recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
	require.NoError(t, err)
	require.Equal(t, labels, recs[0], "export headers are the grid's column labels")
	require.Len(t, recs, 251)

	resp, body = h.get(fmt.Sprintf("/api/jobs/%d/items?input=1&pageSize=1", created.JobID), h.ownerTok)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotNil(t, decode[itemsPage](t, body).Items[0].Input, "input=1 asks for the full input")
}

// TestUploadRefusals: what is not CSV, XLSX or an image is refused with
// the file's name, and nothing is stored.
func TestUploadRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *harnessSetup) { c.MaxUploadBytes = 64 << 10 })
	binary := append([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0}, bytes.Repeat([]byte{0, 1, 2, 3}, 100)...)
	cases := []struct {
		name   string
		fields map[string]string
		file   namedFile
		status int
		want   string
	}{
		{"binary named csv", nil, namedFile{"data.csv", binary}, http.StatusUnsupportedMediaType, "data.csv"},
		{"zip named csv", nil, namedFile{"book.csv", append([]byte("PK\x03\x04"), make([]byte, 100)...)}, http.StatusUnsupportedMediaType, "must be named .xlsx"},
		{"pdf", nil, namedFile{"a.pdf", []byte("%PDF-1.4\n%âãÏÓ\n1 0 obj\n")}, http.StatusUnsupportedMediaType, "application/pdf"},
		{"empty", nil, namedFile{"e.csv", nil}, http.StatusBadRequest, "empty"},
		{"too large", nil, namedFile{"big.csv", csvOf(5000)}, http.StatusRequestEntityTooLarge, "limit"},
		{"unknown pipeline", map[string]string{"pipeline": "nope"}, namedFile{"a.csv", csvOf(3)}, http.StatusBadRequest, "nope"},
		{"unknown field", map[string]string{"colour": "red"}, namedFile{"a.csv", csvOf(3)}, http.StatusBadRequest, "colour"},
		{"bad delimiter", map[string]string{"delimiter": "ab"}, namedFile{"a.csv", csvOf(3)}, http.StatusBadRequest, "delimiter"},
	}
	for _, c := range cases {
		resp, body := h.upload(h.ownerTok, c.fields, c.file)
		require.Equal(t, c.status, resp.StatusCode, "%s: %s", c.name, body)
		msg := decode[errorBody](t, body).Error.Message
		require.Contains(t, msg, c.want, c.name)
	}
	jobs, err := h.st.ListJobs(t.Context(), &engine.ListJobsParams{States: []engine.JobState{engine.JobQueued, engine.JobRunning, engine.JobDone}})
	require.NoError(t, err)
	require.Empty(t, jobs, "no refused upload left a runnable job")

	resp, body := h.do(request{method: "POST", path: "/api/jobs", token: h.ownerTok, body: []byte("a,b\n1,2\n"), ctype: "text/csv"})
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "%s", body)
}

// TestUploadMalformedCSVKeepsRows: a row with the wrong field count becomes
// a SKIPPED item with its line; the others are stored.
func TestUploadMalformedCSVKeepsRows(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resp, body := h.upload(h.ownerTok, nil, namedFile{"m.csv", []byte("a,b\n1,2\n3\n4,5\n")})
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	out := decode[createOut](t, body)
	require.Equal(t, int64(3), out.Jobs[0].Items)
	require.Equal(t, int64(1), out.Jobs[0].Skipped)
}

func TestUploadXLSXAndImages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	f := excelize.NewFile()
	require.NoError(t, f.SetSheetRow("Sheet1", "A1", &[]any{"sku", "qty"}))
	require.NoError(t, f.SetSheetRow("Sheet1", "A2", &[]any{"X1", 3}))
	require.NoError(t, f.SetSheetRow("Sheet1", "A3", &[]any{"X2", 4}))
	var xb bytes.Buffer
	require.NoError(t, f.Write(&xb))
	resp, body := h.upload(h.ownerTok, nil, namedFile{"book.xlsx", xb.Bytes()})
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	require.Equal(t, int64(2), decode[createOut](t, body).Jobs[0].Items)

	_, err := h.st.PutPipeline(t.Context(), &engine.PutPipelineParams{Pipeline: &engine.Pipeline{Name: ImagePipeline,
		Stages: []engine.Stage{{Processor: "noop"}}}, Now: time.Now()})
	require.NoError(t, err)
	pngOf := func(c color.Color) []byte {
		img := image.NewRGBA(image.Rect(0, 0, 8, 8))
		for x := range 8 {
			img.Set(x, x, c)
		}
		var b bytes.Buffer
		require.NoError(t, png.Encode(&b, img))
		return b.Bytes()
	}
	resp, body = h.upload(h.ownerTok, nil, namedFile{"red.png", pngOf(color.RGBA{255, 0, 0, 255})}, namedFile{"../../etc/blue.png", pngOf(color.RGBA{0, 0, 255, 255})})
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	out := decode[createOut](t, body)
	require.Len(t, out.Jobs, 1, "images of one upload make one job")
	require.Equal(t, int64(2), out.Jobs[0].Items)
	j, err := h.st.GetJob(t.Context(), out.JobID)
	require.NoError(t, err)
	require.Equal(t, ImagePipeline, j.Pipeline)
	page, err := h.st.ListItems(t.Context(), &engine.ListItemsParams{JobID: j.ID, WithInput: true, Limit: 10})
	require.NoError(t, err)
	want := [][]byte{pngOf(color.RGBA{255, 0, 0, 255}), pngOf(color.RGBA{0, 0, 255, 255})}
	for i, it := range page.Items {
		var in engine.ImageFile
		require.NoError(t, json.Unmarshal(it.Input, &in))
		require.Empty(t, in.Path, "the spooled upload is not referenced")
		require.True(t, strings.HasPrefix(in.Blob, fmt.Sprintf("jobs/%d/in/", j.ID)), "images are kept in the store: %s", in.Blob)
		require.NotContains(t, in.Blob, "/etc/", "a path in the file name cannot escape the job's keys")
		resp, body := h.get(fmt.Sprintf("/api/items/%d/image", it.ID), h.ownerTok)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		require.Equal(t, "image/png", resp.Header.Get("Content-Type"))
		require.Equal(t, want[i], body, "the stored copy is the uploaded file")
		resp, _ = h.get(fmt.Sprintf("/api/items/%d/image", it.ID), h.otherTok)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "another user's image is not served")
		resp, body = h.get(fmt.Sprintf("/api/items/%d/thumbnail", it.ID), h.ownerTok)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "no thumbnail before an image stage ran: %s", body)
	}
	spool, err := os.ReadDir(filepath.Join(h.data, "uploads", "tmp"))
	require.NoError(t, err)
	require.Empty(t, spool, "spooled uploads are removed once stored")
}

func TestJSONItems(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resp, body := h.postJSON("/api/jobs", h.ownerTok, map[string]any{"items": []map[string]string{{"a": "1"}, {"a": "2"}}})
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	require.Equal(t, int64(2), decode[createOut](t, body).Jobs[0].Items)

	resp, body = h.postJSON("/api/jobs", h.ownerTok, map[string]any{"items": []any{"not an object"}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, string(body), "items[0]")

	many := make([]map[string]int, engine.MaxEnqueueRows+1)
	resp, _ = h.postJSON("/api/jobs", h.ownerTok, map[string]any{"items": many})
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

	resp, body = h.postJSON("/api/jobs", h.ownerTok, map[string]any{"items": []any{}, "colour": 1})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, string(body), "colour")
}

// TestOwnership: listings show only the caller's work; an admin may ask
// for everyone's.
func TestOwnership(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	mine := h.ownerJob(2)
	type jobsOut struct {
		Jobs []jobOut `json:"jobs"`
	}
	_, body := h.get("/api/jobs", h.otherTok)
	require.Empty(t, decode[jobsOut](t, body).Jobs)
	_, body = h.get("/api/jobs", h.ownerTok)
	require.Len(t, decode[jobsOut](t, body).Jobs, 1)
	_, body = h.get("/api/jobs", h.adminTok)
	require.Empty(t, decode[jobsOut](t, body).Jobs, "an admin's own list by default")
	_, body = h.get("/api/jobs?userId=all", h.adminTok)
	require.Len(t, decode[jobsOut](t, body).Jobs, 1)
	resp, _ := h.get("/api/jobs?userId=all", h.ownerTok)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	_, body = h.get("/api/pending", h.otherTok)
	require.Empty(t, decode[itemsPage](t, body).Items)
	_, body = h.get("/api/pending", h.ownerTok)
	require.Len(t, decode[itemsPage](t, body).Items, 2)
	_, body = h.get("/api/pending?userId=all", h.adminTok)
	require.Len(t, decode[itemsPage](t, body).Items, 2)

	resp, body = h.get(fmt.Sprintf("/api/jobs/%d/export", mine.ID), h.otherTok)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, fmt.Sprintf("job %d not found", mine.ID), decode[errorBody](t, body).Error.Message,
		"another user's job looks exactly like a missing one")
}

func TestPendingViewFlag(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *harnessSetup) { c.PendingView = false })
	resp, body := h.get("/api/pending", h.ownerTok)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, string(body), "SLUICE_PENDING_VIEW")
}

// TestSessionLoginCSRF: password sign-in sets an HttpOnly cookie; writes
// through the cookie need the CSRF header; sign-out ends the session.
func TestSessionLoginCSRF(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resp, body := h.postJSON("/api/login", "", map[string]string{"name": "owner", "password": "wrong-password"})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, "wrong name or password", decode[errorBody](t, body).Error.Message)
	resp, body = h.postJSON("/api/login", "", map[string]string{"name": "nobody", "password": "wrong-password"})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, "wrong name or password", decode[errorBody](t, body).Error.Message, "no hint whether the name exists")

	resp, body = h.postJSON("/api/login", "", map[string]string{"name": "owner", "password": h.ownerPassword})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie {
			session = c
		}
	}
	require.NotNil(t, session)
	require.True(t, session.HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, session.SameSite)
	me := decode[meOut](t, body)
	require.Equal(t, "owner", me.User.Name)
	require.NotEmpty(t, me.CSRFToken)

	j := h.ownerJob(2)
	pause := request{method: "POST", path: fmt.Sprintf("/api/jobs/%d/pause", j.ID), cookies: []*http.Cookie{session}}
	resp, body = h.do(pause)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), "X-CSRF-Token")
	pause.header = map[string]string{"X-CSRF-Token": me.CSRFToken}
	resp, body = h.do(pause)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	// A bearer token needs no CSRF header: no browser sends it by itself.
	resp, _ = h.do(request{method: "POST", path: fmt.Sprintf("/api/jobs/%d/resume", j.ID), token: h.ownerTok})
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp, _ = h.do(request{method: "POST", path: "/api/logout", cookies: []*http.Cookie{session}, header: map[string]string{"X-CSRF-Token": me.CSRFToken}})
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, _ = h.do(request{method: "GET", path: "/api/me", cookies: []*http.Cookie{session}})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the session ended")
}

// TestLoginRateLimited: ten wrong guesses are answered, the eleventh in the
// same moment is refused until the bucket refills (one every 6 s). The
// server's clock stands still here: a loaded machine's slow password
// hashing must not refill the bucket during the test.
func TestLoginRateLimited(t *testing.T) {
	t.Parallel()
	var now atomic.Int64 // the server's clock, in Unix nanoseconds
	now.Store(time.Now().UnixNano())
	h := newHarness(t, func(s *harnessSetup) { s.Now = func() time.Time { return time.Unix(0, now.Load()) } })
	guess := func() *http.Response {
		resp, _ := h.postJSON("/api/login", "", map[string]string{"name": "admin", "password": "guess-guess"})
		return resp
	}
	for i := range 10 {
		require.Equal(t, http.StatusUnauthorized, guess().StatusCode, "guess %d", i+1)
	}
	last := guess()
	require.Equal(t, http.StatusTooManyRequests, last.StatusCode)
	require.NotEmpty(t, last.Header.Get("Retry-After"))
	now.Add(int64(6 * time.Second))
	require.Equal(t, http.StatusUnauthorized, guess().StatusCode, "one more guess after 6 s")
	require.Equal(t, http.StatusTooManyRequests, guess().StatusCode)
}

func TestSignInLinkWorksOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	link, err := CreateSignInLink(t.Context(), h.st, h.admin.ID, "", time.Now())
	require.NoError(t, err)
	resp, _ := h.get(link, "")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/", resp.Header.Get("Location"))
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie {
			session = c
		}
	}
	require.NotNil(t, session)
	resp, body := h.do(request{method: "GET", path: "/api/me", cookies: []*http.Cookie{session}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "admin", decode[meOut](t, body).User.Name)
	resp, body = h.get(link, "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a second use is refused")
	require.Contains(t, string(body), "used already")
}

func TestFirstSignInAndLoopbackRules(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	need, err := NeedsFirstSignIn(t.Context(), h.st)
	require.NoError(t, err)
	require.False(t, need, "accounts with passwords exist")
	ok, err := HasAdminWithPassword(t.Context(), h.st)
	require.NoError(t, err)
	require.True(t, ok)
}

// TestEventsStream: a job made while a client listens arrives as an event.
func TestEventsStream(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", h.ts.URL+"/api/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.ownerTok)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	// Another user's job must not reach this stream.
	_, err = h.ing.Enqueue(t.Context(), engine.EnqueueRequest{UserID: h.other.ID, Pipeline: "noop", Name: "secret", Rows: jsonRows(1)})
	require.NoError(t, err)
	resp2, body := h.postJSON("/api/jobs", h.ownerTok, map[string]any{"name": "watched", "items": []map[string]string{{"a": "1"}}})
	require.Equal(t, http.StatusCreated, resp2.StatusCode, "%s", body)
	id := decode[createOut](t, body).JobID
	sc := bufio.NewScanner(resp.Body)
	var event string
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok && event == "job" {
			require.NotContains(t, v, "secret", "another user's job leaked into the stream")
			if strings.Contains(v, fmt.Sprintf(`"id":%d,`, id)) {
				require.Contains(t, v, `"name":"watched"`)
				return
			}
		}
	}
	t.Fatalf("no event for job %d: %v", id, sc.Err())
}

func jsonRows(n int) []json.RawMessage {
	rows := make([]json.RawMessage, n)
	for i := range rows {
		rows[i] = json.RawMessage(fmt.Sprintf(`{"n":"%d"}`, i))
	}
	return rows
}

// TestKickoff: with no workers running, a kickoff slice processes the job.
func TestKickoff(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	j := h.ownerJob(20)
	resp, body := h.do(request{method: "POST", path: fmt.Sprintf("/api/jobs/%d/kickoff?durationMs=3000", j.ID), token: h.ownerTok})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	out := decode[kickoffOut](t, body)
	require.Equal(t, int64(20), out.Processed)
	require.Equal(t, engine.JobDone, out.Job.State)
	resp, body = h.do(request{method: "POST", path: fmt.Sprintf("/api/jobs/%d/kickoff?durationMs=5", j.ID), token: h.ownerTok})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, string(body), "durationMs")
}

func TestReprocessItems(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	j := h.ownerJob(4)
	h.drain()
	page, err := h.st.ListItems(t.Context(), listAll(j.ID))
	require.NoError(t, err)
	ids := []string{fmt.Sprint(page.Items[0].ID), fmt.Sprint(page.Items[1].ID)}
	resp, body := h.postJSON(fmt.Sprintf("/api/jobs/%d/reprocess", j.ID), h.ownerTok, map[string]any{"scope": "items", "itemIds": ids, "statuses": []string{"DONE"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.EqualValues(t, 2, decode[map[string]any](t, body)["reprocessed"])
	resp, body = h.postJSON(fmt.Sprintf("/api/jobs/%d/reprocess", j.ID), h.ownerTok, map[string]any{"scope": "all"})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Equal(t, "scope", decode[errorBody](t, body).Error.Field)
}

func TestPipelineValidationNamesField(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resp, body := h.do(request{method: "PUT", path: "/api/pipelines/p1", token: h.adminTok, ctype: "application/yaml",
		body: []byte("stages:\n  - config: {}\n")})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
	e := decode[errorBody](t, body).Error
	require.Equal(t, "invalid", e.Code)
	require.Equal(t, "stages[0].processor", e.Field)

	resp, body = h.do(request{method: "PUT", path: "/api/pipelines/p1", token: h.adminTok, ctype: "application/yaml",
		body: []byte("stages:\n  - processor: noop\n    config: {delayMs: 1}\n")})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	resp, body = h.get("/api/pipelines/p1", h.ownerTok)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), `"delayMs":1`)
}

func TestErrorsAreJSON(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	j := h.ownerJob(1)
	for _, c := range []struct {
		path   string
		status int
		code   string
	}{
		{"/api/nothing-here", http.StatusNotFound, "not_found"},
		{"/api/jobs/abc", http.StatusBadRequest, "invalid"},
		{"/api/jobs/999999", http.StatusNotFound, "not_found"},
		{"/api/jobs?pageSize=0", http.StatusBadRequest, "invalid"},
		{fmt.Sprintf("/api/jobs/%d/items?statuses=DONEISH", j.ID), http.StatusBadRequest, "invalid"},
	} {
		resp, body := h.get(c.path, h.ownerTok)
		require.Equal(t, c.status, resp.StatusCode, c.path)
		require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"), c.path)
		require.Equal(t, c.code, errorCode(t, body), c.path)
	}
	resp, body := h.get("/api/jobs", "slc_not-a-token")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, string(body), "not valid")
}

// TestAuditTrail: who did what from where.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resp, body := h.postJSON("/api/jobs", h.ownerTok, map[string]any{"items": []map[string]string{{"a": "1"}}})
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	id := decode[createOut](t, body).JobID
	h.do(request{method: "POST", path: fmt.Sprintf("/api/jobs/%d/cancel", id), token: h.ownerTok})
	h.get(fmt.Sprintf("/api/jobs/%d/export", id), h.ownerTok)
	list, err := h.st.ListAudit(t.Context(), &engine.ListAuditParams{UserID: h.owner.ID})
	require.NoError(t, err)
	var actions []string
	for _, e := range list {
		actions = append(actions, e.Action)
		require.Equal(t, "127.0.0.1", e.IP)
		require.Equal(t, "owner", e.UserName)
	}
	require.Equal(t, []string{"job.export", "job.cancel", "job.create"}, actions)
	_, body = h.get("/api/audit", h.otherTok)
	require.NotContains(t, string(body), "job.create", "a user sees only their own trail")
}

func TestMetricsAndStats(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.ownerJob(3)
	resp, body := h.get("/metrics", h.ownerTok)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	for _, name := range []string{"sluice_queue_depth{state=\"due\"} 3", "sluice_jobs_ingesting", "sluice_db_pool_wait_seconds_total"} {
		require.Contains(t, string(body), name)
	}
	resp, body = h.get("/api/stats", h.ownerTok)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), `"due":3`)
	resp, _ = h.get("/readyz", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestValidationFieldIsStructured: error.field is the path the engine's
// error carries, through nested parts of a pipeline (a processor's own
// config field included), not a guess from the message.
func TestValidationFieldIsStructured(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for body, field := range map[string]string{
		"stages:\n  - processor: noop\n    config: {delayMs: -5}\n":          "stages[0].config.delayMs",
		"stages:\n  - processor: nosuch\n":                                   "stages[0].processor",
		"stages:\n  - processor: noop\n    maxConcurrency: -1\n":             "stages[0].maxConcurrency",
		"stages:\n  - processor: noop\nretry: {transient: {delays: [-1]}}\n": "retry.transient.delays[0]",
	} {
		resp, b := h.do(request{method: "PUT", path: "/api/pipelines/p1", token: h.adminTok, ctype: "application/yaml", body: []byte(body)})
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", b)
		e := decode[errorBody](t, b).Error
		require.Equal(t, field, e.Field, "%s", e.Message)
		require.True(t, strings.HasPrefix(e.Message, strings.SplitN(field, ".", 2)[0]), "%s", e.Message)
	}
}

// TestSignInLinkUsedRedirectsBrowser: a person clicking a spent link lands
// on the sign-in page with the reason.
func TestSignInLinkUsedRedirectsBrowser(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resp, _ := h.do(request{method: "GET", path: "/signin?token=slc_spent", header: map[string]string{"Accept": "text/html,application/xhtml+xml"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/login?error="), resp.Header.Get("Location"))
}

// TestEventsAfterReprocessOfFinishedJob: a finished job that a handler
// changed and that finished again before the hub looked still sends an
// event (the hub otherwise looks only at unfinished jobs).
func TestEventsAfterReprocessOfFinishedJob(t *testing.T) {
	t.Parallel()
	h := newHarness(t, noHub)
	j := h.ownerJob(2)
	h.drain()
	sub := h.srv.events.subscribe(h.owner)
	require.NoError(t, h.srv.events.scan(t.Context()))
	defer h.srv.events.unsubscribe(sub)
	_, err := h.st.ReprocessItems(t.Context(), &engine.ReprocessParams{JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemDone}, Now: time.Now()})
	require.NoError(t, err)
	h.drain() // finished again before any look
	h.srv.events.pokeJob(j.ID)
	require.NoError(t, h.srv.events.scan(t.Context()))
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-sub.ch:
			if ev.name == "job" && strings.Contains(string(ev.data), fmt.Sprintf(`"id":%d,`, j.ID)) {
				require.Contains(t, string(ev.data), `"state":"DONE"`)
				return
			}
		case <-deadline:
			t.Fatal("no event for the reprocessed job")
		}
	}
}

// TestColumnsFollowChanges: cached columns are dropped when the job changes.
func TestColumnsFollowChanges(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	j := h.ownerJob(1)
	cols := func() []string {
		_, body := h.get(fmt.Sprintf("/api/jobs/%d/columns", j.ID), h.ownerTok)
		var keys []string
		for _, c := range decode[struct {
			Columns []columnOut `json:"columns"`
		}](t, body).Columns {
			keys = append(keys, c.Key)
		}
		return keys
	}
	h.drain()
	require.Contains(t, cols(), "sku")
	_, err := h.st.ReprocessItems(t.Context(), &engine.ReprocessParams{JobID: j.ID, Statuses: []engine.ItemStatus{engine.ItemDone}, Now: time.Now()})
	require.NoError(t, err)
	now := time.Now()
	items, err := h.st.ClaimItems(t.Context(), &engine.ClaimItemsParams{WorkerID: "w", Limit: 1, LeaseFor: time.Minute, Now: now})
	require.NoError(t, err)
	it := items[0]
	_, err = h.st.CompleteItems(t.Context(), &engine.CompleteItemsParams{WorkerID: "w", Now: now.Add(time.Millisecond), Outcomes: []engine.Outcome{{
		ItemID: it.ID, JobID: j.ID, Attempt: it.Attempts, Status: engine.ItemDone, Result: json.RawMessage(`{"fresh":1}`), StartedAt: now}}})
	require.NoError(t, err)
	require.Contains(t, cols(), "fresh", "the finished job changed: its columns are read again")
}

func TestPendingJobType(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.ownerJob(2)
	_, err := h.st.PutPipeline(t.Context(), &engine.PutPipelineParams{Pipeline: &engine.Pipeline{Name: "lookup",
		Stages: []engine.Stage{{Processor: "noop"}}}, Now: time.Now()})
	require.NoError(t, err)
	resp, body := h.postJSON("/api/jobs", h.ownerTok, map[string]any{"pipeline": "lookup", "items": []map[string]string{{"a": "1"}}})
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	_, body = h.get("/api/pending?jobType=lookup", h.ownerTok)
	require.Len(t, decode[itemsPage](t, body).Items, 1)
	_, body = h.get("/api/pending?jobType=noop", h.ownerTok)
	require.Len(t, decode[itemsPage](t, body).Items, 2)
}

// TestUploadErrorNamesStoredJobs: when a later file of an upload is
// refused, the answer names the jobs the earlier files made.
func TestUploadErrorNamesStoredJobs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resp, body := h.upload(h.ownerTok, nil, namedFile{"good.csv", csvOf(3)}, namedFile{"bad.csv", []byte{0x7f, 'E', 'L', 'F', 0, 0, 0, 1}})
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "%s", body)
	msg := decode[errorBody](t, body).Error.Message
	require.Contains(t, msg, "bad.csv")
	require.Contains(t, msg, "from good.csv")
}

func TestSourcesListed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	dir := t.TempDir()
	_, err := h.st.CreateSource(t.Context(), &engine.SourceRecord{Name: "inbox", Kind: engine.SourceFolder,
		Config: json.RawMessage(`{"path":"` + dir + `"}`), Pipeline: engine.DefaultPipeline, After: "move",
		Poll: time.Minute, Enabled: true}, time.Now())
	require.NoError(t, err)
	require.NoError(t, h.st.RecordSourcePoll(t.Context(), "inbox", "folder is gone", time.Now()))
	resp, body := h.get("/api/sources", h.ownerTok)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	list := decode[struct {
		Sources []engine.SourceRecord `json:"sources"`
	}](t, body).Sources
	require.Len(t, list, 1)
	require.Equal(t, "inbox", list[0].Name)
	require.Equal(t, "folder is gone", list[0].LastError, "the last error shows")
	resp, _ = h.get("/api/sources/nope", h.ownerTok)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, body = h.do(request{method: "POST", path: "/api/sources/inbox/scan", token: h.adminTok})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
}

// TestImageBlobs: an image job's stored file and its thumbnail are served
// from the store's blobs, and go with the job when it is deleted.
func TestImageBlobs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	j := h.ownerImageJob()
	page, err := h.st.ListItems(t.Context(), &engine.ListItemsParams{JobID: j.ID, WithInput: true, Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	it := page.Items[0]
	require.Equal(t, engine.ItemDone, it.Status, "%s", it.LastError)
	var res struct {
		Thumbnail string `json:"thumbnail"`
		Width     int    `json:"width"`
	}
	require.NoError(t, json.Unmarshal(it.Result, &res))
	require.Equal(t, 40, res.Width)
	require.True(t, strings.HasPrefix(res.Thumbnail, fmt.Sprintf("jobs/%d/thumbs/", j.ID)), res.Thumbnail)

	resp, body := h.get(fmt.Sprintf("/api/items/%d/thumbnail", it.ID), h.ownerTok)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Equal(t, "image/jpeg", resp.Header.Get("Content-Type"))
	cfg, format, err := image.DecodeConfig(bytes.NewReader(body))
	require.NoError(t, err)
	require.Equal(t, "jpeg", format)
	require.Equal(t, 40, cfg.Width)
	resp, body = h.get(fmt.Sprintf("/api/items/%d/image", it.ID), h.ownerTok)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	_, format, err = image.DecodeConfig(bytes.NewReader(body))
	require.NoError(t, err)
	require.Equal(t, "png", format)

	var in engine.ImageFile
	require.NoError(t, json.Unmarshal(it.Input, &in))
	resp, body = h.do(request{method: "DELETE", path: fmt.Sprintf("/api/jobs/%d", j.ID), token: h.ownerTok})
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "%s", body)
	for _, key := range []string{in.Blob, res.Thumbnail} {
		_, err := h.st.StatBlob(t.Context(), key)
		require.True(t, engine.IsNotFound(err), "blob %s after the job was deleted: %v", key, err)
	}
}
