package tabular

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSniffEachDelimiter(t *testing.T) {
	t.Parallel()
	for _, d := range []string{",", ";", "\t", "|"} {
		input := strings.ReplaceAll("id#name#note\n1#\"Ann, Bo; \"\"C\"\"\"#x\n2#Dee#\"y\nz\"\n3#Eve#ok\n", "#", d)
		r, rows, err := readAll(t, input, Options{})
		require.NoError(t, err, "delimiter %q", d)
		require.Equal(t, rune(d[0]), r.Delimiter())
		require.Equal(t, []string{"id", "name", "note"}, r.Header())
		require.Len(t, rows, 3)
		for _, row := range rows {
			require.Empty(t, row.Err)
		}
		require.Equal(t, `Ann, Bo; "C"`, rows[0].Fields[1])
		require.Equal(t, "y\nz", rows[1].Fields[2])
	}
}

func TestSniffCases(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		input string
		want  rune
	}{
		"single column":           {"name\nann\nbob\n", ','},
		"semicolon decimal comma": {"name;price;qty\nfoo;1,5;2\nbar;2,25;3\n", ';'},
		"tab with commas in text": {"name\tdesc\nfoo\tx, y, z\nbar\tq\n", '\t'},
		"header only":             {"a|b|c", '|'},
		"quoted delimiters":       {"\"a;b\",c\n\"1;2\",3\n\"x;y;z\",4\n", ','},
		"quoted newline":          {"a;b\n\"x,\ny,z\";1\n2;3\n", ';'},
		"inconsistent":            {"a;b;c\n1;2;3\n1;2\n4;5;6\n", ';'},
		"more fields wins":        {"a,b;c;d\n1,2;3;4\n", ';'},
		"crlf":                    {"a\tb\r\n1\t2\r\n", '\t'},
		"cr only":                 {"a|b\r1|2\r", '|'},
		"empty lines":             {"\n\na;b\n\n1;2\n", ';'},
		"excel sep line":          {"sep=|\na,b|c\n1,2|3\n", '|'},
		"excel sep line crlf":     {"SEP=;\r\na,b;c\r\n1,2;3\r\n", ';'},
	} {
		r, err := NewCSVReader(strings.NewReader(tc.input), Options{})
		require.NoError(t, err, name)
		require.Equal(t, tc.want, r.Delimiter(), name)
	}
}

func TestSniffExcelSepLineSkipped(t *testing.T) {
	t.Parallel()
	r, rows, err := readAll(t, "sep=;\r\na;b\r\n1;2\r\n", Options{})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, r.Header())
	require.Equal(t, [][]string{{"1", "2"}}, fields(rows))
	require.Equal(t, 3, rows[0].Line)
	// A given delimiter wins over the sep line, which is still skipped.
	r, err = NewCSVReader(strings.NewReader("sep=;\na,b\n"), Options{Delimiter: ','})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, r.Header())
}

func TestSniffForcedDelimiter(t *testing.T) {
	t.Parallel()
	r, rows, err := readAll(t, "a;b,c\n1;2,3\n", Options{Delimiter: ','})
	require.NoError(t, err)
	require.Equal(t, ',', r.Delimiter())
	require.Equal(t, []string{"a;b", "c"}, r.Header())
	require.Equal(t, [][]string{{"1;2", "3"}}, fields(rows))
}

func TestSniffTruncatedSample(t *testing.T) {
	t.Parallel()
	// The record cut off at the end of the sample does not spoil sniffing.
	sample := []byte("a;b\n1;2\n3;4\n5")
	require.Equal(t, byte(';'), sniffDelimiter(sample, '\n', false))
	require.Equal(t, []int{2, 2, 2}, fieldCounts(sample, ';', '\n', false))
	require.Equal(t, []int{2, 2, 2, 1}, fieldCounts(sample, ';', '\n', true))
	// An open quote at the end of the sample is not a record.
	require.Equal(t, []int{2}, fieldCounts([]byte("a,b\n\"x,\ny"), ',', '\n', true))
}

func TestFieldCounts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sample string
		delim  byte
		eol    byte
		want   []int
	}{
		{"a,b\n1,2\n", ',', '\n', []int{2, 2}},
		{"a,b\r\n\r\n1,2\r\n", ',', '\n', []int{2, 2}},
		{"a;b\r1;2;3\r", ';', '\r', []int{2, 3}},
		{"\"a,\"\"b\"\"\",c\n", ',', '\n', []int{2}},
		{"x 5'10\",y\n\"q\",r\n", ',', '\n', []int{2, 2}},
		{"a|b", '|', '\n', []int{2}},
		{"", ',', '\n', nil},
	} {
		require.Equal(t, tc.want, fieldCounts([]byte(tc.sample), tc.delim, tc.eol, true), "sample %q", tc.sample)
	}
}

func TestCheckDelimiter(t *testing.T) {
	t.Parallel()
	for _, ok := range []rune{0, ',', ';', '\t', '|', ' ', ':', '^'} {
		d, err := checkDelimiter(ok)
		require.NoError(t, err, "%q", ok)
		require.Equal(t, byte(ok), d)
	}
	for _, bad := range []rune{'"', '\n', '\r', 'é', '€', 0x80} {
		_, err := checkDelimiter(bad)
		require.Error(t, err, "%q", bad)
	}
}

func TestParseDelimiter(t *testing.T) {
	for in, want := range map[string]rune{"": 0, "tab": '\t', `\t`: '\t', ";": ';', "|": '|', "§": '§'} {
		got, err := ParseDelimiter(in)
		if err != nil || got != want {
			t.Fatalf("ParseDelimiter(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"ab", `"`, "\n", "\r"} {
		if _, err := ParseDelimiter(bad); err == nil {
			t.Fatalf("ParseDelimiter(%q): no error", bad)
		}
	}
}
