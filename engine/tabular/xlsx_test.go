package tabular

import (
	"archive/zip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/xuri/excelize/v2"
)

// sheetRows is the content of one generated sheet: rows[i] goes to sheet row
// i+1; a nil row is left empty.
type sheetRows struct {
	name string
	rows [][]any
}

// writeWorkbook saves a workbook with the given sheets, in order, to a new
// file in a temporary directory and returns its path.
func writeWorkbook(t *testing.T, sheets ...sheetRows) string {
	t.Helper()
	f := excelize.NewFile()
	defer func() { require.NoError(t, f.Close()) }()
	for i, s := range sheets {
		if i == 0 {
			require.NoError(t, f.SetSheetName("Sheet1", s.name))
		} else {
			_, err := f.NewSheet(s.name)
			require.NoError(t, err)
		}
		for j, row := range s.rows {
			if row == nil {
				continue
			}
			require.NoError(t, f.SetSheetRow(s.name, "A"+strconv.Itoa(j+1), &row))
		}
	}
	path := filepath.Join(t.TempDir(), "book.xlsx")
	require.NoError(t, f.SaveAs(path))
	return path
}

// readXLSX opens path and reads every row; it returns the reader (closed),
// the rows and the error that ended reading (nil at a clean end).
func readXLSX(t *testing.T, path string, opt XLSXOptions) (*XLSXReader, []*Row, error) {
	t.Helper()
	r, err := OpenXLSX(path, opt)
	if err != nil {
		return nil, nil, err
	}
	defer func() { require.NoError(t, r.Close()) }()
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

// lines returns the Line of each row.
func lines(rows []*Row) []int {
	out := make([]int, len(rows))
	for i, r := range rows {
		out[i] = r.Line
	}
	return out
}

func TestXLSXHeaderAndRows(t *testing.T) {
	t.Parallel()
	path := writeWorkbook(t, sheetRows{name: "Data", rows: [][]any{
		{"Product Name", "Price (€)", "Qty"},
		{"Widget", "9.99", "3"},
		{"Gadget", "", "7"},
	}})
	r, rows, err := readXLSX(t, path, XLSXOptions{})
	require.NoError(t, err)
	require.Equal(t, "Data", r.Sheet())
	require.Equal(t, []string{"Product Name", "Price (€)", "Qty"}, r.Header())
	require.Equal(t, []string{"product_name", "price", "qty"}, r.Keys())
	require.Equal(t, [][]string{{"Widget", "9.99", "3"}, {"Gadget", "", "7"}}, fields(rows))
	require.Equal(t, []int{2, 3}, lines(rows))
	for _, row := range rows {
		require.Empty(t, row.Err)
	}
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, info.Size(), r.BytesRead())
}

func TestXLSXHeaderNames(t *testing.T) {
	t.Parallel()
	path := writeWorkbook(t, sheetRows{name: "Sheet1", rows: [][]any{
		{"id", "", "Name", "name", "id", " "},
		{"1", "x", "a", "b", "c", "d"},
	}})
	r, rows, err := readXLSX(t, path, XLSXOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"id", "column_2", "Name", "name", "id_2", "column_6"}, r.Header())
	require.Equal(t, []string{"id", "column_2", "name", "name_2", "id_2", "column_6"}, r.Keys())
	require.Equal(t, [][]string{{"1", "x", "a", "b", "c", "d"}}, fields(rows))
}

func TestXLSXLeadingEmptyRowsAndHeaderOnly(t *testing.T) {
	t.Parallel()
	path := writeWorkbook(t, sheetRows{name: "Sheet1", rows: [][]any{nil, nil, {"a", "b"}}})
	r, rows, err := readXLSX(t, path, XLSXOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, r.Header())
	require.Empty(t, rows)
}

func TestXLSXNamedSheet(t *testing.T) {
	t.Parallel()
	path := writeWorkbook(t,
		sheetRows{name: "First", rows: [][]any{{"one"}, {"1"}}},
		sheetRows{name: "Second Sheet", rows: [][]any{{"two", "deux"}, {"2", "2"}, {"22", "22"}}},
	)
	r, rows, err := readXLSX(t, path, XLSXOptions{Sheet: "Second Sheet"})
	require.NoError(t, err)
	require.Equal(t, "Second Sheet", r.Sheet())
	require.Equal(t, []string{"two", "deux"}, r.Header())
	require.Equal(t, [][]string{{"2", "2"}, {"22", "22"}}, fields(rows))

	r, _, err = readXLSX(t, path, XLSXOptions{Sheet: "second sheet"})
	require.NoError(t, err)
	require.Equal(t, "Second Sheet", r.Sheet())

	r, rows, err = readXLSX(t, path, XLSXOptions{})
	require.NoError(t, err)
	require.Equal(t, "First", r.Sheet())
	require.Equal(t, [][]string{{"1"}}, fields(rows))
}

func TestXLSXMissingSheet(t *testing.T) {
	t.Parallel()
	path := writeWorkbook(t,
		sheetRows{name: "First", rows: [][]any{{"a"}}},
		sheetRows{name: "Second", rows: [][]any{{"b"}}},
	)
	_, err := OpenXLSX(path, XLSXOptions{Sheet: "Third"})
	requireFormatError(t, err, 0, `no sheet named "Third"; the workbook has "First", "Second"`)
}

