package api

import (
	"errors"
	"net/http"

	"github.com/sluicehq/sluice/engine"
)

// statusOf is the one table from engine error codes to HTTP statuses.
var statusOf = map[string]int{
	engine.EINVALID:      http.StatusBadRequest,
	engine.EUNAUTHORIZED: http.StatusUnauthorized,
	engine.EFORBIDDEN:    http.StatusForbidden,
	engine.ENOTFOUND:     http.StatusNotFound,
	engine.ECONFLICT:     http.StatusConflict,
	engine.ETOOLARGE:     http.StatusRequestEntityTooLarge,
	engine.ETOOMANY:      http.StatusTooManyRequests,
	engine.EUNSUPPORTED:  http.StatusUnsupportedMediaType,
	engine.EINTERNAL:     http.StatusInternalServerError,
}

// errorBody is every error answer: {"error":{"code","message"}}.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		// Field names the offending input field of a validation error
		// (such as stages[0].config.url), when the message names one.
		Field string `json:"field,omitempty"`
	} `json:"error"`
}

// writeError answers with the error's code and message. Errors that are
// not *engine.Error are logged and shown only as "internal error".
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if sw, ok := w.(*statusWriter); ok && sw.wrote {
		// The answer has begun (a stream broke half-way): only log.
		s.log.Warn("request failed after the answer began", "method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	code := engine.ErrorCode(err)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		code = engine.ETOOLARGE
		err = engine.Errorf(engine.ETOOLARGE, "the request is larger than the limit of %d bytes", mbe.Limit)
	}
	status, ok := statusOf[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	var body errorBody
	body.Error.Code = code
	body.Error.Message = engine.ErrorMessage(err)
	if code == engine.EINVALID {
		body.Error.Field = engine.ErrorField(err)
	}
	if status == http.StatusInternalServerError {
		s.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		body.Error.Code, body.Error.Message = engine.EINTERNAL, "internal error"
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
	}
	_ = writeJSON(w, status, body)
}

// statusWriter remembers whether the answer has begun.
type statusWriter struct {
	http.ResponseWriter
	wrote  bool
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote, w.status = true, code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.wrote, w.status = true, http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush of the real writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
