package frontend

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/fstest"
)

func TestHandler(t *testing.T) {
	files := fstest.MapFS{
		"index.html":         {Data: []byte("<!doctype html>app")},
		"assets/app-1a2b.js": {Data: []byte("console.log(1)")},
	}
	h := handler(files)
	cases := []struct {
		method, path string
		status       int
		body         string
		cache        string
	}{
		{"GET", "/", 200, "<!doctype html>app", "no-cache"},
		{"GET", "/jobs/42", 200, "<!doctype html>app", "no-cache"},
		{"GET", "/pipelines/default", 200, "<!doctype html>app", "no-cache"},
		{"GET", "/assets/app-1a2b.js", 200, "console.log(1)", "public, max-age=31536000, immutable"},
		{"GET", "/assets/missing.js", 404, "", ""},
		{"GET", "/favicon.ico", 404, "", ""},
		{"POST", "/jobs", 405, "", ""},
		{"HEAD", "/jobs/1", 200, "", "no-cache"},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		res := rec.Result()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != c.status {
			t.Errorf("%s %s: status %d, want %d", c.method, c.path, res.StatusCode, c.status)
			continue
		}
		if c.body != "" && string(b) != c.body {
			t.Errorf("%s %s: body %q, want %q", c.method, c.path, b, c.body)
		}
		if c.cache != "" && res.Header.Get("Cache-Control") != c.cache {
			t.Errorf("%s %s: Cache-Control %q, want %q", c.method, c.path, res.Header.Get("Cache-Control"), c.cache)
		}
	}
}

// TestEmbedded checks that the build put the app where the binary finds it.
func TestEmbedded(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != 200 {
		t.Fatalf("GET / answered %d: is frontend/dist built?", rec.Code)
	}
}
