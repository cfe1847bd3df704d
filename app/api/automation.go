package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/engine"
	"sigs.k8s.io/yaml"
)

// StaleWorkerAfter is when a worker without a heartbeat is shown as stale
// (three missed beats of the default 5s).
const StaleWorkerAfter = 15 * time.Second

// ParseDefinition reads a command definition from YAML or JSON; unknown
// fields are an error.
func ParseDefinition(raw []byte) (*engine.Definition, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, engine.Errorf(engine.EINVALID, "not valid YAML or JSON: %v", err)
	}
	var d engine.Definition
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, engine.Errorf(engine.EINVALID, "%v", err)
	}
	return &d, nil
}

func (s *Server) listDefinitions(w http.ResponseWriter, r *http.Request, _ *caller) error {
	list, err := s.store.ListDefinitions(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"definitions": nonNil(list)})
}

// putDefinition creates or replaces a definition (admins only): PUT names
// the key in the address, POST in the body.
func (s *Server) putDefinition(w http.ResponseWriter, r *http.Request, c *caller) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		return err
	}
	d, err := ParseDefinition(raw)
	if err != nil {
		return err
	}
	if key := r.PathValue("key"); key != "" {
		if d.Key == "" {
			d.Key = key
		}
		if d.Key != key {
			return engine.FieldErrorf("key", "the body names %q but the address names %q", d.Key, key)
		}
	}
	stored, err := engine.ApplyDefinition(r.Context(), s.store, d, s.now())
	if err != nil {
		return err
	}
	s.audit(r, c, "definition.put", "definition "+stored.Key, "")
	return writeJSON(w, http.StatusOK, stored)
}

// runDefinition starts a one-item command job with the body as payload:
// an unknown key is refused (404), a payload failing the schema is a 400
// naming the field.
func (s *Server) runDefinition(w http.ResponseWriter, r *http.Request, c *caller) error {
	var body struct {
		Payload  json.RawMessage `json:"payload"`
		Priority int             `json:"priority"`
	}
	if err := decodeJSON(w, r, &body, 1<<20); err != nil {
		return err
	}
	j, err := engine.StartJob(r.Context(), s.store, s.cfg.Notifier, engine.JobRequest{
		UserID: c.user.ID, Definition: r.PathValue("key"), Payload: body.Payload, Priority: body.Priority,
		Source: engine.SourceManual, SourceRef: "api", Now: s.now(),
	})
	if err != nil {
		return err
	}
	s.audit(r, c, "definition.run", "definition "+r.PathValue("key"), "")
	return writeJSON(w, http.StatusCreated, engine.ViewJob(j, s.now()))
}

// triggerView is a trigger with its next fire time in its own zone.
type triggerView struct {
	*engine.Trigger
	NextFireLocal string `json:"nextFireLocal,omitempty"`
}

// ViewTrigger adds the next fire time in the trigger's zone.
func ViewTrigger(t *engine.Trigger) any {
	v := triggerView{Trigger: t}
	if t.NextFireAt != nil {
		v.NextFireLocal = LocalTime(*t.NextFireAt, t.TZ)
	}
	return v
}

// LocalTime formats t in the zone tz ("2026-03-08 03:30:00 EDT").
func LocalTime(t time.Time, tz string) string {
	if loc, err := time.LoadLocation(tz); err == nil {
		t = t.In(loc)
	}
	return t.Format("2006-01-02 15:04:05 MST")
}

func (s *Server) listTriggers(w http.ResponseWriter, r *http.Request, _ *caller) error {
	list, err := s.store.ListTriggers(r.Context(), &engine.ListTriggersParams{})
	if err != nil {
		return err
	}
	out := make([]any, 0, len(list))
	for _, t := range list {
		out = append(out, ViewTrigger(t))
	}
	return writeJSON(w, http.StatusOK, map[string]any{"triggers": out})
}

// createTrigger adds a trigger (admins only).
func (s *Server) createTrigger(w http.ResponseWriter, r *http.Request, c *caller) error {
	var t engine.Trigger
	if err := decodeJSON(w, r, &t, 1<<20); err != nil {
		return err
	}
	stored, err := engine.AddTrigger(r.Context(), s.store, &t, s.now())
	if err != nil {
		return err
	}
	s.audit(r, c, "trigger.add", "trigger "+stored.Name, "")
	return writeJSON(w, http.StatusCreated, ViewTrigger(stored))
}

// patchTrigger changes a trigger (admins only): the fields given change
// ({"enabled":false} disables it), the others stay.
func (s *Server) patchTrigger(w http.ResponseWriter, r *http.Request, c *caller) error {
	var p engine.TriggerPatch
	if err := decodeJSON(w, r, &p, 1<<20); err != nil {
		return err
	}
	t, err := engine.EditTrigger(r.Context(), s.store, r.PathValue("name"), &p, s.now())
	if err != nil {
		return err
	}
	s.audit(r, c, "trigger.change", "trigger "+t.Name, "")
	return writeJSON(w, http.StatusOK, ViewTrigger(t))
}

func (s *Server) deleteTrigger(w http.ResponseWriter, r *http.Request, c *caller) error {
	name := r.PathValue("name")
	if err := s.store.DeleteTrigger(r.Context(), name); err != nil {
		if engine.IsNotFound(err) {
			return engine.Errorf(engine.ENOTFOUND, "trigger %q not found", name)
		}
		return err
	}
	s.audit(r, c, "trigger.remove", "trigger "+name, "")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// workerView is a worker with its staleness.
type workerView struct {
	*engine.Worker
	Stale bool `json:"stale"`
	// SecondsSinceSeen is how long ago its last heartbeat was.
	SecondsSinceSeen float64 `json:"secondsSinceSeen"`
}

// ViewWorkers marks the stale workers.
func ViewWorkers(list []*engine.Worker, now time.Time) []workerView {
	out := make([]workerView, 0, len(list))
	for _, w := range list {
		out = append(out, workerView{Worker: w, Stale: engine.WorkerStale(w, now, StaleWorkerAfter),
			SecondsSinceSeen: now.Sub(w.LastSeen).Seconds()})
	}
	return out
}

func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request, _ *caller) error {
	list, err := s.store.ListWorkers(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"workers": ViewWorkers(list, s.now()),
		"staleAfterSeconds": StaleWorkerAfter.Seconds()})
}
