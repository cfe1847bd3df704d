package tabular

import (
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/require"
)

// utf16Bytes encodes s as UTF-16 with a byte-order mark when bom is set.
func utf16Bytes(s string, bigEndian, bom bool) string {
	units := utf16.Encode([]rune(s))
	if bom {
		units = append([]uint16{0xFEFF}, units...)
	}
	b := make([]byte, 0, 2*len(units))
	for _, u := range units {
		if bigEndian {
			b = append(b, byte(u>>8), byte(u))
		} else {
			b = append(b, byte(u), byte(u>>8))
		}
	}
	return string(b)
}

func TestEncodingUTF8BOM(t *testing.T) {
	t.Parallel()
	r, rows, err := readAll(t, "\xEF\xBB\xBF\"Name\",Stadt\nJosé,Zürich\n", Options{})
	require.NoError(t, err)
	require.Equal(t, EncodingUTF8, r.Encoding())
	require.Equal(t, []string{"Name", "Stadt"}, r.Header())
	require.Equal(t, [][]string{{"José", "Zürich"}}, fields(rows))
}

func TestEncodingUTF16LETab(t *testing.T) {
	t.Parallel()
	// What Excel's "Unicode Text" export looks like.
	text := "Name\tPreis (€)\tNotiz\r\nCafé\t3,50\t\"a\tb\"\r\n日本\t10\t🙂\r\n"
	for _, be := range []bool{false, true} {
		r, rows, err := readAll(t, utf16Bytes(text, be, true), Options{})
		require.NoError(t, err)
		want := EncodingUTF16LE
		if be {
			want = EncodingUTF16BE
		}
		require.Equal(t, want, r.Encoding())
		require.Equal(t, '\t', r.Delimiter())
		require.Equal(t, []string{"Name", "Preis (€)", "Notiz"}, r.Header())
		require.Equal(t, []string{"name", "preis", "notiz"}, r.Keys())
		require.Equal(t, [][]string{{"Café", "3,50", "a\tb"}, {"日本", "10", "🙂"}}, fields(rows))
		require.Equal(t, 3, rows[1].Line)
		require.Equal(t, int64(len(utf16Bytes(text, be, true))), r.BytesRead())
	}
}

func TestEncodingUTF16Forced(t *testing.T) {
	t.Parallel()
	// Without a byte-order mark UTF-16 looks like binary data ...
	noBOM := utf16Bytes("a,b\n1,2\n", false, false)
	_, _, err := readAll(t, noBOM, Options{})
	requireFormatError(t, err, 1, "try --encoding utf-16le")
	// ... unless the encoding is given.
	for _, name := range []string{"utf-16le", "UTF16LE", "utf-16"} {
		r, rows, err := readAll(t, noBOM, Options{Encoding: name})
		require.NoError(t, err, name)
		require.Equal(t, EncodingUTF16LE, r.Encoding())
		require.Equal(t, [][]string{{"1", "2"}}, fields(rows))
	}
	r, rows, err := readAll(t, utf16Bytes("a,b\n1,2\n", true, true), Options{Encoding: "utf-16"})
	require.NoError(t, err)
	require.Equal(t, EncodingUTF16BE, r.Encoding())
	require.Equal(t, []string{"a", "b"}, r.Header())
	require.Len(t, rows, 1)
	_, _, err = readAll(t, utf16Bytes("a,b\n1,2\n", true, false), Options{})
	requireFormatError(t, err, 1, "try --encoding utf-16be")
}

func TestEncodingWindows1252Detected(t *testing.T) {
	t.Parallel()
	input := "produit;prix\ncaf\xE9;5 \x80\nna\xEFve;\x93q\x94\n"
	r, rows, err := readAll(t, input, Options{})
	require.NoError(t, err)
	require.Equal(t, EncodingWindows1252, r.Encoding())
	require.Equal(t, ';', r.Delimiter())
	require.Equal(t, [][]string{{"café", "5 €"}, {"naïve", "“q”"}}, fields(rows))
	require.Equal(t, int64(len(input)), r.BytesRead())
}

func TestEncodingForced(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"windows-1252", "cp1252", "latin1", "ISO-8859-1", " Windows_1252 "} {
		r, rows, err := readAll(t, "a\n\xE9\x80\n", Options{Encoding: name})
		require.NoError(t, err, name)
		require.Equal(t, EncodingWindows1252, r.Encoding())
		require.Equal(t, [][]string{{"é€"}}, fields(rows))
	}
	// Valid UTF-8 forced to Windows-1252 is read byte by byte.
	_, rows, err := readAll(t, "a\nJosé\n", Options{Encoding: "windows-1252"})
	require.NoError(t, err)
	require.Equal(t, [][]string{{"JosÃ©"}}, fields(rows))
	// Windows-1252 bytes forced to UTF-8 are an error.
	for _, name := range []string{"utf-8", "utf8", "auto", ""} {
		_, _, err = readAll(t, "a\n\xE9\n", Options{Encoding: name})
		if name == "" || name == "auto" {
			require.NoError(t, err)
			continue
		}
		requireFormatError(t, err, 2, "invalid UTF-8")
	}
}

func TestEncodingInvalidUTF8AfterPrefix(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("id,name\n")
	n := 0
	for b.Len() < sniffBytes+1000 {
		n++
		b.WriteString("1,plain ascii and José\n")
	}
	b.WriteString("2,caf\xE9\n")
	_, rows, err := readAll(t, b.String(), Options{})
	requireFormatError(t, err, n+2, "invalid UTF-8 byte sequence; try --encoding windows-1252")
	require.Len(t, rows, n)
}

func TestEncodingDamagedUTF8(t *testing.T) {
	t.Parallel()
	// Mostly UTF-8 with one stray Windows-1252 byte: reading it all as
	// Windows-1252 would garble every other accent, so it is read as UTF-8
	// and the damage is reported.
	input := "name,city\nJosé,Zürich\nZoë,Málaga\nRen\xE9,Paris\n"
	_, rows, err := readAll(t, input, Options{})
	requireFormatError(t, err, 4, "invalid UTF-8")
	require.Len(t, rows, 2)
	// Mostly Windows-1252 with a chance valid pair is Windows-1252.
	r, rows, err := readAll(t, "a\n\xE9t\xE9\n\xC3\xA9\n\xE0 la\n", Options{})
	require.NoError(t, err)
	require.Equal(t, EncodingWindows1252, r.Encoding())
	require.Equal(t, [][]string{{"été"}, {"Ã©"}, {"à la"}}, fields(rows))
}

func TestEncodingCutRuneAtPrefixEnd(t *testing.T) {
	t.Parallel()
	// A multi-byte character straddling the detection window is still UTF-8.
	head := "h\n" + strings.Repeat("x", sniffBytes-3) + "é\n"
	require.Equal(t, byte(0xC3), head[sniffBytes-1])
	r, rows, err := readAll(t, head, Options{})
	require.NoError(t, err)
	require.Equal(t, EncodingUTF8, r.Encoding())
	require.Len(t, rows, 1)
}

func TestCanonicalEncoding(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"": "", "auto": "", "AUTO": "", "utf8": EncodingUTF8, "UTF-8": EncodingUTF8,
		"utf-16le": EncodingUTF16LE, "utf_16be": EncodingUTF16BE, "unicode": encodingUTF16,
		"cp1252": EncodingWindows1252, "latin-1": EncodingWindows1252,
	} {
		got, err := canonicalEncoding(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := canonicalEncoding("shift-jis")
	require.Error(t, err)
}
