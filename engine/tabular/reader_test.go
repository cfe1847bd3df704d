package tabular

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// readAll reads every row of input; it returns the reader, the rows and the
// error that ended reading (nil at a clean end of file).
func readAll(t *testing.T, input string, opt Options) (*CSVReader, []*Row, error) {
	t.Helper()
	r, err := NewCSVReader(strings.NewReader(input), opt)
	if err != nil {
		return nil, nil, err
	}
	var rows []*Row
	for {
		row, err := r.Next()
		if errors.Is(err, io.EOF) {
			return r, rows, nil
		}
		if err != nil {
			return r, rows, err
		}
		rows = append(rows, row)
	}
}

// fields returns the Fields of rows.
func fields(rows []*Row) [][]string {
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = r.Fields
	}
	return out
}

// requireFormatError asserts err is a *FormatError on line with a reason
// containing part.
func requireFormatError(t *testing.T, err error, line int, part string) {
	t.Helper()
	var fe *FormatError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, line, fe.Line, "error: %v", err)
	require.Contains(t, fe.Reason, part)
}

func TestReaderSimple(t *testing.T) {
	t.Parallel()
	for name, input := range map[string]string{
		"lf":         "a,b,c\n1,2,3\n4,5,6\n",
		"crlf":       "a,b,c\r\n1,2,3\r\n4,5,6\r\n",
		"no newline": "a,b,c\n1,2,3\n4,5,6",
		"cr only":    "a,b,c\r1,2,3\r4,5,6\r",
		"final cr":   "a,b,c\r\n1,2,3\r\n4,5,6\r",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r, rows, err := readAll(t, input, Options{})
			require.NoError(t, err)
			require.Equal(t, []string{"a", "b", "c"}, r.Header())
			require.Equal(t, [][]string{{"1", "2", "3"}, {"4", "5", "6"}}, fields(rows))
			require.Equal(t, 2, rows[0].Line)
			require.Equal(t, 3, rows[1].Line)
			require.Equal(t, int64(len(input)), r.BytesRead())
		})
	}
}

func TestReaderReuseRecord(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", bufferSize+100) // a line longer than the read buffer
	input := "a,b\n1,2\n\"q,1\",\"multi\nline\"\n" + long + ",y\nshort\n3,4\n"
	sameWithReuse(t, []byte(input), Options{})

	r, err := NewCSVReader(strings.NewReader(input), Options{ReuseRecord: true})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, r.Header())
	first, err := r.Next()
	require.NoError(t, err)
	require.Equal(t, []string{"1", "2"}, first.Fields)
	second, err := r.Next()
	require.NoError(t, err)
	require.Same(t, first, second, "the row is handed out again")
	require.Equal(t, []string{"q,1", "multi\nline"}, second.Fields)
	third, err := r.Next()
	require.NoError(t, err)
	require.Equal(t, []string{long, "y"}, third.Fields)
	fourth, err := r.Next()
	require.NoError(t, err)
	require.Equal(t, "line 6: has 1 fields, header has 2", fourth.Err)
	require.Equal(t, []string{"short"}, fourth.Fields)
	require.Equal(t, "a", r.Header()[0], "the header is not reused")
}

func TestReaderQuotedMultiLine(t *testing.T) {
	t.Parallel()
	input := "id,text,n\n" +
		"1,\"plain\",x\n" +
		"2,\"two\nlines\",y\n" +
		"3,\"say \"\"hi\"\", a,b\",z\n" +
		"\n" +
		"4,\"three\r\nlines\r\nhere\",w\r\n" +
		"5,\"\",\"\"\n" +
		"6,\"ends with quote\"\"\",\"\"\"\"\n"
	_, rows, err := readAll(t, input, Options{})
	require.NoError(t, err)
	require.Equal(t, [][]string{
		{"1", "plain", "x"},
		{"2", "two\nlines", "y"},
		{"3", `say "hi", a,b`, "z"},
		{"4", "three\r\nlines\r\nhere", "w"},
		{"5", "", ""},
		{"6", `ends with quote"`, `"`},
	}, fields(rows))
	lines := make([]int, len(rows))
	for i, r := range rows {
		lines[i] = r.Line
		require.Empty(t, r.Err)
	}
	require.Equal(t, []int{2, 3, 5, 7, 10, 11}, lines)
}

func TestReaderWrongFieldCount(t *testing.T) {
	t.Parallel()
	input := "a,b,c\n1,2,3\n1,2\n1,2,3,4\n\n7,8,9\n"
	_, rows, err := readAll(t, input, Options{})
	require.NoError(t, err)
	require.Len(t, rows, 4)
	require.Empty(t, rows[0].Err)
	require.Equal(t, "line 3: has 2 fields, header has 3", rows[1].Err)
	require.Equal(t, []string{"1", "2"}, rows[1].Fields)
	require.Equal(t, "line 4: has 4 fields, header has 3", rows[2].Err)
	require.Empty(t, rows[3].Err)
	require.Equal(t, 6, rows[3].Line)
}

func TestReaderBareQuoteIsLiteral(t *testing.T) {
	t.Parallel()
	_, rows, err := readAll(t, "name,height,note\nBob,5'10\",a \"b\" c\n Al ,\"6'\", \"x\"\n", Options{})
	require.NoError(t, err)
	require.Equal(t, [][]string{
		{"Bob", `5'10"`, `a "b" c`},
		{" Al ", "6'", ` "x"`},
	}, fields(rows))
}

