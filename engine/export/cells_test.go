package export

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/stretchr/testify/require"
)

// resultCols returns the fixed columns followed by plain result columns.
func resultCols(ks ...string) []Column {
	cols := append([]Column(nil), fixedColumns...)
	for _, k := range ks {
		cols = append(cols, resultColumn(k))
	}
	return cols
}

func TestCellsValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value, want string
	}{
		{`"text"`, "text"},
		{`""`, ""},
		{`"caf\u00e9 \"q\" a\\b\n\t\/"`, "café \"q\" a\\b\n\t/"},
		{`"\ud83d\ude42 日本"`, "🙂 日本"},
		{"\"bad\xffbyte\"", "bad\uFFFDbyte"},
		{`1.50`, "1.50"},
		{`-0`, "-0"},
		{`0.1e-7`, "0.1e-7"},
		{`1E+400`, "1E+400"},
		{`12345678901234567890123`, "12345678901234567890123"},
		{`true`, "true"},
		{`false`, "false"},
		{`null`, ""},
		{`{}`, "{}"},
		{`[]`, "[]"},
		{`{"a":[1,2.50,{"b":null}],"c":"x y"}`, `{"a":[1,2.50,{"b":null}],"c":"x y"}`},
		{"{ \"a\" : [ 1 ,\n\t2 ] , \"s\" : \" spaced } \\\" [ \" }", `{"a":[1,2],"s":" spaced } \" [ "}`},
		{`["}", "{", "]"]`, `["}","{","]"]`},
		{`[["a\\"]]`, `[["a\\"]]`},
	} {
		it := item(1, engine.ItemDone, `{"before":"b", "v" : `+tc.value+` ,"after":2}`)
		cells, err := Cells(it, resultCols("before", "v", "after"))
		require.NoError(t, err, tc.value)
		require.Equal(t, []string{"1", "DONE", "0", "", "b", tc.want, "2"}, cells, tc.value)
		require.Equal(t, referenceCells(t, it, resultCols("before", "v", "after")), cells, tc.value)
	}
}

func TestCellsMissingAndNil(t *testing.T) {
	t.Parallel()
	cols := resultCols("a", "b")
	for _, tc := range []struct {
		name   string
		result string
		want   []string
	}{
		{"nil result", "", []string{"4", "PENDING", "2", "last", "", ""}},
		{"null result", "null", []string{"4", "PENDING", "2", "last", "", ""}},
		{"empty object", "{}", []string{"4", "PENDING", "2", "last", "", ""}},
		{"missing key", `{"b":"x"}`, []string{"4", "PENDING", "2", "last", "", "x"}},
		{"null value", `{"a":null,"b":1}`, []string{"4", "PENDING", "2", "last", "", "1"}},
		{"unknown keys", `{"zz":1,"a":"A","yy":{"a":2}}`, []string{"4", "PENDING", "2", "last", "A", ""}},
	} {
		it := item(4, engine.ItemPending, tc.result)
		it.Attempts = 2
		it.LastError = "last"
		cells, err := Cells(it, cols)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, cells, tc.name)
	}
}

func TestCellsColumnSubsetAndOrder(t *testing.T) {
	t.Parallel()
	it := item(12345, engine.ItemNotFound, `{"a":1,"b":2,"c":3,"seq":"s"}`)
	it.Attempts = 150
	it.LastError = "not found"
	cols := []Column{
		{Key: "c", Label: "c"},
		{Key: "error", Label: "Error"},
		{Key: "a", Label: "a"},
		{Key: "result.seq", Label: "seq (result)"},
		{Key: "attempts", Label: "Attempts"},
		{Key: "nope", Label: "nope"},
		{Key: "seq", Label: "Seq"},
		{Key: "status", Label: "Status"},
	}
	cells, err := Cells(it, cols)
	require.NoError(t, err)
	require.Equal(t, []string{"3", "not found", "1", "s", "150", "", "12345", "NOT_FOUND"}, cells)

	cells, err = Cells(it, nil)
	require.NoError(t, err)
	require.Empty(t, cells)
}

func TestCellsDuplicateKeyLastWins(t *testing.T) {
	t.Parallel()
	it := item(1, engine.ItemDone, `{"a":1,"b":2,"a":"last"}`)
	cells, err := Cells(it, resultCols("a", "b"))
	require.NoError(t, err)
	require.Equal(t, []string{"1", "DONE", "0", "", "last", "2"}, cells)
	var m map[string]any
	require.NoError(t, json.Unmarshal(it.Result, &m))
	require.Equal(t, "last", m["a"], "encoding/json agrees")
}

func TestCellsBadResult(t *testing.T) {
	t.Parallel()
	for _, result := range []string{`{"a":1`, `{"a":01}`, `{a:1}`, `[{"a":1}]`, `"s"`, `true`, "{\"a\":\"\x01\"}"} {
		_, err := Cells(item(9, engine.ItemDone, result), resultCols("a"))
		require.Error(t, err, result)
		require.Contains(t, err.Error(), "seq 9", result)
	}
}

