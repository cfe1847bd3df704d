package httpproc

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"text/template"
	"text/template/parse"
)

// noEscape lists the functions whose output the url template inserts as is:
// they escape themselves or ask not to be escaped.
var noEscape = map[string]bool{"raw": true, "urlquery": true, "urlescape": true}

// secretError is a secret that cannot be read; its message names the
// environment variable, never a value.
type secretError struct{ name, env string }

func (e *secretError) Error() string {
	if e.env == "" {
		return fmt.Sprintf("secret %q is not declared in secrets", e.name)
	}
	return fmt.Sprintf("secret %q: environment variable %s is not set", e.name, e.env)
}

// funcs returns the template functions of a stage with these secrets.
func funcs(secrets map[string]string) template.FuncMap {
	return template.FuncMap{
		"secret": func(name string) (string, error) {
			env, ok := secrets[name]
			if !ok {
				return "", &secretError{name: name}
			}
			v := os.Getenv(env)
			if v == "" {
				return "", &secretError{name: name, env: env}
			}
			return v, nil
		},
		"json": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
		"raw":       func(s any) string { return fmt.Sprint(s) },
		"urlescape": func(s any) string { return escapeComponent(fmt.Sprint(s)) },
		"get": func(m map[string]any, key string) any {
			if v, ok := m[key]; ok && v != nil {
				return v
			}
			return ""
		},
	}
}

// compile parses one template of the stage configuration. field names it in
// errors; secrets are the declared secret names; inURL makes every action
// percent-encode what it prints.
func compile(field, text string, secrets map[string]string, inURL bool) (*template.Template, error) {
	t, err := template.New(field).Option("missingkey=error").Funcs(funcs(secrets)).Parse(text)
	if err != nil {
		return nil, invalid(field, "%v", err)
	}
	if err := walk(t.Tree.Root, func(n parse.Node) error { return checkSecrets(n, secrets) }); err != nil {
		return nil, invalid(field, "%v", err)
	}
	if inURL {
		_ = walk(t.Tree.Root, func(n parse.Node) error {
			if a, ok := n.(*parse.ActionNode); ok {
				escapeAction(a)
			}
			return nil
		})
	}
	return t, nil
}

// walk calls fn on n and every node below it.
func walk(n parse.Node, fn func(parse.Node) error) error {
	if n == nil {
		return nil
	}
	if err := fn(n); err != nil {
		return err
	}
	var kids []parse.Node
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			kids = n.Nodes
		}
	case *parse.ActionNode:
		kids = []parse.Node{n.Pipe}
	case *parse.PipeNode:
		if n != nil {
			for _, c := range n.Cmds {
				kids = append(kids, c)
			}
		}
	case *parse.CommandNode:
		kids = n.Args
	case *parse.IfNode:
		kids = []parse.Node{n.Pipe, n.List, n.ElseList}
	case *parse.RangeNode:
		kids = []parse.Node{n.Pipe, n.List, n.ElseList}
	case *parse.WithNode:
		kids = []parse.Node{n.Pipe, n.List, n.ElseList}
	}
	for _, k := range kids {
		if isNil(k) {
			continue
		}
		if err := walk(k, fn); err != nil {
			return err
		}
	}
	return nil
}

// isNil reports whether a node interface holds a nil pointer (an absent
// else branch).
func isNil(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.ListNode:
		return n == nil
	case *parse.PipeNode:
		return n == nil
	}
	return n == nil
}

// checkSecrets rejects {{secret "x"}} when x is not declared.
func checkSecrets(n parse.Node, secrets map[string]string) error {
	c, ok := n.(*parse.CommandNode)
	if !ok || len(c.Args) < 2 {
		return nil
	}
	if id, ok := c.Args[0].(*parse.IdentifierNode); ok && id.Ident == "secret" {
		if s, ok := c.Args[1].(*parse.StringNode); ok {
			if _, declared := secrets[s.Text]; !declared {
				return &secretError{name: s.Text}
			}
		}
	}
	return nil
}

// escapeAction makes a printing action pipe its value through urlescape,
// unless it assigns a variable or already ends in a function of noEscape.
func escapeAction(a *parse.ActionNode) {
	if a.Pipe == nil || len(a.Pipe.Decl) > 0 || len(a.Pipe.Cmds) == 0 {
		return
	}
	last := a.Pipe.Cmds[len(a.Pipe.Cmds)-1]
	if id, ok := last.Args[0].(*parse.IdentifierNode); ok && noEscape[id.Ident] {
		return
	}
	ident := parse.NewIdentifier("urlescape").SetPos(a.Pos)
	a.Pipe.Cmds = append(a.Pipe.Cmds, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: a.Pos, Args: []parse.Node{ident}})
}

// escapeComponent percent-encodes everything but the unreserved characters
// of RFC 3986, so the result is safe as a path segment and as a query value.
func escapeComponent(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

var missingKey = regexp.MustCompile(`map has no entry for key "([^"]*)"`)

// render executes t over the item's fields. Its errors are permanent: the
// same item will fail the same way next time.
func render(field string, t *template.Template, data map[string]any) (string, error) {
	var b strings.Builder
	err := t.Execute(&b, data)
	if err == nil {
		return b.String(), nil
	}
	var se *secretError
	if errors.As(err, &se) {
		return "", fmt.Errorf("%s: %w", field, se)
	}
	if m := missingKey.FindStringSubmatch(err.Error()); m != nil {
		return "", fmt.Errorf("%s: the item has no field %q (fields: %s)", field, m[1], fieldList(data))
	}
	return "", fmt.Errorf("%s: %v", field, err)
}

// fieldList names the item's fields for error messages.
func fieldList(data map[string]any) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return "none"
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}