func TestReaderFatalQuoteErrors(t *testing.T) {
	t.Parallel()
	_, rows, err := readAll(t, "a,b\n1,2\n3,\"say \"hi\" x\"\n5,6\n", Options{})
	requireFormatError(t, err, 3, "after the closing quote of field 2")
	require.Len(t, rows, 1)

	_, rows, err = readAll(t, "a,b\n1,2\n3,\"never\nclosed\n5,6\n", Options{})
	requireFormatError(t, err, 3, "not closed before the end of the file")
	require.Len(t, rows, 1)

	_, _, err = readAll(t, "a,\"b\"c\n1,2\n", Options{})
	requireFormatError(t, err, 1, "after the closing quote")
}

func TestReaderStickyError(t *testing.T) {
	t.Parallel()
	r, err := NewCSVReader(strings.NewReader("a\n\"open\n"), Options{})
	require.NoError(t, err)
	_, err1 := r.Next()
	_, err2 := r.Next()
	require.Error(t, err1)
	require.Equal(t, err1, err2)
}

func TestReaderMaxRecordBytes(t *testing.T) {
	t.Parallel()
	input := "a,b\n1,\"" + strings.Repeat("x\n", 1000) + "\"\n"
	_, _, err := readAll(t, input, Options{MaxRecordBytes: 100})
	requireFormatError(t, err, 2, "larger than 100 bytes")

	input = "a,b\n1," + strings.Repeat("y", bufferSize*3) + "\n"
	_, _, err = readAll(t, input, Options{MaxRecordBytes: bufferSize})
	requireFormatError(t, err, 2, "larger than")

	_, rows, err := readAll(t, input, Options{})
	require.NoError(t, err)
	require.Len(t, rows[0].Fields[1], bufferSize*3)
}

func TestReaderLongQuotedLines(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("z", bufferSize+17)
	input := "a,b\n\"" + big + "\",\"" + big + "\nmore\"\n1,2\n"
	_, rows, err := readAll(t, input, Options{})
	require.NoError(t, err)
	require.Equal(t, [][]string{{big, big + "\nmore"}, {"1", "2"}}, fields(rows))
	require.Equal(t, 4, rows[1].Line)
}

func TestReaderEmptyFile(t *testing.T) {
	t.Parallel()
	for _, input := range []string{"", "\xEF\xBB\xBF", "\n\n\r\n", "\xFF\xFE"} {
		_, _, err := readAll(t, input, Options{})
		var fe *FormatError
		require.ErrorAs(t, err, &fe, "input %q", input)
		require.Equal(t, "empty file: no header row", err.Error())
	}
}

func TestReaderHeaderOnly(t *testing.T) {
	t.Parallel()
	r, rows, err := readAll(t, "a,b\n", Options{})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, r.Header())
	require.Empty(t, rows)
}

func TestReaderBinary(t *testing.T) {
	t.Parallel()
	_, _, err := readAll(t, "a,b\n1,2\n3,\x004\n", Options{})
	requireFormatError(t, err, 3, "binary data (NUL byte); not a CSV file")
	require.Equal(t, "line 3: binary data (NUL byte); not a CSV file", err.Error())

	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00"
	_, _, err = readAll(t, png, Options{})
	requireFormatError(t, err, 3, "binary data")

	long := strings.Repeat("\x01\x00", bufferSize)
	_, _, err = readAll(t, long, Options{})
	requireFormatError(t, err, 1, "binary data")
}

func TestReaderIOError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	_, err := NewCSVReader(iotest.ErrReader(boom), Options{})
	require.ErrorIs(t, err, boom)

	head := "a,b\n" + strings.Repeat("1,2\n", bufferSize)
	r, err := NewCSVReader(io.MultiReader(strings.NewReader(head), iotest.ErrReader(boom)), Options{})
	require.NoError(t, err)
	for {
		_, err = r.Next()
		if err != nil {
			break
		}
	}
	require.ErrorIs(t, err, boom)
	var fe *FormatError
	require.NotErrorAs(t, err, &fe)
}

func TestReaderOneByteReads(t *testing.T) {
	t.Parallel()
	input := "\xEF\xBB\xBFa;b\n\"x;\ny\";2\n3;4"
	r, err := NewCSVReader(iotest.OneByteReader(strings.NewReader(input)), Options{})
	require.NoError(t, err)
	require.Equal(t, ';', r.Delimiter())
	row, err := r.Next()
	require.NoError(t, err)
	require.Equal(t, []string{"x;\ny", "2"}, row.Fields)
	row, err = r.Next()
	require.NoError(t, err)
	require.Equal(t, []string{"3", "4"}, row.Fields)
	_, err = r.Next()
	require.ErrorIs(t, err, io.EOF)
}

func TestReaderBadOptions(t *testing.T) {
	t.Parallel()
	_, err := NewCSVReader(strings.NewReader("a\n"), Options{Delimiter: '"'})
	require.ErrorContains(t, err, "invalid delimiter")
	_, err = NewCSVReader(strings.NewReader("a\n"), Options{Delimiter: '€'})
	require.ErrorContains(t, err, "invalid delimiter")
	_, err = NewCSVReader(strings.NewReader("a\n"), Options{Encoding: "ebcdic"})
	require.ErrorContains(t, err, `unknown encoding "ebcdic"`)
}