// TestCellsMatchReference compares Cells with a straightforward
// implementation on encoding/json's Decoder over a variety of results.
func TestCellsMatchReference(t *testing.T) {
	t.Parallel()
	results := []string{
		`{"a":"x","b":1,"c":true,"d":null,"e":[1,"2",{"3":4}],"f":{"g":{"h":[]}}}`,
		` { "b" : -1.5e+3 , "a":"\u0041\u00e9\ud83d\ude00" , "k\u0065y":"escaped key" } `,
		`{"key":"v1","key":"v2","seq":5,"status":"s","error":"e","attempts":"a","result.seq":"rs"}`,
		`{"t":"tab\there","n":"line\nbreak","u":"` + "\xe2\x82" + `"}`,
		`{"nested":{"a" : 1,"b":[ ]},"arr":[ {"x":"y z"} ]}`,
		`{}`, `null`, ``,
	}
	s := &fakeStore{}
	for i, r := range results {
		s.items = append(s.items, item(int64(i+1), engine.ItemDone, r))
	}
	cols, err := Columns(context.Background(), s, testJob, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"seq", "status", "attempts", "error", "a", "b", "c", "d", "e", "f", "key",
		"result.seq", "result.status", "result.error", "result.attempts", "result.result.seq",
		"t", "n", "u", "nested", "arr"}, keys(cols))
	for _, it := range s.items {
		got, err := Cells(it, cols)
		require.NoError(t, err, string(it.Result))
		require.Equal(t, referenceCells(t, it, cols), got, string(it.Result))
	}
}

// referenceCells renders it the slow, obvious way: a json.Decoder token walk
// into a map from result key to cell text.
func referenceCells(t testing.TB, it *engine.Item, cols []Column) []string {
	values := map[string]string{}
	if len(it.Result) > 0 && string(it.Result) != "null" {
		dec := json.NewDecoder(bytes.NewReader(it.Result))
		dec.UseNumber()
		tok, err := dec.Token()
		require.NoError(t, err)
		require.Equal(t, json.Delim('{'), tok)
		for dec.More() {
			tok, err := dec.Token()
			require.NoError(t, err)
			k := tok.(string)
			var raw json.RawMessage
			require.NoError(t, dec.Decode(&raw))
			var v any
			vdec := json.NewDecoder(bytes.NewReader(raw))
			vdec.UseNumber()
			require.NoError(t, vdec.Decode(&v))
			switch v := v.(type) {
			case nil:
				values[k] = ""
			case string:
				values[k] = v
			case json.Number:
				values[k] = v.String()
			case bool:
				values[k] = fmt.Sprint(v)
			default:
				var buf bytes.Buffer
				require.NoError(t, json.Compact(&buf, raw))
				values[k] = buf.String()
			}
		}
	}
	out := make([]string, len(cols))
	for i, c := range cols {
		switch c.Key {
		case "seq":
			out[i] = fmt.Sprint(it.Seq)
		case "status":
			out[i] = string(it.Status)
		case "attempts":
			out[i] = fmt.Sprint(it.Attempts)
		case "error":
			out[i] = it.LastError
		default:
			out[i] = values[strings.TrimPrefix(c.Key, "result.")]
		}
	}
	return out
}

// benchItem is a typical finished row: a dozen fields of mixed types.
func benchItem() *engine.Item {
	return &engine.Item{ID: 1, JobID: testJob, Seq: 123456, Status: engine.ItemDone, Attempts: 1,
		Result: json.RawMessage(`{"name":"Acme Corporation","street":"1 Main Street","city":"Springfield",` +
			`"zip":"12345","country":"US","lat":37.60994,"lng":-122.39342,"price":"1.50","score":0.875,` +
			`"verified":true,"phone":null,"tags":["b2b","retail"],"source":{"id":"abc123","rank":2}}`)}
}

func BenchmarkCells(b *testing.B) {
	it := benchItem()
	cols, err := Columns(context.Background(), &fakeStore{items: []*engine.Item{it}}, testJob, nil)
	require.NoError(b, err)
	b.SetBytes(int64(len(it.Result)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Cells(it, cols); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCellsReference measures the map-per-row Decoder approach that
// Cells avoids, for comparison.
func BenchmarkCellsReference(b *testing.B) {
	it := benchItem()
	cols, err := Columns(context.Background(), &fakeStore{items: []*engine.Item{it}}, testJob, nil)
	require.NoError(b, err)
	b.SetBytes(int64(len(it.Result)))
	b.ReportAllocs()
	for b.Loop() {
		referenceCells(b, it, cols)
	}
}

func BenchmarkWriteCSV(b *testing.B) {
	const n = 10000
	s := &fakeStore{}
	for i := range n {
		it := benchItem()
		it.Seq = int64(i + 1)
		s.items = append(s.items, it)
	}
	b.ReportAllocs()
	for b.Loop() {
		rows, err := WriteCSV(context.Background(), s, testJob, nil, io.Discard)
		if err != nil || rows != n {
			b.Fatal(rows, err)
		}
	}
}
