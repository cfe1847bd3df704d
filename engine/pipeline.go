package engine

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// DefaultPipeline is the name of the built-in pipeline that always exists.
const DefaultPipeline = "noop"

// Stage is one step of a pipeline: a processor kind with its configuration.
type Stage struct {
	// Name is optional; it defaults to the processor kind.
	Name      string          `json:"name,omitempty"`
	Processor string          `json:"processor"`
	Config    json.RawMessage `json:"config,omitempty"`
	// Retry overrides the pipeline's retry policy for this stage.
	Retry *RetryPolicy `json:"retry,omitempty"`
	// MaxConcurrency caps the items of this stage one runner has in
	// process at once, so that a slow stage cannot take every worker;
	// 0 = no cap.
	MaxConcurrency int `json:"maxConcurrency,omitempty"`
	// Share caps them to this fraction of the runner's workers (rounded
	// up, at least 1); 0 or 1 = no cap. With MaxConcurrency, the smaller
	// bound applies.
	Share float64 `json:"share,omitempty"`
	// MaxInFlight caps the items of this stage in process at once across
	// every worker and process (the claim enforces it, from the items
	// PROCESSING at this stage of this pipeline in every job); 0 = no cap.
	MaxInFlight int `json:"maxInFlight,omitempty"`
}

// Pipeline is a named, versioned list of stages an item goes through.
type Pipeline struct {
	Name        string      `json:"name"`
	Version     int         `json:"version"`
	Description string      `json:"description,omitempty"`
	Stages      []Stage     `json:"stages"`
	Retry       RetryPolicy `json:"retry,omitzero"`
	// Priority is given to the jobs of this pipeline (higher runs first).
	Priority int `json:"priority,omitempty"`
	// MaxRequestsPerJob is the spending cap: a job of this pipeline is
	// PAUSED, with the reason, once this many attempts ran; resuming it
	// grants as many again. 0 = no cap.
	MaxRequestsPerJob int64     `json:"maxRequestsPerJob,omitempty"`
	UpdatedAt         time.Time `json:"updatedAt,omitzero"`
}

var pipelineName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// BuiltinNoop returns the built-in noop pipeline.
func BuiltinNoop() *Pipeline {
	return &Pipeline{
		Name:        DefaultPipeline,
		Version:     1,
		Description: "built-in: result = the normalised input",
		Stages:      []Stage{{Processor: "noop"}},
	}
}

// RetryFor returns the effective retry policy of stage i.
func (p *Pipeline) RetryFor(i int) RetryPolicy {
	if i >= 0 && i < len(p.Stages) && p.Stages[i].Retry != nil {
		return p.Stages[i].Retry.WithDefaults()
	}
	return p.Retry.WithDefaults()
}

// Validate checks the pipeline against the processors in reg and returns an
// EINVALID error naming the offending field.
func (p *Pipeline) Validate(reg *Registry) error {
	if !pipelineName.MatchString(p.Name) {
		return FieldErrorf("name", "%q is not a valid pipeline name (letters, digits, '.', '_', '-'; at most 64)", p.Name)
	}
	if len(p.Stages) == 0 {
		return FieldErrorf("stages", "a pipeline needs at least one stage")
	}
	for i, st := range p.Stages {
		field := fmt.Sprintf("stages[%d]", i)
		if st.Processor == "" {
			return FieldErrorf(field+".processor", "required (one of %s)", reg.KindList())
		}
		if _, err := reg.New(st.Processor, st.Config); err != nil {
			return InField(field, err)
		}
		if st.MaxConcurrency < 0 {
			return FieldErrorf(field+".maxConcurrency", "must be ≥ 0 (0 = no cap)")
		}
		if st.MaxInFlight < 0 {
			return FieldErrorf(field+".maxInFlight", "must be ≥ 0 (0 = no cap)")
		}
		if st.Share < 0 || st.Share > 1 {
			return FieldErrorf(field+".share", "must be between 0 and 1 (0 = no cap)")
		}
		if st.Retry != nil {
			if err := st.Retry.validate(field + ".retry"); err != nil {
				return err
			}
		}
	}
	if p.MaxRequestsPerJob < 0 {
		return FieldErrorf("maxRequestsPerJob", "must be ≥ 0 (0 = no cap)")
	}
	return p.Retry.validate("retry")
}

func (r RetryPolicy) validate(field string) error {
	for name, c := range map[string]ClassPolicy{"transient": r.Transient, "rateLimited": r.RateLimited, "notFound": r.NotFound} {
		if c.MaxAttempts < 0 {
			return FieldErrorf(field+"."+name+".maxAttempts", "must be ≥ 0")
		}
		for i, d := range c.Delays {
			if d < 0 {
				return FieldErrorf(fmt.Sprintf("%s.%s.delays[%d]", field, name, i), "must not be negative")
			}
		}
	}
	if r.Jitter != nil && (*r.Jitter < 0 || *r.Jitter > 1) {
		return FieldErrorf(field+".jitter", "must be between 0 and 1")
	}
	return nil
}

// MaxLeaseAttempts is how often an item may lose its lease (its worker died)
// before the reaper marks it ERROR as poison: the transient budget.
func (p *Pipeline) MaxLeaseAttempts() int { return p.Retry.WithDefaults().Transient.MaxAttempts }
