package api

import (
	"net/http"

	"github.com/sluicehq/sluice/engine"
)

// Sources are the adapters that turn outside files into jobs (watched
// folders, FTP folders, S3 prefixes). Their records hold no secrets: those
// are named, not stored, so any signed-in account may look; scanning is
// for admins.

func (s *Server) listSources(w http.ResponseWriter, r *http.Request, _ *caller) error {
	list, err := s.store.ListSources(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"sources": nonNil(list)})
}

func (s *Server) getSource(w http.ResponseWriter, r *http.Request, _ *caller) error {
	src, err := s.store.GetSource(r.Context(), r.PathValue("name"))
	if engine.IsNotFound(err) {
		return engine.Errorf(engine.ENOTFOUND, "source %q not found", r.PathValue("name"))
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, src)
}

// scanSource looks at a source now and ingests every stable file, as
// `sluice source scan` does.
func (s *Server) scanSource(w http.ResponseWriter, r *http.Request, c *caller) error {
	name := r.PathValue("name")
	if _, err := s.store.GetSource(r.Context(), name); engine.IsNotFound(err) {
		return engine.Errorf(engine.ENOTFOUND, "source %q not found", name)
	} else if err != nil {
		return err
	}
	if s.cfg.ScanSource == nil {
		return engine.Errorf(engine.ECONFLICT, "this server runs no sources")
	}
	res, err := s.cfg.ScanSource(r.Context(), name)
	if err != nil {
		return err
	}
	s.audit(r, c, "source.scan", "source "+name, "")
	s.events.poke()
	return writeJSON(w, http.StatusOK, res)
}
