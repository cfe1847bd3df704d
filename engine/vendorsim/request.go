package vendorsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// request is what the server made of an incoming request.
type request struct {
	// key is the sku, or the record key when there is none.
	key string
	// record is the normalised path and query, for Records.
	record string
	// lookup is true for /lookup requests.
	lookup bool
}

// maxBody bounds POST bodies.
const maxBody = 1 << 20

// readRequest extracts the key of a GET or POST request.
func readRequest(r *http.Request) (*request, error) {
	req := &request{record: recordKey(r.URL.RequestURI()), lookup: r.URL.Path == "/lookup"}
	req.key = req.record
	if !req.lookup {
		return req, nil
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		sku := r.URL.Query().Get("sku")
		if sku == "" {
			return nil, errors.New("missing query parameter sku")
		}
		req.key = sku
	case http.MethodPost:
		body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
		if err != nil {
			return nil, fmt.Errorf("read body: %v", err)
		}
		var in struct {
			SKU json.RawMessage `json:"sku"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, fmt.Errorf("body is not a JSON object: %v", err)
		}
		var s string
		if json.Unmarshal(in.SKU, &s) != nil {
			s = string(bytes.TrimSpace(in.SKU))
		}
		if s == "" || s == "null" {
			return nil, errors.New(`body: missing "sku"`)
		}
		req.key = s
	default:
		return nil, fmt.Errorf("method %s not supported", r.Method)
	}
	return req, nil
}

// recordKey normalises a path and query so that the order of the query's
// parameters does not matter.
func recordKey(pathQuery string) string {
	u, err := url.Parse(pathQuery)
	if err != nil {
		return pathQuery
	}
	if u.RawQuery == "" {
		return u.EscapedPath()
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return u.EscapedPath() + "?" + u.RawQuery
	}
	return u.EscapedPath() + "?" + q.Encode()
}

// product is the answer for a known key.
func (s *Server) product(key string, r *http.Request) []byte {
	type product struct {
		SKU   string  `json:"sku"`
		Name  string  `json:"name"`
		Price float64 `json:"price"`
	}
	type echo struct {
		Method  string            `json:"method"`
		Headers map[string]string `json:"headers"`
		Query   string            `json:"query"`
	}
	out := struct {
		Product product `json:"product"`
		Request *echo   `json:"request,omitempty"`
	}{Product: product{SKU: key, Name: "Name " + key, Price: 12.5}}
	if s.cfg.Echo {
		h := make(map[string]string, len(r.Header))
		for k, v := range r.Header {
			h[k] = strings.Join(v, ", ")
		}
		out.Request = &echo{Method: r.Method, Headers: h, Query: r.URL.RawQuery}
	}
	b, _ := json.Marshal(out)
	return b
}

// write sends a JSON body with status and counts it.
func (s *Server) write(w http.ResponseWriter, status int, body []byte) {
	s.counts.count(status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// fail sends {"error": msg} with status and counts it.
func (s *Server) fail(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	s.write(w, status, b)
}
