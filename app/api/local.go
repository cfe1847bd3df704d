package api

import (
	"context"
	"net/http"

	"github.com/sluicehq/sluice/engine"
)

// The desktop window reaches the API without signing in: Wails' asset
// server calls a LocalHandler in process, and every request through it
// counts as one account (the local default user). The identity travels in
// the request's context under an unexported key, which only LocalHandler
// sets: a request that came from the network, through Handler, cannot
// carry it, whatever headers or cookies it sends. So LocalHandler must
// never be given to a listener; `sluice --serve` in the same binary keeps
// its sign-in.

// localKey is the context key of the in-process caller.
type localKey struct{}

// LocalHandler serves the same routes as Handler, each request as the
// account u, with no credentials and no CSRF token. It is for an
// in-process transport only (the desktop window's asset server), never
// for a network listener.
func (s *Server) LocalHandler(u *engine.User) http.Handler {
	local := *u
	local.PasswordHash = ""
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), localKey{}, &local)))
	})
}

// localCaller is the caller a LocalHandler vouches for, or nil.
func localCaller(r *http.Request) *caller {
	u, ok := r.Context().Value(localKey{}).(*engine.User)
	if !ok || u == nil {
		return nil
	}
	return &caller{user: u, local: true, ip: "local"}
}

// DesktopUser is the account the desktop window acts as: the local default
// user (ID 1, "local", an admin), which every store creates.
func DesktopUser(ctx context.Context, st engine.Store) (*engine.User, error) {
	return st.DefaultUser(ctx)
}
