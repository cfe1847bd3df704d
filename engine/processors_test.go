package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/engine"
)

// testRegistry holds the built-in processors and the test ones below.
func testRegistry() *engine.Registry {
	reg := engine.NewRegistry()
	reg.Register("variants", newVariantsProc)
	reg.Register("alwaysTransient", func(json.RawMessage) (engine.Processor, error) { return alwaysTransient{}, nil })
	reg.Register("panicOnOdd", func(json.RawMessage) (engine.Processor, error) { return panicOnOdd{}, nil })
	return reg
}

// variantsProc has Variants query strategies and finds something only with
// strategy SucceedAt (never when it is negative).
type variantsProc struct {
	N         int `json:"variants"`
	SucceedAt int `json:"succeedAt"`
}

func newVariantsProc(config json.RawMessage) (engine.Processor, error) {
	p := &variantsProc{}
	if len(config) > 0 {
		if err := json.Unmarshal(config, p); err != nil {
			return nil, engine.Errorf(engine.EINVALID, "variants: %v", err)
		}
	}
	return p, nil
}

func (p *variantsProc) Variants() int { return p.N }

func (p *variantsProc) Process(_ context.Context, t *engine.Task) (json.RawMessage, error) {
	if t.Strategy != p.SucceedAt {
		return nil, engine.NotFoundf("nothing with strategy %d", t.Strategy)
	}
	return json.RawMessage(fmt.Sprintf(`{"foundWith":%d}`, t.Strategy)), nil
}

// alwaysTransient fails every attempt with an unclassified error.
type alwaysTransient struct{}

func (alwaysTransient) Process(context.Context, *engine.Task) (json.RawMessage, error) {
	return nil, errors.New("upstream is down")
}

// panicOnOdd panics on items with an odd seq and passes the others through.
type panicOnOdd struct{}

func (panicOnOdd) Process(_ context.Context, t *engine.Task) (json.RawMessage, error) {
	if t.Item.Seq%2 == 1 {
		panic(fmt.Sprintf("bug on seq %d", t.Item.Seq))
	}
	return t.Input, nil
}
