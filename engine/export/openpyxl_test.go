package export

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// openpyxlPython returns a Python interpreter that can import openpyxl:
// $SLUICE_PYTHON, python3 on the PATH, or Debian's own python3, where
// Debian's python3-openpyxl installs (a python3 of pyenv or a virtualenv
// earlier on the PATH does not see Debian's packages). It skips the test
// when there is none.
func openpyxlPython(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, py := range []string{os.Getenv("SLUICE_PYTHON"), "python3", "/usr/bin/python3"} {
		if py == "" {
			continue
		}
		tried = append(tried, py)
		if exec.Command(py, "-c", "import openpyxl").Run() == nil {
			return py
		}
	}
	if os.Getenv("SLUICE_CI") != "" {
		t.Fatalf("openpyxl cannot be imported by %v: CI installs python3-openpyxl", tried)
	}
	t.Skipf("openpyxl cannot be imported by %v (Debian: apt-get install python3-openpyxl); "+
		"the workbook is checked with excelize only", tried)
	return ""
}

// xstringEscape matches what OOXML reads as an escaped character.
var xstringEscape = regexp.MustCompile(`_x[0-9A-Fa-f]{4}_`)

// openpyxlCell is one cell as testdata/read_xlsx.py prints it.
type openpyxlCell struct {
	N     *json.Number `json:"n"`
	S     *string      `json:"s"`
	Other *string      `json:"other"`
}

// readOpenpyxl reads a workbook with openpyxl through testdata/read_xlsx.py.
func readOpenpyxl(t *testing.T, py string, data []byte) (names []string, sheets [][][]xlsxCell) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "export.xlsx")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	var stderr bytes.Buffer
	cmd := exec.Command(py, filepath.Join("testdata", "read_xlsx.py"), path)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "read_xlsx.py: %s", stderr.String())
	var wb struct {
		Sheets []struct {
			Name string            `json:"name"`
			Rows [][]*openpyxlCell `json:"rows"`
		} `json:"sheets"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&wb))
	for _, s := range wb.Sheets {
		var rows [][]xlsxCell
		for r, row := range s.Rows {
			// openpyxl pads rows to the sheet's width; trailing empty
			// cells are not cells.
			for len(row) > 0 && row[len(row)-1] == nil {
				row = row[:len(row)-1]
			}
			cells := make([]xlsxCell, len(row))
			for c, v := range row {
				switch {
				case v == nil:
				case v.Other != nil:
					t.Fatalf("sheet %s row %d column %d: openpyxl read %s", s.Name, r+1, c+1, *v.Other)
				case v.N != nil:
					cells[c] = xlsxCell{number: true, text: v.N.String()}
				case v.S != nil:
					cells[c] = xlsxCell{text: *v.S}
				}
			}
			rows = append(rows, cells)
		}
		names = append(names, s.Name)
		sheets = append(sheets, rows)
	}
	return names, sheets
}

// TestWriteXLSXReadByOpenpyxl reads the workbooks with another
// implementation than the one that wrote them: every cell as excelize
// reads it, numbers as numbers, the sheets of a split export in order.
func TestWriteXLSXReadByOpenpyxl(t *testing.T) {
	t.Parallel()
	py := openpyxlPython(t)

	s := &fakeStore{items: everyStatusItems()}
	want := expectedTable(t, s, nil)
	var buf bytes.Buffer
	_, err := WriteXLSX(context.Background(), s, testJob, nil, &buf)
	require.NoError(t, err)
	names, sheets := readOpenpyxl(t, py, buf.Bytes())
	require.Equal(t, []string{"Items"}, names)
	// Text that looks like one of OOXML's escapes (_x0041_) is stored
	// escaped (_x005F_x0041_); Excel and excelize decode that, openpyxl
	// shows the stored text of an inline string.
	for r := range want {
		for c := range want[r] {
			want[r][c] = xstringEscape.ReplaceAllString(want[r][c], "_x005F$0")
		}
	}
	requireSameTable(t, want, sheets[0])
	_, fromExcelize := readXLSX(t, buf.Bytes())
	require.Len(t, sheets[0], len(fromExcelize[0]))
	for r := range sheets[0] {
		for c := range sheets[0][r] {
			a, b := sheets[0][r][c], fromExcelize[0][r][c]
			require.Equal(t, a.number, b.number, "row %d column %d", r+1, c+1)
			if a.number {
				x, _ := strconv.ParseFloat(a.text, 64)
				y, _ := strconv.ParseFloat(b.text, 64)
				require.Equal(t, x, y, "row %d column %d", r+1, c+1)
			} else if a.text != xstringEscape.ReplaceAllString(b.text, "_x005F$0") {
				t.Fatalf("row %d column %d: openpyxl %.100q, excelize %.100q", r+1, c+1, a.text, b.text)
			}
		}
	}

	s = &fakeStore{items: manyItems(5)}
	want = expectedTable(t, s, nil)
	tab, err := buildTable(context.Background(), s, testJob, nil, encodeCells, false)
	require.NoError(t, err)
	defer tab.spool.close()
	buf.Reset()
	_, err = tab.writeXLSX(context.Background(), &buf, xlsxLimits{rows: 2, bytes: 1 << 30})
	require.NoError(t, err)
	names, sheets = readOpenpyxl(t, py, buf.Bytes())
	require.Equal(t, []string{"Items", "Items 2", "Items 3"}, names)
	for i, sheet := range sheets {
		part := append([][]string{want[0]}, want[1+2*i:min(len(want), 3+2*i)]...)
		requireSameTable(t, part, sheet)
	}
}
