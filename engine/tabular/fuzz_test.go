package tabular

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

var fuzzEncodings = []string{"", "utf-8", "utf-16le", "utf-16be", "windows-1252"}

// FuzzCSVReader feeds arbitrary bytes to the reader with fuzzed options and
// checks its invariants. For input that encoding/csv parses without error
// (and that has no CR, which encoding/csv rewrites inside quoted fields), the
// records and their line numbers must match encoding/csv's exactly.
func FuzzCSVReader(f *testing.F) {
	for _, seed := range []string{
		"a,b,c\n1,2,3\n",
		"a,b\r\n1,\"x\r\ny\"\r\n",
		"a;b\n\"1;\"\"2\"\"\";3\n\n4;5\n",
		"\xEF\xBB\xBFh1\th2\n\"q\"\tv\n",
		"\xFF\xFEa\x00,\x00b\x00\n\x001\x00,\x002\x00\n\x00",
		"caf\xE9|\x80\n1|2",
		"a,b\n1,2,3\n4\n",
		"a,,a\n1,2,3\n",
		"a,b\n\"open\n",
		"a,b\n1,\"x\"y\n",
		"a\x00b\n",
		"sep=;\na;b\n1;2\n",
		"a|b\r1|2\r",
		"x,y\n5'10\",a \"b\"\n",
		"",
		"\n\n",
	} {
		f.Add([]byte(seed), byte(0), byte(0))
	}
	f.Add([]byte("a,b\n\"1\n2\n3\",4\n"), byte(1), byte(129))
	f.Fuzz(func(t *testing.T, data []byte, delimSel, encSel byte) {
		opt := Options{Encoding: fuzzEncodings[int(encSel&0x7f)%len(fuzzEncodings)]}
		if d := int(delimSel) % (len(delimiterCandidates) + 1); d > 0 {
			opt.Delimiter = rune(delimiterCandidates[d-1])
		}
		if encSel >= 0x80 {
			opt.MaxRecordBytes = 64
		}
		checkInvariants(t, data, opt)
		differential(t, data)
		sameWithReuse(t, data, opt)
	})
}

// sameWithReuse checks that ReuseRecord changes nothing but the lifetime of
// what Next returns: the same rows (copied before the next call), the same
// errors.
func sameWithReuse(t *testing.T, data []byte, opt Options) {
	t.Helper()
	read := func(opt Options) ([]Row, error) {
		r, err := NewCSVReader(bytes.NewReader(data), opt)
		if err != nil {
			return nil, err
		}
		var rows []Row
		for {
			row, err := r.Next()
			if errors.Is(err, io.EOF) {
				return rows, nil
			}
			if err != nil {
				return rows, err
			}
			kept := *row
			kept.Fields = make([]string, len(row.Fields))
			for i, f := range row.Fields {
				kept.Fields[i] = strings.Clone(f)
			}
			rows = append(rows, kept)
		}
	}
	want, wantErr := read(opt)
	opt.ReuseRecord = true
	got, gotErr := read(opt)
	require.Equal(t, wantErr, gotErr)
	require.Equal(t, want, got)
}

// checkInvariants reads data to the end and checks what must always hold.
func checkInvariants(t *testing.T, data []byte, opt Options) {
	r, err := NewCSVReader(bytes.NewReader(data), opt)
	if err != nil {
		var fe *FormatError
		require.ErrorAs(t, err, &fe)
		require.NotEmpty(t, fe.Reason)
		return
	}
	header, keys := r.Header(), r.Keys()
	require.NotEmpty(t, header)
	require.Len(t, keys, len(header))
	requireUnique(t, header)
	requireUnique(t, keys)
	for i := range header {
		require.NotEmpty(t, strings.TrimSpace(header[i]))
		require.NotEmpty(t, keys[i])
	}
	require.Contains(t, []string{EncodingUTF8, EncodingUTF16LE, EncodingUTF16BE, EncodingWindows1252}, r.Encoding())
	d, err := checkDelimiter(r.Delimiter())
	require.NoError(t, err)
	require.NotZero(t, d)
	if opt.Delimiter != 0 {
		require.Equal(t, opt.Delimiter, r.Delimiter())
	}
	prevLine := 0
	var obj []byte
	for n := 0; ; n++ {
		require.LessOrEqual(t, n, len(data), "more rows than bytes: reading does not end")
		row, err := r.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				var fe *FormatError
				require.ErrorAs(t, err, &fe)
				require.Positive(t, fe.Line)
			} else {
				require.Equal(t, int64(len(data)), r.BytesRead())
			}
			_, again := r.Next()
			require.Equal(t, err, again, "errors are sticky")
			break
		}
		require.Greater(t, row.Line, prevLine)
		prevLine = row.Line
		require.NotEmpty(t, row.Fields)
		if row.Err == "" {
			require.Len(t, row.Fields, len(header))
		} else {
			require.True(t, strings.HasPrefix(row.Err, "line "), row.Err)
		}
		for _, f := range row.Fields {
			require.True(t, utf8.ValidString(f), "field %q is not UTF-8", f)
		}
		obj = AppendObject(obj[:0], keys, row.Fields, n%2 == 0)
		var m map[string]string
		require.NoError(t, json.Unmarshal(obj, &m), "%s", obj)
		require.Len(t, m, len(keys))
		require.LessOrEqual(t, r.BytesRead(), int64(len(data)))
	}
}

func requireUnique(t *testing.T, names []string) {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		require.False(t, seen[n], "duplicate name %q in %q", n, names)
		seen[n] = true
	}
}

// differential compares with encoding/csv on input both should read alike.
func differential(t *testing.T, data []byte) {
	if !utf8.Valid(data) || bytes.ContainsAny(data, "\r\x00") || bytes.HasPrefix(data, bomUTF8) ||
		bytes.HasPrefix(bytes.ToLower(data), []byte("sep=")) {
		return
	}
	cr := csv.NewReader(bytes.NewReader(data))
	cr.FieldsPerRecord = -1
	var want [][]string
	var lines []int
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return // encoding/csv is stricter (bare quotes) or the input is broken
		}
		line, _ := cr.FieldPos(0)
		want, lines = append(want, rec), append(lines, line)
	}
	r, err := NewCSVReader(bytes.NewReader(data), Options{Delimiter: ',', Encoding: "utf-8"})
	if len(want) == 0 {
		require.Error(t, err)
		return
	}
	require.NoError(t, err)
	if equalNonBlankUnique(want[0]) {
		require.Equal(t, want[0], r.Header())
	}
	for i := 1; i < len(want); i++ {
		row, err := r.Next()
		require.NoError(t, err)
		require.Equal(t, want[i], row.Fields)
		require.Equal(t, lines[i], row.Line)
	}
	_, err = r.Next()
	require.ErrorIs(t, err, io.EOF)
}

// equalNonBlankUnique reports whether names are all non-blank and distinct,
// so that Header must return them unchanged.
func equalNonBlankUnique(names []string) bool {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if strings.TrimSpace(n) == "" || seen[n] {
			return false
		}
		seen[n] = true
	}
	return true
}
