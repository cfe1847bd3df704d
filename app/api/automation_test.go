package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// Commands over the API: admins define them; a payload failing the schema
// is a 400 naming the field; an unknown key is refused; triggers list their
// next fire time in their own zone.
func TestDefinitionsAndTriggersAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	def := []byte(`{"key":"hello","executable":"/bin/echo","args":["hello","{{.name}}"],` +
		`"argSchema":{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}},"timeoutSeconds":10}`)
	resp, body := h.do(request{method: "POST", path: "/api/definitions", token: h.ownerTok, ctype: "application/json", body: def})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "only admins define commands: %s", body)
	resp, body = h.do(request{method: "POST", path: "/api/definitions", token: h.adminTok, ctype: "application/json", body: def})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	resp, body = h.do(request{method: "PUT", path: "/api/definitions/bad", token: h.adminTok, ctype: "application/yaml",
		body: []byte("executable: echo\n")})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
	require.Equal(t, "executable", decode[errorBody](t, body).Error.Field)

	resp, body = h.postJSON("/api/definitions/hello/run", h.adminTok, map[string]any{"payload": map[string]any{"name": 7}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
	e := decode[errorBody](t, body).Error
	require.Equal(t, "payload.name", e.Field)
	require.Contains(t, e.Message, "string")
	resp, body = h.postJSON("/api/definitions/hello/run", h.adminTok, map[string]any{"payload": map[string]any{}})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
	require.Equal(t, "payload.name", decode[errorBody](t, body).Error.Field)
	resp, body = h.postJSON("/api/definitions/nope/run", h.adminTok, map[string]any{"payload": map[string]any{"name": "x"}})
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)
	require.Contains(t, decode[errorBody](t, body).Error.Message, "refused")
	resp, body = h.postJSON("/api/definitions/hello/run", h.adminTok, map[string]any{"payload": map[string]any{"name": "Ada"}})
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	job := decode[map[string]any](t, body)
	require.Equal(t, "manual", job["source"])
	require.Equal(t, "command.hello", job["pipeline"])

	resp, body = h.postJSON("/api/triggers", h.adminTok, map[string]any{"name": "nightly", "kind": "schedule",
		"cron": "30 2 * * *", "tz": "Nowhere/Land", "definition": "hello"})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
	require.Equal(t, "tz", decode[errorBody](t, body).Error.Field)
	resp, body = h.postJSON("/api/triggers", h.adminTok, map[string]any{"name": "nightly", "kind": "schedule",
		"cron": "30 2 * * *", "tz": "America/New_York", "definition": "hello", "payload": map[string]any{"name": "{{.fire.date}}"},
		"dedupeWindow": "10m"})
	require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	resp, body = h.get("/api/triggers", h.ownerTok)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	list := decode[struct {
		Triggers []struct {
			Name          string `json:"name"`
			NextFireLocal string `json:"nextFireLocal"`
			DedupeWindow  string `json:"dedupeWindow"`
		} `json:"triggers"`
	}](t, body)
	require.Len(t, list.Triggers, 1)
	require.Regexp(t, `^\d{4}-\d\d-\d\d 02:30:00 E[SD]T$`, list.Triggers[0].NextFireLocal)
	require.Equal(t, "10m0s", list.Triggers[0].DedupeWindow)
	resp, body = h.do(request{method: "PATCH", path: "/api/triggers/nightly", token: h.adminTok, body: []byte(`{"enabled":false}`), ctype: "application/json"})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Equal(t, false, decode[map[string]any](t, body)["enabled"])
	resp, body = h.do(request{method: "PATCH", path: "/api/triggers/nightly", token: h.adminTok,
		body: []byte(`{"enabled":true,"cron":"0 4 * * *","tz":"Europe/Paris"}`), ctype: "application/json"})
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	changed := decode[map[string]any](t, body)
	require.Equal(t, true, changed["enabled"])
	require.Regexp(t, `^\d{4}-\d\d-\d\d 04:00:00 CES?T$`, changed["nextFireLocal"])
	resp, body = h.do(request{method: "PATCH", path: "/api/triggers/nightly", token: h.adminTok, body: []byte(`{"tz":"Nowhere/Land"}`), ctype: "application/json"})
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
	require.Equal(t, "tz", decode[errorBody](t, body).Error.Field)
	resp, _ = h.do(request{method: "PATCH", path: "/api/triggers/nope", token: h.adminTok, body: []byte(`{"enabled":false}`), ctype: "application/json"})
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = h.do(request{method: "PATCH", path: "/api/triggers/nightly", token: h.ownerTok, body: []byte(`{"enabled":false}`), ctype: "application/json"})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "admins only")
	resp, _ = h.do(request{method: "DELETE", path: "/api/triggers/nightly", token: h.adminTok})
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, _ = h.get("/api/workers", h.ownerTok)
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