func TestXLSXEmptySheet(t *testing.T) {
	t.Parallel()
	path := writeWorkbook(t, sheetRows{name: "Sheet1"})
	_, err := OpenXLSX(path, XLSXOptions{})
	requireFormatError(t, err, 0, `sheet "Sheet1" is empty: no header row`)
}

func TestXLSXShortLongAndEmptyRows(t *testing.T) {
	t.Parallel()
	path := writeWorkbook(t, sheetRows{name: "Sheet1", rows: [][]any{
		{"a", "b", "c"},
		{"1"},                // short: padded
		nil,                  // empty: skipped
		{"", "2"},            // leading empty cell kept
		{"1", "2", "3", "4"}, // long: Row.Err
		{"", "", ""},         // empty strings only: skipped
		{"x", "y", "z"},
	}})
	_, rows, err := readXLSX(t, path, XLSXOptions{})
	require.NoError(t, err)
	require.Equal(t, []int{2, 4, 5, 7}, lines(rows))
	require.Equal(t, [][]string{
		{"1", "", ""},
		{"", "2", ""},
		{"1", "2", "3", "4"},
		{"x", "y", "z"},
	}, fields(rows))
	require.Empty(t, rows[0].Err)
	require.Empty(t, rows[1].Err)
	require.Equal(t, "row 5 has 4 cells, header has 3", rows[2].Err)
	require.Empty(t, rows[3].Err)
}

func TestXLSXNumbersAndDates(t *testing.T) {
	t.Parallel()
	f := excelize.NewFile()
	require.NoError(t, f.SetSheetRow("Sheet1", "A1", &[]any{"int", "float", "bool", "date", "formula"}))
	day := time.Date(2024, 3, 14, 0, 0, 0, 0, time.UTC)
	require.NoError(t, f.SetSheetRow("Sheet1", "A2", &[]any{42, 3.25, true, day}))
	require.NoError(t, f.SetCellFormula("Sheet1", "E2", "A2*2"))
	style, err := f.NewStyle(&excelize.Style{NumFmt: 14}) // built-in short date
	require.NoError(t, err)
	require.NoError(t, f.SetCellStyle("Sheet1", "D2", "D2", style))
	path := filepath.Join(t.TempDir(), "types.xlsx")
	require.NoError(t, f.SaveAs(path))
	require.NoError(t, f.Close())

	_, rows, err := readXLSX(t, path, XLSXOptions{})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	// The formula has no cached result (nothing computed it), so it reads
	// as empty: formulas are never recalculated.
	require.Equal(t, []string{"42", "3.25", "TRUE", "03-14-24", ""}, rows[0].Fields)
}

func TestXLSXNotAWorkbook(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, data, 0o600))
		return path
	}

	_, err := OpenXLSX(write("text.xlsx", []byte("a,b,c\n1,2,3\n")), XLSXOptions{})
	requireFormatError(t, err, 0, "not an XLSX workbook: the file is not a zip archive")

	_, err = OpenXLSX(write("empty.xlsx", nil), XLSXOptions{})
	requireFormatError(t, err, 0, "not an XLSX workbook")

	ole := append([]byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}, make([]byte, 504)...)
	_, err = OpenXLSX(write("legacy.xlsx", ole), XLSXOptions{})
	requireFormatError(t, err, 0, "legacy .xls")

	// A zip signature followed by garbage.
	_, err = OpenXLSX(write("truncated.xlsx", []byte("PK\x03\x04garbage")), XLSXOptions{})
	requireFormatError(t, err, 0, "not an XLSX workbook: ")

	// Valid zip archives that are not workbooks.
	_, err = OpenXLSX(writeZip(t, map[string]string{"hello.txt": "hello"}), XLSXOptions{})
	requireFormatError(t, err, 0, "not an XLSX workbook: a zip archive without the [Content_Types].xml")
	_, err = OpenXLSX(writeZip(t, map[string]string{
		"[Content_Types].xml": `<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`,
		"word/document.xml":   "<document/>",
	}), XLSXOptions{})
	requireFormatError(t, err, 0, "not an XLSX workbook: ")

	_, err = OpenXLSX(filepath.Join(dir, "missing.xlsx"), XLSXOptions{})
	require.ErrorIs(t, err, os.ErrNotExist)
	var fe *FormatError
	require.False(t, errors.As(err, &fe))
}

// writeZip writes a zip archive with the given files and returns its path.
func writeZip(t *testing.T, files map[string]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "archive.xlsx")
	out, err := os.Create(path)
	require.NoError(t, err)
	zw := zip.NewWriter(out)
	for name, content := range files {
		w, err := zw.Create(name)
		require.NoError(t, err)
		_, err = w.Write([]byte(content))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	require.NoError(t, out.Close())
	return path
}

