package tabular

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/encoding/charmap"
)

// benchSize is roughly how much CSV the benchmarks parse per iteration.
const benchSize = 20 << 20

var benchData = sync.OnceValue(func() []byte { return makeBenchCSV(benchSize) })

// makeBenchCSV generates about size bytes of 6-column CSV shaped like a
// customer export: mostly plain fields, every tenth name quoted with a comma
// in it, every fiftieth note quoted with a doubled quote and a line break.
func makeBenchCSV(size int) []byte {
	cities := []string{"Berlin", "São Paulo", "New York", "Zürich", "Lyon", "Osaka", "Cape Town"}
	var b bytes.Buffer
	b.Grow(size + 256)
	b.WriteString("id,name,email,city,amount,note\r\n")
	for i := 0; b.Len() < size; i++ {
		name := fmt.Sprintf("Customer %d", i)
		if i%10 == 0 {
			name = fmt.Sprintf("\"Smith, John %d\"", i)
		}
		note := "regular order; nothing special"
		if i%50 == 0 {
			note = "\"said \"\"call me\"\"\r\nsecond line\""
		}
		fmt.Fprintf(&b, "%d,%s,user%d@example.com,%s,%d.%02d,%s\r\n",
			100000+i, name, i, cities[i%len(cities)], i%100000, i%100, note)
	}
	return b.Bytes()
}

// runBench parses data once per iteration, encoding every row with
// AppendObject when encode is set, and reports MB/s of input.
func runBench(b *testing.B, data []byte, opt Options, encode bool) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		r, err := NewCSVReader(bytes.NewReader(data), opt)
		if err != nil {
			b.Fatal(err)
		}
		keys := r.Keys()
		for {
			row, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if row.Err != "" {
				b.Fatal(row.Err)
			}
			if encode {
				buf = AppendObject(buf[:0], keys, row.Fields, true)
			}
		}
	}
}

// BenchmarkCSVReader measures the ingest hot path: parse ~20 MB of UTF-8
// 6-column CSV and encode every row as a JSON object.
func BenchmarkCSVReader(b *testing.B) {
	runBench(b, benchData(), Options{}, true)
}

// BenchmarkCSVReaderParseOnly measures parsing without JSON encoding.
func BenchmarkCSVReaderParseOnly(b *testing.B) {
	runBench(b, benchData(), Options{}, false)
}

// BenchmarkCSVReaderWindows1252 measures the decoding path.
func BenchmarkCSVReaderWindows1252(b *testing.B) {
	data, err := charmap.Windows1252.NewEncoder().Bytes(bytes.ReplaceAll(benchData(), []byte("São"), []byte("Sao")))
	if err != nil {
		b.Fatal(err)
	}
	runBench(b, data, Options{Encoding: "windows-1252"}, true)
}

// BenchmarkAppendObject measures JSON encoding of one typical row.
func BenchmarkAppendObject(b *testing.B) {
	keys := []string{"id", "name", "email", "city", "amount", "note"}
	vals := []string{"100042", "Smith, John 42", "user42@example.com", "Zürich", "42.42", `said "call me"`}
	var buf []byte
	for b.Loop() {
		buf = AppendObject(buf[:0], keys, vals, true)
	}
}

func TestBenchDataParses(t *testing.T) {
	t.Parallel()
	data := makeBenchCSV(1 << 20)
	r, rows, err := readAll(t, string(data), Options{})
	require.NoError(t, err)
	require.Equal(t, []string{"id", "name", "email", "city", "amount", "note"}, r.Keys())
	want := bytes.Count(data, []byte("\r\n")) - 1 - strings.Count(string(data), "call me")
	require.Len(t, rows, want)
	for _, row := range rows {
		require.Empty(t, row.Err)
	}
	require.Equal(t, "Smith, John 0", rows[0].Fields[1])
	require.Equal(t, "said \"call me\"\r\nsecond line", rows[0].Fields[5])
}
