package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Definition is an allowlisted command (seed 003's job_definitions): the
// only way Sluice runs a program. An admin defines the executable and how
// its argv is built from a payload; people and triggers only choose a key
// and give a payload, which must pass the definition's JSON Schema. No
// shell is involved: each argument is one text/template rendered with the
// payload.
type Definition struct {
	Key         string `json:"key"`
	Description string `json:"description,omitempty"`
	// Executable is an absolute path to the program.
	Executable string `json:"executable"`
	// Args are templates, one per argument ({{.name}} is the payload's
	// "name"); an argument that renders empty is kept as an empty string.
	Args []string `json:"args,omitempty"`
	// ArgSchema is the JSON Schema every payload must pass ({} = any
	// object).
	ArgSchema json.RawMessage `json:"argSchema,omitempty"`
	// Env names variables of Sluice's own environment passed on to the
	// program, besides the fixed allowlist (CommandBaseEnv).
	Env []string `json:"env,omitempty"`
	// TimeoutSeconds bounds one run; the whole process group is killed
	// when it is reached. Default 3600.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// MaxAttempts bounds the runs of one payload (timeouts and failing
	// exit codes are retried until then). Default 3.
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// PermanentExitCodes are exit codes that mean "retrying cannot help":
	// the item ends in ERROR at once. Any other non-zero exit is retried.
	PermanentExitCodes []int `json:"permanentExitCodes,omitempty"`
	// Active false refuses new jobs and runs of the definition.
	Active    *bool     `json:"active,omitempty"`
	Version   int       `json:"version,omitempty"`
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
}

// Defaults of a Definition.
const (
	DefaultCommandTimeout     = 3600
	DefaultCommandMaxAttempts = 3
	// CommandPipelinePrefix names the pipeline every definition gets:
	// "command.KEY", one command stage. Ingesting a file on it runs the
	// command once per row.
	CommandPipelinePrefix = "command."
)

// CommandBaseEnv are the variables of Sluice's environment a command always
// gets (when set); everything else is dropped unless the definition names it.
var CommandBaseEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"}

var definitionKey = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,47}$`)

// IsActive reports whether the definition accepts new work.
func (d *Definition) IsActive() bool { return d.Active == nil || *d.Active }

// PipelineName is the name of the definition's pipeline.
func (d *Definition) PipelineName() string { return CommandPipelinePrefix + d.Key }

// Timeout is the definition's run timeout.
func (d *Definition) Timeout() time.Duration {
	return time.Duration(cmpOr(d.TimeoutSeconds, DefaultCommandTimeout)) * time.Second
}

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// WithDefaults returns a copy with the defaults filled in.
func (d *Definition) WithDefaults() *Definition {
	c := *d
	c.TimeoutSeconds = cmpOr(c.TimeoutSeconds, DefaultCommandTimeout)
	c.MaxAttempts = cmpOr(c.MaxAttempts, DefaultCommandMaxAttempts)
	if len(bytes.TrimSpace(c.ArgSchema)) == 0 {
		c.ArgSchema = json.RawMessage(`{"type":"object"}`)
	}
	if c.Active == nil {
		t := true
		c.Active = &t
	}
	return &c
}

// Pipeline returns the definition's pipeline: one command stage, retried
// up to MaxAttempts for transient failures (failing exit codes, timeouts).
func (d *Definition) Pipeline() *Pipeline {
	d = d.WithDefaults()
	cfg, _ := json.Marshal(CommandConfig{Definition: d.Key})
	return &Pipeline{
		Name:        d.PipelineName(),
		Description: "command " + d.Key + ": " + d.Description,
		Stages:      []Stage{{Name: d.Key, Processor: CommandKind, Config: cfg}},
		Retry:       RetryPolicy{Transient: ClassPolicy{MaxAttempts: d.MaxAttempts}},
	}
}

// Compile validates the definition and returns it ready to run. Errors
// are EINVALID and name the field.
func (d *Definition) Compile() (*Command, error) {
	d = d.WithDefaults()
	if !definitionKey.MatchString(d.Key) {
		return nil, FieldErrorf("key", "%q is not a valid key (lower-case letters, digits, '.', '_', '-'; at most 48)", d.Key)
	}
	if d.Executable == "" {
		return nil, FieldErrorf("executable", "required (an absolute path; no shell is used)")
	}
	if !filepath.IsAbs(d.Executable) {
		return nil, FieldErrorf("executable", "%q is not an absolute path (no PATH lookup, no shell)", d.Executable)
	}
	if d.TimeoutSeconds < 0 || d.TimeoutSeconds > 7*24*3600 {
		return nil, FieldErrorf("timeoutSeconds", "must be between 1 and 604800 (got %d)", d.TimeoutSeconds)
	}
	if d.MaxAttempts < 0 || d.MaxAttempts > 100 {
		return nil, FieldErrorf("maxAttempts", "must be between 1 and 100 (got %d)", d.MaxAttempts)
	}
	for i, name := range d.Env {
		if name == "" || strings.ContainsAny(name, "= \t") {
			return nil, FieldErrorf(fmt.Sprintf("env[%d]", i), "%q is not a variable name", name)
		}
	}
	c := &Command{Def: d}
	for i, a := range d.Args {
		t, err := template.New(fmt.Sprintf("args[%d]", i)).Option("missingkey=error").Parse(a)
		if err != nil {
			return nil, FieldErrorf(fmt.Sprintf("args[%d]", i), "%v", err)
		}
		c.args = append(c.args, t)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(d.ArgSchema))
	if err != nil {
		return nil, FieldErrorf("argSchema", "not JSON: %v", err)
	}
	comp := jsonschema.NewCompiler()
	if err := comp.AddResource("argSchema.json", doc); err != nil {
		return nil, FieldErrorf("argSchema", "%v", err)
	}
	if c.schema, err = comp.Compile("argSchema.json"); err != nil {
		return nil, FieldErrorf("argSchema", "not a valid JSON Schema: %s", oneLine(err.Error()))
	}
	return c, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Command is a compiled Definition.
type Command struct {
	Def    *Definition
	args   []*template.Template
	schema *jsonschema.Schema
}

// CheckPayload validates a payload against the definition's schema. The
// error is EINVALID and names the offending field under "payload"
// ("payload.name: missing property", ...).
func (c *Command) CheckPayload(payload json.RawMessage) error {
	if len(bytes.TrimSpace(payload)) == 0 {
		payload = json.RawMessage(`{}`)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return FieldErrorf("payload", "not JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return FieldErrorf("payload", "must be a JSON object")
	}
	err = c.schema.Validate(v)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return FieldErrorf("payload", "%v", err)
	}
	leaf := ve
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	path := slices.Clone(leaf.InstanceLocation)
	msg := leaf.Error()
	if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "at ") {
		msg = msg[i+2:]
	}
	// A missing property is about the property, not its parent.
	if m := requiredMissing(leaf); m != "" {
		path = append(path, m)
		msg = "required by the schema of command " + c.Def.Key
	}
	field := "payload"
	for _, p := range path {
		field += "." + p
	}
	return FieldErrorf(field, "%s", msg)
}

// requiredMissing returns the first missing property of a "required" error.
func requiredMissing(ve *jsonschema.ValidationError) string {
	if k, ok := ve.ErrorKind.(*kind.Required); ok && len(k.Missing) > 0 {
		return k.Missing[0]
	}
	return ""
}

// Argv renders the argument templates with a payload (already checked) and
// returns the program and its arguments.
func (c *Command) Argv(payload json.RawMessage) ([]string, error) {
	data := map[string]any{}
	if len(bytes.TrimSpace(payload)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.UseNumber()
		if err := dec.Decode(&data); err != nil {
			return nil, FieldErrorf("payload", "not a JSON object: %v", err)
		}
	}
	argv := []string{c.Def.Executable}
	var b strings.Builder
	for i, t := range c.args {
		b.Reset()
		if err := t.Execute(&b, data); err != nil {
			return nil, FieldErrorf(fmt.Sprintf("args[%d]", i), "%s", oneLine(err.Error()))
		}
		argv = append(argv, b.String())
	}
	return argv, nil
}
