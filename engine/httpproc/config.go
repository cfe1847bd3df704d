package httpproc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// Request is the part of the configuration that describes one request: the
// main one or a query variant.
type Request struct {
	// Method is the HTTP method; default GET (for variants: the main one's).
	Method string `json:"method,omitempty"`
	// URL is a template over the item's fields. Every value an action
	// inserts is percent-encoded (safe in a path segment and in a query
	// value); wrap an action in raw, as in {{raw .base}}, to insert it as
	// is.
	URL string `json:"url,omitempty"`
	// Query adds query parameters: name → template. The rendered values are
	// encoded like any query value.
	Query map[string]string `json:"query,omitempty"`
	// Headers sets request headers: name → template.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is a template producing a JSON body; insert values with
	// {{json .field}}.
	Body string `json:"body,omitempty"`
}

// Config is the configuration of an http stage.
type Config struct {
	Request
	// Map names the result columns: column → gjson path into the response.
	Map map[string]string `json:"map,omitempty"`
	// NotFound lists the statuses that mean "nothing found"; default [404].
	NotFound []int `json:"notFound,omitempty"`
	// NotFoundIfEmpty lists map columns that must have a value: when one is
	// absent, null, "", [] or {}, the item is NOT_FOUND. Left out, an item
	// is NOT_FOUND when every mapped column is empty; [] turns the rule off.
	NotFoundIfEmpty []string `json:"notFoundIfEmpty,omitempty"`
	// Variants are alternative requests tried on NOT_FOUND retries: variant
	// i is used when the task's strategy is i+1. Their url, query and body
	// replace the main request's when set; their headers are merged over
	// the main request's.
	Variants []Request `json:"variants,omitempty"`
	// TimeoutMs bounds each attempt; default 10000.
	TimeoutMs int `json:"timeoutMs,omitempty"`
	// Secrets maps a name used as {{secret "name"}} to the environment
	// variable holding the value. Values are never stored or reported.
	Secrets map[string]string `json:"secrets,omitempty"`
}

// DefaultTimeout is the per-attempt timeout when timeoutMs is left out.
const DefaultTimeout = 10 * time.Second

// maxTimeout bounds timeoutMs.
const maxTimeout = time.Hour

var (
	envName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	methods    = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
)

// invalid returns an EINVALID error whose message starts with the field.
func invalid(field, format string, args ...any) error {
	return engine.FieldErrorf(field, format, args...)
}

// parseConfig decodes and checks everything in config that does not need
// templates.
func parseConfig(config json.RawMessage) (*Config, error) {
	var cfg Config
	trimmed := bytes.TrimSpace(config)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, invalid("url", "required")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, engine.Errorf(engine.EINVALID, "http: %v", err)
	}
	if strings.TrimSpace(cfg.URL) == "" {
		return nil, invalid("url", "required")
	}
	if cfg.Method == "" {
		cfg.Method = http.MethodGet
	}
	if err := checkMethod("method", &cfg.Method); err != nil {
		return nil, err
	}
	for i := range cfg.Variants {
		if cfg.Variants[i].Method == "" {
			cfg.Variants[i].Method = cfg.Method
		}
		if err := checkMethod(fmt.Sprintf("variants[%d].method", i), &cfg.Variants[i].Method); err != nil {
			return nil, err
		}
	}
	if cfg.TimeoutMs < 0 || time.Duration(cfg.TimeoutMs)*time.Millisecond > maxTimeout {
		return nil, invalid("timeoutMs", "must be between 1 and %d (got %d)", maxTimeout.Milliseconds(), cfg.TimeoutMs)
	}
	for _, name := range sortedKeys(cfg.Secrets) {
		if name == "" {
			return nil, invalid("secrets", "empty secret name")
		}
		if !envName.MatchString(cfg.Secrets[name]) {
			return nil, invalid("secrets."+name, "%q is not an environment variable name", cfg.Secrets[name])
		}
	}
	for _, col := range sortedKeys(cfg.Map) {
		if col == "" {
			return nil, invalid("map", "empty column name")
		}
		if strings.TrimSpace(cfg.Map[col]) == "" {
			return nil, invalid("map."+col, "empty path")
		}
	}
	if cfg.NotFound == nil {
		cfg.NotFound = []int{http.StatusNotFound}
	}
	for i, code := range cfg.NotFound {
		if code < 100 || code > 599 {
			return nil, invalid(fmt.Sprintf("notFound[%d]", i), "%d is not an HTTP status", code)
		}
	}
	for i, col := range cfg.NotFoundIfEmpty {
		if _, ok := cfg.Map[col]; !ok {
			return nil, invalid(fmt.Sprintf("notFoundIfEmpty[%d]", i), "%q is not a map column", col)
		}
	}
	return &cfg, nil
}

// checkMethod upper-cases *m and checks it is supported.
func checkMethod(field string, m *string) error {
	*m = strings.ToUpper(strings.TrimSpace(*m))
	if !slices.Contains(methods, *m) {
		return invalid(field, "%q is not supported (one of %s)", *m, strings.Join(methods, ", "))
	}
	return nil
}

// timeout is the per-attempt timeout.
func (c *Config) timeout() time.Duration {
	if c.TimeoutMs == 0 {
		return DefaultTimeout
	}
	return time.Duration(c.TimeoutMs) * time.Millisecond
}

// variant returns the effective request of variant i (0-based): the main
// request with the variant's fields over it.
func (c *Config) variant(i int) Request {
	v := c.Variants[i]
	out := c.Request
	out.Method = v.Method
	if v.URL != "" {
		out.URL = v.URL
	}
	if v.Query != nil {
		out.Query = v.Query
	}
	if v.Body != "" {
		out.Body = v.Body
	}
	if len(v.Headers) > 0 {
		h := make(map[string]string, len(c.Headers)+len(v.Headers))
		for k, val := range c.Headers {
			h[k] = val
		}
		for k, val := range v.Headers {
			h[k] = val
		}
		out.Headers = h
	}
	return out
}

// sortedKeys returns m's keys in order, so that errors are deterministic.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
