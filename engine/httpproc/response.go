package httpproc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// MaxResponseBytes bounds the body of an answer; larger answers fail the
// item permanently.
const MaxResponseBytes = 8 << 20

// column is one result column and its path into the response.
type column struct {
	name string
	path string
	// required: an empty value makes the item NOT_FOUND.
	required bool
}

// mapping turns response bodies into result objects.
type mapping struct {
	columns []column
	// allEmpty: the item is NOT_FOUND when every column is empty (the
	// default rule when notFoundIfEmpty is left out).
	allEmpty bool
}

// newMapping builds the mapping of a checked configuration.
func newMapping(cfg *Config) *mapping {
	m := &mapping{allEmpty: cfg.NotFoundIfEmpty == nil && len(cfg.Map) > 0}
	required := map[string]bool{}
	for _, c := range cfg.NotFoundIfEmpty {
		required[c] = true
	}
	for _, name := range sortedKeys(cfg.Map) {
		m.columns = append(m.columns, column{name: name, path: cfg.Map[name], required: required[name]})
	}
	return m
}

// apply maps a (valid JSON) body to the result object. empty lists the
// columns that make the item NOT_FOUND; when it is not empty the result is
// nil.
func (m *mapping) apply(body []byte) (result []byte, empty []string) {
	if len(m.columns) == 0 {
		trimmed := bytes.TrimSpace(body)
		if len(trimmed) > 0 && trimmed[0] == '{' {
			return trimmed, nil
		}
		if len(trimmed) == 0 {
			trimmed = []byte("null")
		}
		return append(append([]byte(`{"response":`), trimmed...), '}'), nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	var missing, required []string
	for i, c := range m.columns {
		r := gjson.GetBytes(body, c.path)
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(c.name)
		b.Write(key)
		b.WriteByte(':')
		b.Write(rawValue(r))
		if isEmpty(r) {
			missing = append(missing, c.name)
			if c.required {
				required = append(required, c.name)
			}
		}
	}
	b.WriteByte('}')
	switch {
	case len(required) > 0:
		return nil, required
	case m.allEmpty && len(missing) == len(m.columns):
		return nil, missing
	}
	return b.Bytes(), nil
}

// rawValue is the JSON text of a gjson result, null when absent.
func rawValue(r gjson.Result) []byte {
	if !r.Exists() {
		return []byte("null")
	}
	raw := strings.TrimSpace(r.Raw)
	if raw != "" && json.Valid([]byte(raw)) {
		return []byte(raw)
	}
	b, err := json.Marshal(r.Value())
	if err != nil {
		return []byte("null")
	}
	return b
}

// isEmpty reports whether a mapped value counts as nothing: absent, null,
// "", [] or {}.
func isEmpty(r gjson.Result) bool {
	switch {
	case !r.Exists(), r.Type == gjson.Null:
		return true
	case r.Type == gjson.String:
		return r.Str == ""
	case r.IsArray():
		return len(r.Array()) == 0
	case r.IsObject():
		empty := true
		r.ForEach(func(_, _ gjson.Result) bool { empty = false; return false })
		return empty
	}
	return false
}

// describeEmpty explains a NOT_FOUND due to empty columns.
func (m *mapping) describeEmpty(cols []string) string {
	paths := make([]string, 0, len(cols))
	for _, c := range m.columns {
		for _, e := range cols {
			if c.name == e {
				paths = append(paths, fmt.Sprintf("%s (%s)", c.name, c.path))
			}
		}
	}
	sort.Strings(paths)
	return "nothing found: empty " + strings.Join(paths, ", ")
}

// snippet is the start of a body for error messages: at most 200 bytes of
// valid UTF-8 on one line.
func snippet(body []byte) string {
	const max = 200
	s := strings.TrimSpace(string(body))
	if len(s) > max {
		s = s[:max]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	s = strings.ToValidUTF8(s, "?")
	return strings.Join(strings.Fields(s), " ")
}
