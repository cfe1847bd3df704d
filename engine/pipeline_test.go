package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// requireInvalid checks that err is EINVALID and that its message starts
// with the field it names.
func requireInvalid(t *testing.T, err error, field string, contains ...string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err), "%v", err)
	require.True(t, strings.HasPrefix(engine.ErrorMessage(err), field), "%q does not name %q", engine.ErrorMessage(err), field)
	for _, c := range contains {
		require.Contains(t, engine.ErrorMessage(err), c)
	}
}

func validPipeline() *engine.Pipeline {
	return &engine.Pipeline{Name: "lookup.v2_x-1", Stages: []engine.Stage{{Processor: "noop"}}}
}

func TestPipelineValidateNamesTheField(t *testing.T) {
	t.Parallel()
	reg := engine.NewRegistry()
	neg := -1
	cases := []struct {
		name     string
		mutate   func(p *engine.Pipeline)
		field    string
		contains []string
	}{
		{"empty name", func(p *engine.Pipeline) { p.Name = "" }, "name:", nil},
		{"name with space", func(p *engine.Pipeline) { p.Name = "my pipe" }, "name:", []string{`"my pipe"`}},
		{"name starting with dot", func(p *engine.Pipeline) { p.Name = ".hidden" }, "name:", nil},
		{"name too long", func(p *engine.Pipeline) { p.Name = strings.Repeat("a", 65) }, "name:", nil},
		{"no stages", func(p *engine.Pipeline) { p.Stages = nil }, "stages:", nil},
		{"missing processor", func(p *engine.Pipeline) { p.Stages[0].Processor = "" }, "stages[0].processor:", []string{"noop"}},
		{"unknown processor", func(p *engine.Pipeline) {
			p.Stages = append(p.Stages, engine.Stage{Processor: "teleport"})
		}, "stages[1]:", []string{`"teleport"`, "noop"}},
		{"unknown noop field", func(p *engine.Pipeline) {
			p.Stages[0].Config = json.RawMessage(`{"delay":5}`)
		}, "stages[0]:", []string{"config", `"delay"`}},
		{"negative delayMs", func(p *engine.Pipeline) {
			p.Stages[0].Config = json.RawMessage(`{"delayMs":-1}`)
		}, "stages[0]:", []string{"config", "delayMs"}},
		{"negative failEvery", func(p *engine.Pipeline) {
			p.Stages[0].Config = json.RawMessage(`{"failEvery":-3}`)
		}, "stages[0]:", []string{"config"}},
		{"config not an object", func(p *engine.Pipeline) {
			p.Stages[0].Config = json.RawMessage(`[1]`)
		}, "stages[0]:", []string{"config"}},
		{"negative maxAttempts", func(p *engine.Pipeline) {
			p.Retry.Transient.MaxAttempts = neg
		}, "retry.transient.maxAttempts:", nil},
		{"negative notFound maxAttempts", func(p *engine.Pipeline) {
			p.Retry.NotFound.MaxAttempts = neg
		}, "retry.notFound.maxAttempts:", nil},
		{"negative delay", func(p *engine.Pipeline) {
			p.Retry.RateLimited.Delays = []engine.Duration{engine.Duration(time.Second), engine.Duration(-time.Second)}
		}, "retry.rateLimited.delays[1]:", nil},
		{"jitter above 1", func(p *engine.Pipeline) { p.Retry.Jitter = new(1.5) }, "retry.jitter:", nil},
		{"negative jitter", func(p *engine.Pipeline) { p.Retry.Jitter = new(-0.1) }, "retry.jitter:", nil},
		{"stage retry", func(p *engine.Pipeline) {
			p.Stages[0].Retry = &engine.RetryPolicy{Transient: engine.ClassPolicy{MaxAttempts: neg}}
		}, "stages[0].retry.transient.maxAttempts:", nil},
		{"stage jitter", func(p *engine.Pipeline) {
			p.Stages = append(p.Stages, engine.Stage{Processor: "noop", Retry: &engine.RetryPolicy{Jitter: new(2.0)}})
		}, "stages[1].retry.jitter:", nil},
		{"negative stage maxConcurrency", func(p *engine.Pipeline) {
			p.Stages = append(p.Stages, engine.Stage{Processor: "noop", MaxConcurrency: neg})
		}, "stages[1].maxConcurrency:", nil},
		{"stage share above 1", func(p *engine.Pipeline) { p.Stages[0].Share = 1.5 }, "stages[0].share:", nil},
		{"negative stage share", func(p *engine.Pipeline) { p.Stages[0].Share = -0.5 }, "stages[0].share:", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := validPipeline()
			tc.mutate(p)
			requireInvalid(t, p.Validate(reg), tc.field, tc.contains...)
		})
	}
}

