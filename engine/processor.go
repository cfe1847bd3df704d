package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Task is what a processor gets for one attempt of one item.
type Task struct {
	Item *Item
	// Input is the stage's input: the item's normalised row for the first
	// stage, the previous stage's result after that.
	Input json.RawMessage
	// Attempt is the attempt number, from 1.
	Attempt int
	// Strategy is the query variant to use (rotated on NOT_FOUND retries).
	Strategy int
	// Detail may be set by the processor to record specifics of this
	// attempt (an HTTP status, a trace id) with it, also when it succeeds.
	// A failure's own Detail takes precedence.
	Detail json.RawMessage
}

// Processor does the work of one pipeline stage for one item. It returns the
// result object (a JSON object whose keys become grid columns) or an error,
// classified with the helpers in errclass.go; an unclassified error counts as
// transient.
type Processor interface {
	Process(ctx context.Context, t *Task) (json.RawMessage, error)
}

// Variants is implemented by processors that have alternative query
// strategies; NOT_FOUND is retried while another one remains.
type Variants interface {
	Variants() int
}

// Factory builds a processor from its stage configuration. It returns an
// EINVALID *Error naming the field when the configuration is wrong.
type Factory func(config json.RawMessage) (Processor, error)

// Registry maps processor kinds to factories. It is safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	factories map[string]Factory
}

// NewRegistry returns a registry holding the built-in processors.
func NewRegistry() *Registry {
	r := &Registry{factories: map[string]Factory{}}
	r.Register("noop", NewNoop)
	return r
}

// Register adds or replaces a processor kind.
func (r *Registry) Register(kind string, f Factory) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.factories[kind] = f
}

// New builds a processor of the given kind.
func (r *Registry) New(kind string, config json.RawMessage) (Processor, error) {
	r.mu.RLock()
	f, ok := r.factories[kind]
	r.mu.RUnlock()
	if !ok {
		return nil, FieldErrorf("processor", "unknown kind %q (one of %s)", kind, r.KindList())
	}
	p, err := f(config)
	if err != nil {
		if ErrorCode(err) == EINVALID {
			return nil, InField("config", err)
		}
		return nil, fmt.Errorf("build %s processor: %w", kind, err)
	}
	return p, nil
}

// KindList returns the registered kinds, comma separated.
func (r *Registry) KindList() string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	kinds := make([]string, 0, len(r.factories))
	for k := range r.factories {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return strings.Join(kinds, ", ")
}
