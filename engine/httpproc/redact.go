package httpproc

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"sort"
	"strings"
)

// redacted replaces secret values wherever they appear.
const redacted = "***"

// redactor replaces the values of a stage's secrets, in each of the forms
// they can take in a URL or a JSON text, by "***".
type redactor struct {
	// forms are the strings to replace, longest first so that an encoded
	// form is replaced whole before a shorter one inside it.
	forms []string
}

// newRedactor reads the current values of the secrets (environment variable
// names by secret name).
func newRedactor(secrets map[string]string) *redactor {
	seen := map[string]bool{}
	r := &redactor{}
	for _, env := range secrets {
		v := os.Getenv(env)
		if v == "" {
			continue
		}
		quoted, _ := json.Marshal(v)
		for _, f := range []string{v, escapeComponent(v), url.QueryEscape(v), url.PathEscape(v), string(quoted[1 : len(quoted)-1])} {
			if f != "" && !seen[f] {
				seen[f] = true
				r.forms = append(r.forms, f)
			}
		}
	}
	sort.Slice(r.forms, func(i, j int) bool { return len(r.forms[i]) > len(r.forms[j]) })
	return r
}

// string redacts s.
func (r *redactor) string(s string) string {
	for _, f := range r.forms {
		s = strings.ReplaceAll(s, f, redacted)
	}
	return s
}

// contains reports whether b holds any form of a secret.
func (r *redactor) contains(b []byte) bool {
	for _, f := range r.forms {
		if bytes.Contains(b, []byte(f)) {
			return true
		}
	}
	return false
}

// json redacts the strings (keys and values) of a JSON text, keeping it
// valid. Texts that hold no secret are returned unchanged.
func (r *redactor) json(b []byte) []byte {
	if len(r.forms) == 0 || !r.contains(b) {
		return b
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return []byte(`"` + redacted + `"`)
	}
	out, err := json.Marshal(r.value(v))
	if err != nil {
		return []byte(`"` + redacted + `"`)
	}
	return out
}

// value redacts a decoded JSON value.
func (r *redactor) value(v any) any {
	switch v := v.(type) {
	case string:
		return r.string(v)
	case []any:
		for i := range v {
			v[i] = r.value(v[i])
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, val := range v {
			out[r.string(k)] = r.value(val)
		}
		return out
	}
	return v
}

// error redacts an error's message.
func (r *redactor) error(err error) error {
	if err == nil || len(r.forms) == 0 {
		return err
	}
	msg := err.Error()
	if red := r.string(msg); red != msg {
		return redactedError{msg: red}
	}
	return err
}

// redactedError replaces an error whose message held a secret. It does not
// unwrap: the original would show the secret to whoever printed it.
type redactedError struct{ msg string }

func (e redactedError) Error() string { return e.msg }