// writeFakeZip writes a zip archive whose entries declare the given
// uncompressed sizes but hold only a few stored bytes, as a zip bomb's
// directory would; only the directory is needed to reject it.
func writeFakeZip(t *testing.T, sizes map[string]uint64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bomb.xlsx")
	out, err := os.Create(path)
	require.NoError(t, err)
	zw := zip.NewWriter(out)
	for name, size := range sizes {
		w, err := zw.CreateRaw(&zip.FileHeader{
			Name: name, Method: zip.Store, CompressedSize64: 1, UncompressedSize64: size,
		})
		require.NoError(t, err)
		_, err = w.Write([]byte("x"))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	require.NoError(t, out.Close())
	return path
}

func TestXLSXSizeLimits(t *testing.T) {
	t.Parallel()
	_, err := OpenXLSX(writeFakeZip(t, map[string]uint64{
		"[Content_Types].xml": 100, "xl/worksheets/sheet1.xml": 600 << 20, "xl/worksheets/sheet2.xml": 600 << 20,
	}), XLSXOptions{})
	requireFormatError(t, err, 0, "workbook too large: it unpacks to more than 1024 MiB")

	_, err = OpenXLSX(writeFakeZip(t, map[string]uint64{"[Content_Types].xml": 100, "xl/styles.xml": 100 << 20}), XLSXOptions{})
	requireFormatError(t, err, 0, "workbook too large: part xl/styles.xml unpacks to 100 MiB")

	sizes := map[string]uint64{"[Content_Types].xml": 100}
	for i := range 20 {
		sizes["xl/worksheets/sheet"+strconv.Itoa(i+1)+".xml"] = 15 << 20 // in memory each
	}
	_, err = OpenXLSX(writeFakeZip(t, sizes), XLSXOptions{})
	requireFormatError(t, err, 0, "workbook too large: the parts held in memory")
}

func TestIsXLSX(t *testing.T) {
	t.Parallel()
	require.True(t, IsXLSX([]byte("PK\x03\x04\x14\x00\x06\x00")))
	require.True(t, IsXLSX([]byte("PK\x03\x04")))
	require.False(t, IsXLSX([]byte("PK\x03")))
	require.False(t, IsXLSX([]byte("PK\x05\x06"))) // empty zip
	require.False(t, IsXLSX([]byte("id,name\n")))
	require.False(t, IsXLSX(nil))
}

func TestXLSXMaxRows(t *testing.T) {
	t.Parallel()
	path := writeWorkbook(t, sheetRows{name: "Sheet1", rows: [][]any{
		{"a"}, {"1"}, nil, {"2"}, {"3"}, {"4"},
	}})
	_, rows, err := readXLSX(t, path, XLSXOptions{MaxRows: 3})
	requireFormatError(t, err, 6, "sheet has more than 3 rows")
	require.Len(t, rows, 3)

	_, rows, err = readXLSX(t, path, XLSXOptions{MaxRows: 4})
	require.NoError(t, err)
	require.Len(t, rows, 4)
}

func TestXLSXErrorsAreSticky(t *testing.T) {
	t.Parallel()
	path := writeWorkbook(t, sheetRows{name: "Sheet1", rows: [][]any{{"a"}, {"1"}, {"2"}}})
	r, err := OpenXLSX(path, XLSXOptions{MaxRows: 1})
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close()) }()
	_, err = r.Next()
	require.NoError(t, err)
	_, err = r.Next()
	requireFormatError(t, err, 3, "more than 1 rows")
	_, err = r.Next()
	requireFormatError(t, err, 3, "more than 1 rows")
	require.Zero(t, r.BytesRead())
}

func TestXLSXLargeSheetStreamed(t *testing.T) {
	t.Parallel()
	const n = 100_000
	f := excelize.NewFile()
	sw, err := f.NewStreamWriter("Sheet1")
	require.NoError(t, err)
	require.NoError(t, sw.SetRow("A1", []any{"id", "name", "amount"}))
	for i := 1; i <= n; i++ {
		require.NoError(t, sw.SetRow("A"+strconv.Itoa(i+1), []any{i, "name " + strconv.Itoa(i), float64(i) / 4}))
	}
	require.NoError(t, sw.Flush())
	path := filepath.Join(t.TempDir(), "large.xlsx")
	require.NoError(t, f.SaveAs(path))
	require.NoError(t, f.Close())

	// With a 1 MiB in-memory limit the worksheet is unpacked to a temporary
	// file and streamed from it; Close removes the file.
	tmp := t.TempDir()
	r, err := OpenXLSX(path, XLSXOptions{xmlMemBytes: 1 << 20, tmpDir: tmp})
	require.NoError(t, err)
	spilled, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.NotEmpty(t, spilled, "the worksheet should be streamed from a temporary file")
	require.Equal(t, []string{"id", "name", "amount"}, r.Header())
	count := 0
	for {
		row, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		count++
		if row.Line != count+1 || row.Err != "" || row.Fields[0] != strconv.Itoa(count) {
			require.FailNow(t, "unexpected row", "row %d: %+v", count, row)
		}
	}
	require.Equal(t, n, count)
	require.NoError(t, r.Close())
	require.NoError(t, r.Close())
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, left)
}
