package httpproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/template"
)

// named is a compiled template with the name of what it produces (a query
// parameter or a header).
type named struct {
	name  string
	field string
	tmpl  *template.Template
}

// compiled is a request whose templates are parsed: the main request or a
// variant.
type compiled struct {
	method    string
	urlField  string
	url       *template.Template
	query     []named
	headers   []named
	bodyField string
	body      *template.Template
}

// compileRequest parses the templates of req. prefix ("" or "variants[i].")
// starts the field names in errors; base, when set, is the main request,
// whose templates a variant inherits where it sets none.
func compileRequest(prefix string, req Request, base *compiled, secrets map[string]string) (*compiled, error) {
	c := &compiled{method: req.Method}
	if base != nil {
		*c = *base
		c.method = req.Method
	}
	var err error
	if req.URL != "" {
		c.urlField = prefix + "url"
		if err := checkURLText(c.urlField, req.URL); err != nil {
			return nil, err
		}
		if c.url, err = compile(c.urlField, req.URL, secrets, true); err != nil {
			return nil, err
		}
	}
	if req.Query != nil {
		if c.query, err = compileMap(prefix+"query", req.Query, secrets, false); err != nil {
			return nil, err
		}
	}
	if len(req.Headers) > 0 {
		hs, err := compileMap(prefix+"headers", req.Headers, secrets, true)
		if err != nil {
			return nil, err
		}
		c.headers = mergeHeaders(c.headers, hs)
	}
	if req.Body != "" {
		c.bodyField = prefix + "body"
		if c.body, err = compile(c.bodyField, req.Body, secrets, false); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// compileMap parses a map of templates in name order.
func compileMap(field string, m map[string]string, secrets map[string]string, header bool) ([]named, error) {
	out := make([]named, 0, len(m))
	for _, name := range sortedKeys(m) {
		f := field + "." + name
		if name == "" {
			return nil, invalid(field, "empty name")
		}
		if header && !headerName.MatchString(name) {
			return nil, invalid(f, "not a valid header name")
		}
		t, err := compile(f, m[name], secrets, false)
		if err != nil {
			return nil, err
		}
		out = append(out, named{name: name, field: f, tmpl: t})
	}
	return out, nil
}

// mergeHeaders returns base with over's headers replacing those of the same
// (canonical) name.
func mergeHeaders(base, over []named) []named {
	out := make([]named, 0, len(base)+len(over))
	for _, b := range base {
		replaced := false
		for _, o := range over {
			replaced = replaced || http.CanonicalHeaderKey(o.name) == http.CanonicalHeaderKey(b.name)
		}
		if !replaced {
			out = append(out, b)
		}
	}
	return append(out, over...)
}

// checkURLText checks what can be checked before rendering: a URL that does
// not start with an action must start with http:// or https://.
func checkURLText(field, text string) error {
	lead := strings.ToLower(strings.TrimSpace(text))
	if i := strings.Index(lead, "{{"); i >= 0 {
		lead = lead[:i]
	}
	if lead == "" || strings.HasPrefix(lead, "http://") || strings.HasPrefix(lead, "https://") ||
		strings.HasPrefix("http://", lead) || strings.HasPrefix("https://", lead) {
		return nil
	}
	return invalid(field, "must start with http:// or https://")
}

// build renders the request for one item. Its errors are the item's fault
// and permanent.
func (c *compiled) build(ctx context.Context, data map[string]any) (*http.Request, error) {
	raw, err := render(c.urlField, c.url, data)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: rendered %q is not an absolute http(s) URL", c.urlField, raw)
	}
	if len(c.query) > 0 {
		q := u.Query()
		for _, n := range c.query {
			v, err := render(n.field, n.tmpl, data)
			if err != nil {
				return nil, err
			}
			q.Set(n.name, v)
		}
		u.RawQuery = q.Encode()
	}
	var body io.Reader
	if c.body != nil {
		b, err := render(c.bodyField, c.body, data)
		if err != nil {
			return nil, err
		}
		b = strings.TrimSpace(b)
		if !json.Valid([]byte(b)) {
			return nil, fmt.Errorf("%s: the rendered template is not valid JSON (insert values with {{json .field}})", c.bodyField)
		}
		body = bytes.NewReader([]byte(b))
	}
	req, err := http.NewRequestWithContext(ctx, c.method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", c.urlField, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "sluice")
	for _, n := range c.headers {
		v, err := render(n.field, n.tmpl, data)
		if err != nil {
			return nil, err
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, errors.New(n.field + ": the rendered value contains a line break or NUL")
		}
		req.Header.Set(n.name, v)
	}
	return req, nil
}

// fields decodes the task input into template data; numbers keep their
// text.
func fields(input json.RawMessage) (map[string]any, error) {
	data := map[string]any{}
	if len(bytes.TrimSpace(input)) == 0 {
		return data, nil
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	if err := dec.Decode(&data); err != nil {
		return nil, fmt.Errorf("input: not a JSON object: %v", err)
	}
	if data == nil {
		data = map[string]any{}
	}
	return data, nil
}
