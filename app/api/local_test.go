package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLocalHandlerActsAsTheLocalUser: through LocalHandler a request needs
// no credentials or CSRF token and is the local default user, while the
// network handler of the same server still refuses anonymous calls,
// whatever a caller sends.
func TestLocalHandlerActsAsTheLocalUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	u, err := DesktopUser(t.Context(), h.st)
	require.NoError(t, err)
	require.Equal(t, int64(1), u.ID)
	local := h.srv.LocalHandler(u)

	rec := httptest.NewRecorder()
	local.ServeHTTP(rec, httptest.NewRequest("GET", "/api/me", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var me meOut
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &me))
	require.Equal(t, "desktop", me.Via)
	require.Equal(t, "local", me.User.Name)
	require.Empty(t, me.CSRFToken)
	require.Empty(t, me.User.PasswordHash)

	// A change without a CSRF token: the window's requests are in process.
	rec = httptest.NewRecorder()
	local.ServeHTTP(rec, httptest.NewRequest("POST", "/api/jobs", strings.NewReader("sku\nA\n")))
	require.NotEqual(t, http.StatusUnauthorized, rec.Code, rec.Body.String())
	require.NotEqual(t, http.StatusForbidden, rec.Code, rec.Body.String())

	// The network handler of the same server knows nothing of it.
	for _, hdr := range []map[string]string{{}, {"X-Sluice-Local": "1"}, {"Cookie": "sluice_session=local"}} {
		req, err := http.NewRequest("GET", h.ts.URL+"/api/me", nil)
		require.NoError(t, err)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusUnauthorized, res.StatusCode, "headers %v", hdr)
	}
}
