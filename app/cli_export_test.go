package app_test

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xuri/excelize/v2"
)

// sheetCell is one cell read back with excelize: its raw value and whether
// it is a number.
type sheetCell struct {
	number bool
	text   string
}

// readWorkbook reads the first sheet of an XLSX file's bytes.
func readWorkbook(t *testing.T, data []byte) (string, [][]sheetCell) {
	t.Helper()
	f, err := excelize.OpenReader(bytes.NewReader(data))
	require.NoError(t, err)
	defer f.Close()
	name := f.GetSheetName(0)
	rows, err := f.GetRows(name, excelize.Options{RawCellValue: true})
	require.NoError(t, err)
	var out [][]sheetCell
	for r, row := range rows {
		var cells []sheetCell
		for c, v := range row {
			ref, err := excelize.CoordinatesToCellName(c+1, r+1)
			require.NoError(t, err)
			typ, err := f.GetCellType(name, ref)
			require.NoError(t, err)
			cells = append(cells, sheetCell{number: v != "" && (typ == excelize.CellTypeUnset || typ == excelize.CellTypeNumber), text: v})
		}
		out = append(out, cells)
	}
	return name, out
}

// TestCLIExportXLSX: -o FILE.xlsx writes a workbook with the CSV export's
// rows and cells, numbers as numbers; --format wins over the extension;
// -o - writes the workbook to standard output when it is not a terminal.
func TestCLIExportXLSX(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("ingest", c.file("p.csv", sampleCSV+"A5,=cmd|' /C calc'!A0,-3\n"), "--wait")
	dir := t.TempDir()

	c.ok("export", "1", "-o", filepath.Join(dir, "out.csv"))
	raw, err := os.ReadFile(filepath.Join(dir, "out.csv"))
	require.NoError(t, err)
	want, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
	require.NoError(t, err)
	require.Len(t, want, 6)

	code, _, errs := c.run("export", "1", "-o", filepath.Join(dir, "out.xlsx"))
	require.Equal(t, 0, code, errs)
	require.Contains(t, errs, "exported 5 rows of job 1")
	require.Contains(t, errs, "(xlsx)")
	data, err := os.ReadFile(filepath.Join(dir, "out.xlsx"))
	require.NoError(t, err)
	require.Equal(t, "PK", string(data[:2]), "a zip archive")
	name, rows := readWorkbook(t, data)
	require.Equal(t, "Items", name)
	require.Len(t, rows, len(want))
	for r := range want {
		for i, w := range want[r] {
			var got sheetCell
			if i < len(rows[r]) {
				got = rows[r][i]
			}
			where := fmt.Sprintf("row %d column %d", r+1, i+1)
			if _, err := strconv.ParseFloat(w, 64); err == nil && r > 0 && w != "" {
				require.True(t, got.number, "%s: %q is a number", where, w)
				x, _ := strconv.ParseFloat(w, 64)
				y, _ := strconv.ParseFloat(got.text, 64)
				require.Equal(t, x, y, where)
				continue
			}
			require.False(t, got.number, where)
			require.Equal(t, w, got.text, where)
		}
	}
	require.Contains(t, string(raw), "'=cmd|' /C calc'!A0", "the formula is neutralised in CSV")

	// --format decides over the extension; -o - to a pipe or file is fine.
	c.ok("export", "1", "--format", "csv", "-o", filepath.Join(dir, "really-csv.xlsx"))
	again, err := os.ReadFile(filepath.Join(dir, "really-csv.xlsx"))
	require.NoError(t, err)
	require.Equal(t, string(raw), string(again))
	out := c.ok("export", "1", "--format", "XLSX", "-o", "-", "--status", "DONE")
	_, rows = readWorkbook(t, []byte(out))
	require.Len(t, rows, 5, "the header and the four DONE items")
}
