package httpproc_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/httpproc"
	"github.com/sluicehq/sluice/engine/vendorsim"
)

// sim starts a vendor simulator for the test.
func sim(t *testing.T, cfg vendorsim.Config) *vendorsim.Server {
	t.Helper()
	s := vendorsim.New(cfg)
	t.Cleanup(s.Close)
	return s
}

// newProc builds an http processor; "$URL" in config is replaced by base.
func newProc(t *testing.T, base, config string) *httpproc.Processor {
	t.Helper()
	p, err := httpproc.New(json.RawMessage(strings.ReplaceAll(config, "$URL", base)))
	require.NoError(t, err)
	hp, ok := p.(*httpproc.Processor)
	require.True(t, ok)
	t.Cleanup(hp.CloseIdleConnections)
	return hp
}

// task is attempt `attempt` of item 42 at stage 0 with the given input.
func task(input string, attempt, strategy int) *engine.Task {
	return &engine.Task{Item: &engine.Item{ID: 42, JobID: 7, Seq: 1, Stage: 0, Attempts: attempt},
		Input: json.RawMessage(input), Attempt: attempt, Strategy: strategy}
}

// failure checks err is an *engine.Failure of class and returns it.
func failure(t *testing.T, err error, class engine.ErrorClass) *engine.Failure {
	t.Helper()
	require.Error(t, err)
	var f *engine.Failure
	require.True(t, errors.As(err, &f), "not a Failure: %v", err)
	require.Equal(t, class, f.Class, "error: %v", err)
	require.Equal(t, class, engine.ClassOf(err))
	return f
}

// detail decodes a failure's detail.
func detail(t *testing.T, f *engine.Failure) httpproc.Detail {
	t.Helper()
	var d httpproc.Detail
	require.NoError(t, json.Unmarshal(f.Detail, &d), "detail %s", f.Detail)
	return d
}

// setenv sets a process-wide environment variable whose name is unique to
// the test (t.Setenv cannot be used with t.Parallel).
func setenv(t *testing.T, name, value string) {
	t.Helper()
	require.NoError(t, os.Setenv(name, value))
	t.Cleanup(func() { _ = os.Unsetenv(name) })
}
