package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

func newNoop(t *testing.T, config string) engine.Processor {
	t.Helper()
	var raw json.RawMessage
	if config != "" {
		raw = json.RawMessage(config)
	}
	p, err := engine.NewNoop(raw)
	require.NoError(t, err)
	return p
}

func noopTask(seq int64, attempt int, input string) *engine.Task {
	t := &engine.Task{Item: &engine.Item{ID: seq + 100, Seq: seq}, Attempt: attempt}
	if input != "" {
		t.Input = json.RawMessage(input)
	}
	return t
}

func TestNoopReturnsItsInput(t *testing.T) {
	t.Parallel()
	p := newNoop(t, "")
	out, err := p.Process(t.Context(), noopTask(1, 1, `{"a":"b"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"a":"b"}`, string(out))
	out, err = p.Process(t.Context(), noopTask(1, 1, ""))
	require.NoError(t, err)
	require.JSONEq(t, `{}`, string(out))

	for _, cfg := range []string{"null", " ", "{}"} {
		_, err := engine.NewNoop(json.RawMessage(cfg))
		require.NoError(t, err, "%q", cfg)
	}
}

func TestNoopConfigErrors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []string{`{"nope":1}`, `{"delayMs":-5}`, `{"notFoundEvery":-1}`, `{"permanentEvery":-1}`, `{"failEvery":"x"}`, `7`} {
		_, err := engine.NewNoop(json.RawMessage(cfg))
		require.Error(t, err, cfg)
		require.Equal(t, engine.EINVALID, engine.ErrorCode(err), cfg)
	}
	// A wrong setting is named as a field, under the stage's config.
	_, err := engine.NewNoop(json.RawMessage(`{"notFoundEvery":-1}`))
	require.Equal(t, "notFoundEvery", engine.ErrorField(err))
	err = engine.InField("stages[2].config", err)
	require.Equal(t, "stages[2].config.notFoundEvery", engine.ErrorField(err))
	require.Equal(t, "stages[2].config: notFoundEvery: must not be negative", engine.ErrorMessage(err))
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
	// Errors that are not about input keep their own code and gain context.
	err = engine.InField("stages[0]", errors.New("disk full"))
	require.Equal(t, engine.EINTERNAL, engine.ErrorCode(err))
	require.Equal(t, "stages[0]: disk full", err.Error())
}

func TestNoopFailEveryFailsFirstAttemptOnly(t *testing.T) {
	t.Parallel()
	p := newNoop(t, `{"failEvery":3}`)
	for seq := int64(1); seq <= 9; seq++ {
		_, err := p.Process(t.Context(), noopTask(seq, 1, `{}`))
		if seq%3 == 0 {
			require.Error(t, err, "seq %d", seq)
			require.Equal(t, engine.ClassTransient, engine.ClassOf(err))
		} else {
			require.NoError(t, err, "seq %d", seq)
		}
		_, err = p.Process(t.Context(), noopTask(seq, 2, `{}`))
		require.NoError(t, err, "seq %d attempt 2", seq)
	}
}

func TestNoopNotFoundAndPermanentEveryAttempt(t *testing.T) {
	t.Parallel()
	p := newNoop(t, `{"notFoundEvery":7,"permanentEvery":4,"failEvery":2}`)
	for _, attempt := range []int{1, 2, 5} {
		_, err := p.Process(t.Context(), noopTask(7, attempt, `{}`))
		require.Equal(t, engine.ClassNotFound, engine.ClassOf(err), "attempt %d", attempt)
		require.Contains(t, err.Error(), "seq 7")

		_, err = p.Process(t.Context(), noopTask(4, attempt, `{}`))
		require.Equal(t, engine.ClassPermanent, engine.ClassOf(err), "attempt %d", attempt)
		require.Contains(t, err.Error(), "seq 4")
	}
	// Precedence: permanent over not found over transient.
	_, err := p.Process(t.Context(), noopTask(28, 1, `{}`))
	require.Equal(t, engine.ClassPermanent, engine.ClassOf(err))
	_, err = p.Process(t.Context(), noopTask(14, 1, `{}`))
	require.Equal(t, engine.ClassNotFound, engine.ClassOf(err))
	_, err = p.Process(t.Context(), noopTask(2, 1, `{}`))
	require.Equal(t, engine.ClassTransient, engine.ClassOf(err))
	_, err = p.Process(t.Context(), noopTask(1, 1, `{}`))
	require.NoError(t, err)
}

func TestNoopDelay(t *testing.T) {
	t.Parallel()
	p := newNoop(t, `{"delayMs":30}`)
	start := time.Now()
	_, err := p.Process(t.Context(), noopTask(1, 1, `{}`))
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
}

func TestNoopDelayHonoursCancellation(t *testing.T) {
	t.Parallel()
	p := newNoop(t, `{"delayMs":60000}`)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := p.Process(ctx, noopTask(1, 1, `{}`))
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		require.Error(t, err)
		require.True(t, errors.Is(err, context.Canceled), "%v", err)
		require.Equal(t, engine.ClassTransient, engine.ClassOf(err), "an interrupted attempt is worth retrying")
	case <-time.After(5 * time.Second):
		t.Fatal("Process did not return after its context was canceled")
	}

	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	_, err := p.Process(ctx, noopTask(1, 1, `{}`))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
