package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// CommandKind is the processor kind that runs allowlisted commands.
const CommandKind = "command"

// CommandConfig is the stage configuration of the command processor.
type CommandConfig struct {
	// Definition is the key of the command definition to run; the stage
	// input (the item's row, or the previous stage's result) is its payload.
	Definition string `json:"definition"`
}

// DefinitionGetter loads definitions (the store).
type DefinitionGetter interface {
	GetDefinition(ctx context.Context, key string) (*Definition, error)
}

// CommandProcessorConfig configures the command processor factory.
type CommandProcessorConfig struct {
	// Definitions loads definitions; nil builds processors that can only
	// be validated (listing kinds, checking pipelines offline).
	Definitions DefinitionGetter
	// WorkDir is the root of the working directories: each definition runs
	// in WorkDir/KEY.
	WorkDir string
}

// NewCommandFactory returns the factory of the command processor.
// Definitions are reloaded every few seconds, so a changed or deactivated
// definition reaches running workers soon.
func NewCommandFactory(c CommandProcessorConfig) Factory {
	cache := &commandCache{cfg: c, entries: map[string]commandEntry{}}
	return func(config json.RawMessage) (Processor, error) {
		var cfg CommandConfig
		dec := json.NewDecoder(bytes.NewReader(config))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return nil, Errorf(EINVALID, "command: %v", err)
		}
		if !definitionKey.MatchString(cfg.Definition) {
			return nil, FieldErrorf("definition", "%q is not a definition key", cfg.Definition)
		}
		return &commandProc{key: cfg.Definition, cache: cache}, nil
	}
}

type commandEntry struct {
	cmd    *Command
	err    error
	loaded time.Time
}

type commandCache struct {
	cfg     CommandProcessorConfig
	mu      sync.Mutex
	entries map[string]commandEntry
}

func (c *commandCache) get(ctx context.Context, key string) (*Command, error) {
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && time.Since(e.loaded) < pipelineTTL {
		return e.cmd, e.err
	}
	e = commandEntry{loaded: time.Now()}
	if c.cfg.Definitions == nil {
		return nil, Permanent(fmt.Errorf("command %s: no definitions in this process", key))
	}
	d, err := c.cfg.Definitions.GetDefinition(ctx, key)
	switch {
	case IsNotFound(err):
		e.err = Permanent(fmt.Errorf("command %q is not defined (refused)", key))
	case err != nil:
		return nil, Transient(fmt.Errorf("load command %s: %w", key, err))
	case !d.IsActive():
		e.err = Permanent(fmt.Errorf("command %q is not active (refused)", key))
	default:
		e.cmd, e.err = d.Compile()
		if e.err != nil {
			e.err = Permanent(fmt.Errorf("command %s: %w", key, e.err))
		}
	}
	c.mu.Lock()
	c.entries[key] = e
	c.mu.Unlock()
	return e.cmd, e.err
}

type commandProc struct {
	key   string
	cache *commandCache
}

// Process runs the command with the stage input as its payload. The run's
// exit code, timing and output tails are recorded with the attempt.
func (p *commandProc) Process(ctx context.Context, t *Task) (json.RawMessage, error) {
	cmd, err := p.cache.get(ctx, p.key)
	if err != nil {
		return nil, err
	}
	spec := RunSpec{Payload: t.Input, Env: []string{
		"SLUICE_JOB_ID=" + strconv.FormatInt(t.Item.JobID, 10),
		"SLUICE_ITEM_ID=" + strconv.FormatInt(t.Item.ID, 10),
		"SLUICE_ATTEMPT=" + strconv.Itoa(t.Attempt),
	}}
	if p.cache.cfg.WorkDir != "" {
		spec.Dir = filepath.Join(p.cache.cfg.WorkDir, p.key)
	}
	res, err := cmd.Run(ctx, spec)
	if res != nil {
		t.Detail, _ = json.Marshal(res)
	}
	if err != nil {
		return nil, err
	}
	return res.Result, nil
}