func TestPipelineValidateAcceptsGoodPipelines(t *testing.T) {
	t.Parallel()
	reg := engine.NewRegistry()
	require.NoError(t, engine.BuiltinNoop().Validate(reg))
	require.NoError(t, validPipeline().Validate(reg))
	p := &engine.Pipeline{
		Name: "two",
		Stages: []engine.Stage{
			{Processor: "noop", Config: json.RawMessage(`{"delayMs":1.5,"failEvery":3,"notFoundEvery":0}`)},
			{Processor: "noop", Config: json.RawMessage(`null`), Retry: &engine.RetryPolicy{Jitter: new(1.0)},
				MaxConcurrency: 2, Share: 0.5},
		},
		Retry: engine.RetryPolicy{Transient: engine.ClassPolicy{MaxAttempts: 0}, Jitter: new(0.0)},
	}
	require.NoError(t, p.Validate(reg))
}

func TestPipelineValidateNonValidationErrorIsNotInvalid(t *testing.T) {
	t.Parallel()
	reg := engine.NewRegistry()
	boom := errors.New("disk on fire")
	reg.Register("broken", func(json.RawMessage) (engine.Processor, error) { return nil, boom })
	p := &engine.Pipeline{Name: "p", Stages: []engine.Stage{{Processor: "broken"}}}
	err := p.Validate(reg)
	require.ErrorIs(t, err, boom)
	require.Equal(t, engine.EINTERNAL, engine.ErrorCode(err))
	require.Contains(t, err.Error(), "stages[0]")
}

func TestBuiltinNoop(t *testing.T) {
	t.Parallel()
	p := engine.BuiltinNoop()
	require.Equal(t, engine.DefaultPipeline, p.Name)
	require.Len(t, p.Stages, 1)
	require.Equal(t, "noop", p.Stages[0].Processor)
	require.Equal(t, engine.DefaultRetryPolicy(), p.RetryFor(0))
	require.Equal(t, 5, p.MaxLeaseAttempts())
}

func TestPipelineRetryForPrefersStagePolicy(t *testing.T) {
	t.Parallel()
	stage := engine.RetryPolicy{Transient: engine.ClassPolicy{MaxAttempts: 9}}
	p := &engine.Pipeline{
		Name:   "p",
		Stages: []engine.Stage{{Processor: "noop"}, {Processor: "noop", Retry: &stage}},
		Retry:  engine.RetryPolicy{Transient: engine.ClassPolicy{MaxAttempts: 3}, Jitter: new(0.1)},
	}
	require.Equal(t, 3, p.RetryFor(0).Transient.MaxAttempts)
	require.Equal(t, 0.1, *p.RetryFor(0).Jitter)
	got := p.RetryFor(1)
	require.Equal(t, 9, got.Transient.MaxAttempts)
	require.Equal(t, 0.2, *got.Jitter, "a stage policy is completed from the defaults, not from the pipeline")
	require.Equal(t, engine.DefaultRetryPolicy().Transient.Delays, got.Transient.Delays)
	// Out of range: the pipeline's policy.
	require.Equal(t, 3, p.RetryFor(7).Transient.MaxAttempts)
	require.Equal(t, 3, p.RetryFor(-1).Transient.MaxAttempts)
	// The lease budget is the pipeline's transient budget.
	require.Equal(t, 3, p.MaxLeaseAttempts())
}

type echo struct{}

func (echo) Process(_ context.Context, t *engine.Task) (json.RawMessage, error) { return t.Input, nil }

func TestRegistry(t *testing.T) {
	t.Parallel()
	reg := engine.NewRegistry()
	require.Equal(t, "noop", reg.KindList())
	_, err := reg.New("echo", nil)
	requireInvalid(t, err, "processor:", `"echo"`)

	reg.Register("echo", func(json.RawMessage) (engine.Processor, error) { return echo{}, nil })
	require.Equal(t, "echo, noop", reg.KindList())
	p, err := reg.New("echo", nil)
	require.NoError(t, err)
	require.IsType(t, echo{}, p)

	reg.Register("picky", func(json.RawMessage) (engine.Processor, error) {
		return nil, engine.Errorf(engine.EINVALID, "url: required")
	})
	_, err = reg.New("picky", nil)
	requireInvalid(t, err, "config:", "url: required")
}
