package storetest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// pipelineTests cover the default user and pipelines.
var pipelineTests = []subtest{
	{"DefaultUser", testDefaultUser},
	{"BuiltinNoop", testBuiltinNoop},
	{"PutGetRoundTrip", testPutPipelineRoundTrip},
	{"PutBumpsVersion", testPutPipelineBumpsVersion},
	{"GetMissing", testGetPipelineMissing},
	{"ListOrderedByName", testListPipelines},
}

// testDefaultUser: the local user is ID 1, an admin called "local".
func testDefaultUser(t *testing.T, e *env) {
	u, err := e.s.DefaultUser(e.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), u.ID)
	require.Equal(t, "admin", u.Role)
	require.Equal(t, "local", u.Name)

	again, err := e.s.DefaultUser(e.ctx)
	require.NoError(t, err)
	require.Equal(t, u.ID, again.ID, "DefaultUser is stable")
}

// testBuiltinNoop: a fresh store has the built-in noop pipeline.
func testBuiltinNoop(t *testing.T, e *env) {
	p, err := e.s.GetPipeline(e.ctx, engine.DefaultPipeline)
	require.NoError(t, err)
	require.Equal(t, engine.DefaultPipeline, p.Name)
	require.GreaterOrEqual(t, p.Version, 1)
	require.NotEmpty(t, p.Stages)

	all, err := e.s.ListPipelines(e.ctx)
	require.NoError(t, err)
	require.Contains(t, pipelineNames(all), engine.DefaultPipeline)
}

// lookupPipeline is a two-stage pipeline with configs and retry policies.
func lookupPipeline() *engine.Pipeline {
	return &engine.Pipeline{
		Name:        "lookup",
		Description: "price lookup",
		Stages: []engine.Stage{
			{
				Name:      "fetch",
				Processor: "http",
				Config:    json.RawMessage(`{"url":"https://example.test/items/{{.sku}}","timeout":"5s","headers":{"Accept":"application/json"}}`),
				Retry: &engine.RetryPolicy{
					Transient: engine.ClassPolicy{MaxAttempts: 3, Delays: []engine.Duration{engine.Duration(time.Second), engine.Duration(10 * time.Second)}},
					Jitter:    new(0.1),
				},
			},
			{Processor: "noop"},
		},
		Retry: engine.RetryPolicy{
			RateLimited: engine.ClassPolicy{MaxAttempts: 7},
			NotFound:    engine.ClassPolicy{Delays: []engine.Duration{engine.Duration(time.Minute)}},
		},
		Priority: 3,
	}
}

// requireSameJSON checks that want and got marshal to equivalent JSON.
func requireSameJSON(t *testing.T, want, got any, msgAndArgs ...any) {
	t.Helper()
	w, err := json.Marshal(want)
	require.NoError(t, err)
	g, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(w), string(g), msgAndArgs...)
}

// requireStages checks stages by field, configs and retries by JSON
// equivalence.
func requireStages(t *testing.T, want, got []engine.Stage) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].Name, got[i].Name, "stage %d name", i)
		require.Equal(t, want[i].Processor, got[i].Processor, "stage %d processor", i)
		if len(want[i].Config) > 0 {
			requireJSON(t, want[i].Config, got[i].Config, "stage %d config", i)
		}
		requireSameJSON(t, want[i].Retry, got[i].Retry, "stage %d retry", i)
	}
}

// testPutPipelineRoundTrip: a new pipeline is version 1 and reads back as
// written.
func testPutPipelineRoundTrip(t *testing.T, e *env) {
	want := lookupPipeline()
	put, err := e.s.PutPipeline(e.ctx, &engine.PutPipelineParams{Pipeline: lookupPipeline(), Now: e.now()})
	require.NoError(t, err)
	require.Equal(t, "lookup", put.Name)
	require.Equal(t, 1, put.Version)
	requireStages(t, want.Stages, put.Stages)

	got, err := e.s.GetPipeline(e.ctx, "lookup")
	require.NoError(t, err)
	require.Equal(t, "lookup", got.Name)
	require.Equal(t, 1, got.Version)
	require.Equal(t, want.Description, got.Description)
	require.Equal(t, want.Priority, got.Priority)
	requireStages(t, want.Stages, got.Stages)
	requireSameJSON(t, want.Retry, got.Retry, "pipeline retry")
}

// testPutPipelineBumpsVersion: putting the same name again bumps the
// version and replaces the stages.
func testPutPipelineBumpsVersion(t *testing.T, e *env) {
	_, err := e.s.PutPipeline(e.ctx, &engine.PutPipelineParams{Pipeline: lookupPipeline(), Now: e.now()})
	require.NoError(t, err)

	e.advance(time.Minute)
	next := &engine.Pipeline{
		Name:   "lookup",
		Stages: []engine.Stage{{Name: "only", Processor: "command", Config: json.RawMessage(`{"command":"enrich","args":["--sku","{{.sku}}"]}`)}},
	}
	put, err := e.s.PutPipeline(e.ctx, &engine.PutPipelineParams{Pipeline: next, Now: e.now()})
	require.NoError(t, err)
	require.Equal(t, 2, put.Version)

	got, err := e.s.GetPipeline(e.ctx, "lookup")
	require.NoError(t, err)
	require.Equal(t, 2, got.Version)
	requireStages(t, next.Stages, got.Stages)

	all, err := e.s.ListPipelines(e.ctx)
	require.NoError(t, err)
	n := 0
	for _, p := range all {
		if p.Name == "lookup" {
			n++
			require.Equal(t, 2, p.Version)
		}
	}
	require.Equal(t, 1, n, "ListPipelines lists each name once")
}

// testGetPipelineMissing: an unknown name is not found.
func testGetPipelineMissing(t *testing.T, e *env) {
	_, err := e.s.GetPipeline(e.ctx, "no-such-pipeline")
	requireNotFound(t, err)
}

// testListPipelines: every pipeline, ordered by name.
func testListPipelines(t *testing.T, e *env) {
	for _, name := range []string{"zeta", "alpha", "mid"} {
		p := &engine.Pipeline{Name: name, Stages: []engine.Stage{{Processor: "noop"}}}
		_, err := e.s.PutPipeline(e.ctx, &engine.PutPipelineParams{Pipeline: p, Now: e.now()})
		require.NoError(t, err)
	}
	all, err := e.s.ListPipelines(e.ctx)
	require.NoError(t, err)
	names := pipelineNames(all)
	for _, name := range []string{"zeta", "alpha", "mid", engine.DefaultPipeline} {
		require.Contains(t, names, name)
	}
	require.True(t, slices.IsSorted(names), "ordered by name: %v", names)
}

// pipelineNames returns the names of ps in order.
func pipelineNames(ps []*engine.Pipeline) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}
