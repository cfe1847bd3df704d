package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// TestAccessMatrix calls every route as the owner of the object, another
// user, an admin and anonymously, each on a fresh job, and checks the
// answers: anonymous 401, another user's job 404, admin-only routes 403 for
// users, and never a refusal for the owner or an admin.
func TestAccessMatrix(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	roles := []struct {
		name  string
		token func() string
	}{
		{"owner", func() string { return h.ownerTok }},
		{"other", func() string { return h.otherTok }},
		{"admin", func() string { return h.adminTok }},
		{"anonymous", func() string { return "" }},
	}
	_, err := h.st.CreateSource(t.Context(), &engine.SourceRecord{Name: "drop", Kind: engine.SourceFolder,
		Config: json.RawMessage(`{"path":"` + t.TempDir() + `"}`), Pipeline: engine.DefaultPipeline, After: "leave",
		Poll: time.Minute, Enabled: true}, time.Now())
	require.NoError(t, err)
	n := 0
	for _, rt := range h.srv.routes() {
		for _, role := range roles {
			n++
			j := h.ownerJob(3)
			if strings.HasSuffix(rt.Pattern, "/thumbnail") || strings.HasSuffix(rt.Pattern, "/image") {
				j = h.ownerImageJob()
			}
			page, _ := h.st.ListItems(t.Context(), listAll(j.ID))
			itemID := page.Items[0].ID
			if strings.HasSuffix(rt.Pattern, "/resume") {
				_, err := h.st.SetJobState(t.Context(), &engine.SetJobStateParams{JobID: j.ID, From: engine.JobControls["pause"].From,
					To: engine.JobPaused, Now: time.Now()})
				require.NoError(t, err)
			}
			tok, _, err := CreateAPIToken(t.Context(), h.st, h.owner.ID, "matrix", time.Now())
			require.NoError(t, err)

			path := rt.Pattern
			jobScoped := strings.Contains(path, "/api/jobs/{id}") || strings.HasPrefix(path, "/api/items/")
			path = strings.ReplaceAll(path, "/api/jobs/{id}", "/api/jobs/"+strconv.FormatInt(j.ID, 10))
			path = strings.ReplaceAll(path, "/api/items/{id}", "/api/items/"+strconv.FormatInt(itemID, 10))
			path = strings.ReplaceAll(path, "/api/tokens/{id}", "/api/tokens/"+strconv.FormatInt(tok.ID, 10))
			if rt.Method == "PUT" {
				path = strings.ReplaceAll(path, "{name}", "matrix")
			}
			if strings.HasPrefix(path, "/api/sources/") {
				path = strings.ReplaceAll(path, "{name}", "drop")
			}
			path = strings.ReplaceAll(path, "{key}", "matrix")
			if rt.Pattern == "/api/triggers/{name}" {
				tr := &engine.Trigger{Name: "gone" + strconv.Itoa(n), Kind: engine.TriggerEvent, Event: engine.EventJobFinished,
					Pipeline: engine.DefaultPipeline, Enabled: true}
				_, err := h.st.CreateTrigger(t.Context(), tr, time.Now())
				require.NoError(t, err)
				path = strings.ReplaceAll(path, "{name}", tr.Name)
			}
			path = strings.ReplaceAll(path, "{name}", engine.DefaultPipeline)
			if strings.HasSuffix(path, "/kickoff") {
				path += "?durationMs=100"
			}
			req := request{method: rt.Method, path: path, token: role.token()}
			switch {
			case rt.Method == "POST" && rt.Pattern == "/api/jobs":
				req.body, req.ctype = []byte(`{"items":[{"a":"1"}]}`), "application/json"
			case strings.HasSuffix(rt.Pattern, "/reprocess"):
				req.body, req.ctype = []byte(`{"scope":"job"}`), "application/json"
			case rt.Pattern == "/api/tokens" && rt.Method == "POST":
				req.body, req.ctype = []byte(`{"name":"x"}`), "application/json"
			case rt.Pattern == "/api/users" && rt.Method == "POST":
				req.body, req.ctype = []byte(`{"name":"u`+strconv.Itoa(n)+`"}`), "application/json"
			case rt.Pattern == "/api/login":
				req.body, req.ctype = []byte(`{"name":"owner","password":"`+h.ownerPassword+`"}`), "application/json"
			case strings.HasPrefix(rt.Pattern, "/api/definitions/{key}/run"):
				req.body, req.ctype = []byte(`{"payload":{"n":1}}`), "application/json"
			case strings.HasPrefix(rt.Pattern, "/api/definitions") && rt.Method != "GET":
				req.body, req.ctype = []byte(`{"key":"matrix","executable":"/bin/true"}`), "application/json"
			case rt.Pattern == "/api/triggers" && rt.Method == "POST":
				req.body, req.ctype = []byte(`{"name":"t`+strconv.Itoa(n)+`","kind":"event","event":"job.finished","pipeline":"noop"}`), "application/json"
			case rt.Pattern == "/api/triggers/{name}" && rt.Method == "PATCH":
				req.body, req.ctype = []byte(`{"enabled":false}`), "application/json"
			case rt.Method == "PUT":
				req.body, req.ctype = []byte(`{"stages":[{"processor":"noop"}]}`), "application/json"
			}
			status := h.call(req, rt.Pattern == "/api/events")
			label := rt.Method + " " + rt.Pattern + " as " + role.name
			switch {
			case rt.Access == public:
				require.Less(t, status, 500, label)
			case role.name == "anonymous":
				require.Equal(t, http.StatusUnauthorized, status, label)
			case rt.Access == adminOnly && role.name != "admin":
				require.Equal(t, http.StatusForbidden, status, label)
			case jobScoped && role.name == "other":
				require.Equal(t, http.StatusNotFound, status, label)
			case rt.Pattern == "/api/tokens/{id}" && role.name == "other":
				require.Equal(t, http.StatusNotFound, status, label+": another's token")
			default:
				require.Less(t, status, 300, label)
			}
		}
	}
	require.Equal(t, 4*len(h.srv.routes()), n)
}

// call makes a request and returns its status; a stream is cut once its
// headers have arrived.
func (h *harness) call(r request, stream bool) int {
	h.t.Helper()
	if !stream {
		resp, _ := h.do(r)
		return resp.StatusCode
	}
	ctx, cancel := context.WithTimeout(h.t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.method, h.ts.URL+r.path, nil)
	require.NoError(h.t, err)
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestOpenAPIMatchesRoutes: the document lists exactly the routes served,
// with the same methods.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	resp, body := h.get("/api/openapi.json", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(body, &doc))
	require.True(t, strings.HasPrefix(doc.OpenAPI, "3."))
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	served := map[string]bool{}
	for _, rt := range h.srv.routes() {
		served[rt.Method+" "+rt.Pattern] = true
	}
	for k := range served {
		require.True(t, documented[k], "route %s is not in openapi.json", k)
	}
	for k := range documented {
		require.True(t, served[k], "openapi.json documents %s, which is not served", k)
	}
}
