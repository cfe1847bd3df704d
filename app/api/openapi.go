package api

import (
	_ "embed"
	"net/http"
)

// openapiDoc describes every route; TestOpenAPIMatchesRoutes keeps it true.
//
//go:embed openapi.json
var openapiDoc []byte

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request, _ *caller) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openapiDoc)
	return err
}
