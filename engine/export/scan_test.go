package export

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/stretchr/testify/require"
)

// scanSeeds are results that probe the validating scanner's edges.
var scanSeeds = []string{
	``, ` `, `null`, ` null `, `nul`, `null x`, `nullnull`, `{}`, ` { } `, `{}x`, `{},`, `{}{}`,
	"\ufeff{}", `{`, `}`, `{,}`, `{"a"}`, `{"a":}`, `{"a" 1}`, `{"a":1,}`, `{"a":1 "b":2}`, `{a:1}`, `{'a':1}`,
	`[]`, `[1,2]`, `"s"`, `1`, `true`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":[1 2]}`, `{"a":{"b"}}`, `{"a":{"b":1,}}`,
	`{"a":0}`, `{"a":-0}`, `{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":.5}`, `{"a":+1}`, `{"a":1e}`, `{"a":1e+}`,
	`{"a":1E-7}`, `{"a":-1.5e+3}`, `{"a":1.0e01}`, `{"a":0x10}`, `{"a":NaN}`, `{"a":Infinity}`, `{"a":1_0}`,
	`{"a":tru}`, `{"a":truex}`, `{"a":false}`, `{"a":nulls}`, `{"a":True}`,
	`{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, `{"a":"\uD800"}`, `{"a":"\ud83d\ude42"}`, `{"a":"\/\b\f\n\r\t\"\\"}`,
	"{\"a\":\"\x01\"}", "{\"a\":\"\x7f\"}", "{\"a\":\"\xff\"}", "{\"\xff\":1}", `{"a":"unterminated}`, `{"a":"\"}`,
	"{\"a\":\t\r\n 1 \t}", "{\"a\":[ {\"b\" :\n[ ] } ]}", `{"a":"{[ ]}"}`, `{"":1}`, `{"a":1,"a":2}`,
	`{"seq":1,"result.seq":2,"Seq":3}`, `{"a":{}}x`, `{"a":[]]}`, `{"a":[}`, `{"a":{]}`,
	`{"a":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}`,
	`{"a":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`,
	`{"a":` + strings.Repeat(`{"b":`, maxDepth-1) + "1" + strings.Repeat("}", maxDepth-1) + `}`,
	`{"a":` + strings.Repeat(`{"b":`, maxDepth) + "1" + strings.Repeat("}", maxDepth) + `}`,
}

// checkResult checks that the scanner judges raw exactly as encoding/json
// does and, when raw is an object, that Columns and Cells agree with the
// Decoder-based reference.
func checkResult(t *testing.T, raw string) {
	it := item(1, engine.ItemDone, "")
	it.Result = json.RawMessage(raw)
	s := &fakeStore{items: []*engine.Item{it}}
	cols, colsErr := Columns(context.Background(), s, testJob, nil)
	_, cellsErr := Cells(it, resultCols())

	trimmed := strings.Trim(raw, " \t\r\n")
	switch {
	case raw == "" || json.Valid([]byte(raw)) && trimmed == "null":
		require.NoError(t, colsErr)
		require.NoError(t, cellsErr)
		require.Equal(t, fixedColumns, cols)
	case !json.Valid([]byte(raw)):
		require.True(t, errors.Is(colsErr, errInvalidJSON), "%q: %v", raw, colsErr)
		require.True(t, errors.Is(cellsErr, errInvalidJSON), "%q: %v", raw, cellsErr)
	case trimmed[0] != '{':
		require.True(t, errors.Is(colsErr, errNotObject), "%q: %v", raw, colsErr)
		require.True(t, errors.Is(cellsErr, errNotObject), "%q: %v", raw, cellsErr)
	default:
		require.NoError(t, colsErr, "%q", raw)
		require.NoError(t, cellsErr, "%q", raw)
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(raw), &m))
		require.Len(t, cols, len(fixedColumns)+len(m), "%q", raw)
		got, err := Cells(it, cols)
		require.NoError(t, err)
		require.Equal(t, referenceCells(t, it, cols), got, "%q", raw)
	}
}

func TestScanMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, raw := range scanSeeds {
		checkResult(t, raw)
	}
}

func FuzzScan(f *testing.F) {
	for _, raw := range scanSeeds {
		if len(raw) < 1000 {
			f.Add(raw)
		}
	}
	f.Fuzz(func(t *testing.T, raw string) {
		checkResult(t, raw)
	})
}
