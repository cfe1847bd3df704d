package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/engine"
)

// ParsePipeline reads a pipeline written in YAML or JSON; unknown fields
// are an error naming them.
func ParsePipeline(raw []byte) (*engine.Pipeline, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, engine.Errorf(engine.EINVALID, "not valid YAML or JSON: %v", err)
	}
	var p engine.Pipeline
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, engine.Errorf(engine.EINVALID, "%v", err)
	}
	return &p, nil
}

func (s *Server) listPipelines(w http.ResponseWriter, r *http.Request, _ *caller) error {
	list, err := s.store.ListPipelines(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"pipelines": nonNil(list)})
}

func (s *Server) getPipeline(w http.ResponseWriter, r *http.Request, _ *caller) error {
	p, err := s.store.GetPipeline(r.Context(), r.PathValue("name"))
	if engine.IsNotFound(err) {
		return engine.Errorf(engine.ENOTFOUND, "pipeline %q not found", r.PathValue("name"))
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}

// putPipeline creates or replaces a pipeline from a YAML or JSON body; a
// validation error names the field (also in error.field).
func (s *Server) putPipeline(w http.ResponseWriter, r *http.Request, c *caller) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		return err
	}
	p, err := ParsePipeline(raw)
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	if p.Name == "" {
		p.Name = name
	}
	if p.Name != name {
		return engine.FieldErrorf("name", "the body names %q but the address names %q", p.Name, name)
	}
	if err := p.Validate(s.cfg.Registry); err != nil {
		return err
	}
	stored, err := s.store.PutPipeline(r.Context(), &engine.PutPipelineParams{Pipeline: p, Now: s.now()})
	if err != nil {
		return err
	}
	s.audit(r, c, "pipeline.put", "pipeline "+stored.Name, "")
	return writeJSON(w, http.StatusOK, stored)
}
