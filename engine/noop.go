package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// NoopConfig configures the noop processor. Fault injection is deterministic
// (by item sequence number) so tests and benchmarks can count on it.
type NoopConfig struct {
	// DelayMs makes every attempt take this long.
	DelayMs float64 `json:"delayMs,omitempty"`
	// FailEvery N: items whose seq is a multiple of N fail transiently on
	// their first attempt (and succeed when retried).
	FailEvery int64 `json:"failEvery,omitempty"`
	// NotFoundEvery N: items whose seq is a multiple of N are NOT_FOUND.
	NotFoundEvery int64 `json:"notFoundEvery,omitempty"`
	// PermanentEvery N: items whose seq is a multiple of N fail permanently.
	PermanentEvery int64 `json:"permanentEvery,omitempty"`
}

type noop struct{ cfg NoopConfig }

// NewNoop builds the noop processor: its result is the stage input.
func NewNoop(config json.RawMessage) (Processor, error) {
	var cfg NoopConfig
	if len(bytes.TrimSpace(config)) > 0 && !bytes.Equal(bytes.TrimSpace(config), []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(config))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return nil, Errorf(EINVALID, "noop: %v", err)
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"delayMs", cfg.DelayMs}, {"failEvery", float64(cfg.FailEvery)}, {"notFoundEvery", float64(cfg.NotFoundEvery)}, {"permanentEvery", float64(cfg.PermanentEvery)}} {
		if f.v < 0 {
			return nil, FieldErrorf(f.name, "must not be negative")
		}
	}
	return &noop{cfg: cfg}, nil
}

func (n *noop) Process(ctx context.Context, t *Task) (json.RawMessage, error) {
	if n.cfg.DelayMs > 0 {
		timer := time.NewTimer(time.Duration(n.cfg.DelayMs * float64(time.Millisecond)))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, Transient(ctx.Err())
		case <-timer.C:
		}
	}
	seq := t.Item.Seq
	every := func(n int64) bool { return n > 0 && seq%n == 0 }
	switch {
	case every(n.cfg.PermanentEvery):
		return nil, Permanent(fmt.Errorf("noop: injected permanent failure (seq %d)", seq))
	case every(n.cfg.NotFoundEvery):
		return nil, NotFoundf("noop: injected not found (seq %d)", seq)
	case every(n.cfg.FailEvery) && t.Attempt == 1:
		return nil, Transient(errors.New("noop: injected transient failure"))
	}
	if len(t.Input) == 0 {
		return json.RawMessage("{}"), nil
	}
	return t.Input, nil
}
