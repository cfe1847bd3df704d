// Package frontend holds Sluice's browser UI: a Vite + TypeScript app in
// this directory, built to dist/ (`make frontend`, which every Go target of
// the Makefile runs first) and embedded into the binary. dist/ is not in
// git: a fresh clone needs `make build` (or `make frontend`) before a bare
// `go build` or `go vet`.
package frontend

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed all:dist
var dist embed.FS

// Files returns the built UI (the contents of dist/).
func Files() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // "dist" is a valid path: cannot happen
	}
	return sub
}

// Handler serves the UI: the built files, and index.html for every other
// path that looks like a page (no file extension), so that addresses of
// the client-side router (/jobs/42, /pipelines) load the app. A missing
// asset (a path with an extension) is a plain 404. Hashed assets under
// /assets/ may be cached for good; index.html must be revalidated.
func Handler() http.Handler {
	return handler(Files())
}

func handler(files fs.FS) http.Handler {
	fileServer := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if p == "" || p == "index.html" {
			serveIndex(w, r, files)
			return
		}
		if st, err := fs.Stat(files, p); err == nil && !st.IsDir() {
			if strings.HasPrefix(p, "assets/") {
				w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
			}
			fileServer.ServeHTTP(w, r)
			return
		}
		if path.Ext(p) != "" {
			http.NotFound(w, r)
			return
		}
		serveIndex(w, r, files)
	})
}

func serveIndex(w http.ResponseWriter, r *http.Request, files fs.FS) {
	b, err := fs.ReadFile(files, "index.html")
	if err != nil {
		http.Error(w, "the UI was not built into this binary (run make build)", http.StatusNotFound)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b)
}
