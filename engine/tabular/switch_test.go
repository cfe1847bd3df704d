package tabular

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// asciiRows returns a header and n ASCII rows, well past the sniffed prefix.
func asciiRows(n int) string {
	var b strings.Builder
	b.WriteString("name,city\n")
	for range n {
		b.WriteString("plain name,plain city\n")
	}
	return b.String()
}

func readAllRows(t *testing.T, in string, opt Options) ([]*Row, *CSVReader, error) {
	t.Helper()
	r, err := NewCSVReader(strings.NewReader(in), opt)
	require.NoError(t, err)
	var rows []*Row
	for {
		row, err := r.Next()
		if errors.Is(err, io.EOF) {
			return rows, r, nil
		}
		if err != nil {
			return rows, r, err
		}
		rows = append(rows, row)
	}
}

// TestLateWindows1252AfterASCII: a Windows-1252 byte far past the sniffed
// start of an otherwise ASCII file switches the decoding instead of failing.
func TestLateWindows1252AfterASCII(t *testing.T) {
	t.Parallel()
	in := asciiRows(10000) + "Caf\xe9,M\xfcnchen\n" + "last,\x80uro\n"
	require.Greater(t, len(in), sniffBytes)
	rows, r, err := readAllRows(t, in, Options{})
	require.NoError(t, err)
	require.Len(t, rows, 10002)
	require.Equal(t, []string{"Café", "München"}, rows[10000].Fields)
	require.Equal(t, []string{"last", "€uro"}, rows[10001].Fields)
	require.Equal(t, EncodingWindows1252, r.Encoding())
}

// TestLateInvalidAfterRealUTF8: once real UTF-8 was read, a later invalid
// byte is damage, reported with its line.
func TestLateInvalidAfterRealUTF8(t *testing.T) {
	t.Parallel()
	in := "name,city\nJosé,Zürich\n" + asciiRows(10000)[len("name,city\n"):] + "Caf\xe9,x\n"
	_, rd, err := readAllRows(t, in, Options{})
	var fe *FormatError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, 10003, fe.Line)
	require.Contains(t, fe.Reason, "invalid UTF-8")
	require.Equal(t, EncodingUTF8, rd.Encoding())
}

// TestForcedUTF8DoesNotSwitch: --encoding utf-8 means exactly that.
func TestForcedUTF8DoesNotSwitch(t *testing.T) {
	t.Parallel()
	_, _, err := readAllRows(t, asciiRows(10)+"Caf\xe9,x\n", Options{Encoding: "utf-8"})
	var fe *FormatError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, 12, fe.Line)
}
