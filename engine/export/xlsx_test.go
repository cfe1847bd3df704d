package export

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/stretchr/testify/require"
	"github.com/xuri/excelize/v2"

	"github.com/sluicehq/sluice/engine"
)

// longText is longer than an XLSX cell holds (32,767 characters).
var longText = strings.Repeat("0123456789", 4000)

// everyStatusItems is a job with an item in every status, in an order by
// last change that differs from seq order, whose results hold numbers
// (plain and not), formulas, unicode, nested values, booleans, text that
// XML cannot hold, a cell too long for XLSX, and no result at all.
func everyStatusItems() []*engine.Item {
	at := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	mk := func(seq int64, st engine.ItemStatus, updated int, attempts int, lastErr, result string) *engine.Item {
		it := item(seq, st, result)
		it.UpdatedAt = at.Add(time.Duration(updated) * time.Second)
		it.Attempts = attempts
		it.LastError = lastErr
		return it
	}
	return []*engine.Item{
		mk(1, engine.ItemDone, 5, 1, "", `{"name":"Kettle","price":12.50,"qty":3,"neg":-5,"zero":0,"sci":1.5e3,`+
			`"big":12345678901234567890123,"huge":-1e999,"tiny":1e-400,"zip":"007","plus":"+1","dot":"1.",`+
			`"strnum":"42","ok":true,"tags":["a",{"b":null}],"none":null}`),
		mk(2, engine.ItemError, 1, 3, "=HYPERLINK(\"http://x\")\nline 2", ""),
		mk(3, engine.ItemNotFound, 3, 2, "no match for -x", `{"name":"=SUM(A1:A9)","note":"@cmd"}`),
		mk(4, engine.ItemSkipped, 0, 0, "row 4: wrong number of fields", ""),
		mk(5, engine.ItemPending, 9, 1, "timeout", "null"),
		mk(6, engine.ItemProcessing, 7, 1, "", "{}"),
		mk(7, engine.ItemDone, 5, 1, "", `{"name":"café 日本 🙂 שלום","note":"\tTab","extra":"\rCR","price":"-","qty":"1,5"}`),
		mk(8, engine.ItemDone, 6, 1, "", `{"name":" padded ","note":"line 1\nline 2","extra":"_x0041_ stays",`+
			`"ctl":"bell\u0007 and nul\u0000","long":"`+longText+`"}`),
		mk(9, engine.ItemDone, 6, 12345, "", `{"price":"0.1","qty":"-0","sci":"2E-5","big":"999999999999999","huge":"1234567890123456"}`),
	}
}

// gridOrder returns the seqs of items in the order the store hands them out.
func gridOrder(t *testing.T, s *fakeStore) []*engine.Item {
	t.Helper()
	var out []*engine.Item
	require.NoError(t, s.ScanItems(context.Background(), &engine.ScanItemsParams{JobID: testJob}, func(it *engine.Item) error {
		out = append(out, it)
		return nil
	}))
	s.scans, s.visited = 0, 0
	return out
}

// expectedTable is what both files must hold: the labels and each item's
// Cells, neutralised, in the grid's order.
func expectedTable(t *testing.T, s *fakeStore, statuses []engine.ItemStatus) [][]string {
	t.Helper()
	cols, err := Columns(context.Background(), s, testJob, statuses)
	require.NoError(t, err)
	var out [][]string
	var labels []string
	for _, c := range cols {
		labels = append(labels, Neutralize(c.Label))
	}
	out = append(out, labels)
	for _, it := range gridOrder(t, s) {
		if len(statuses) > 0 && !containsStatus(statuses, it.Status) {
			continue
		}
		cells, err := Cells(it, cols)
		require.NoError(t, err)
		for i, c := range cells {
			cells[i] = Neutralize(c)
		}
		out = append(out, cells)
	}
	s.scans, s.visited = 0, 0
	return out
}

func containsStatus(sts []engine.ItemStatus, st engine.ItemStatus) bool {
	for _, s := range sts {
		if s == st {
			return true
		}
	}
	return false
}

// xlsxCell is one cell read back from a workbook.
type xlsxCell struct {
	number bool
	text   string // the raw value: the number's literal or the text
}

// readXLSX reads every sheet of a workbook with excelize: for each sheet,
// its rows of cells (missing cells are empty text).
func readXLSX(t *testing.T, data []byte) (names []string, sheets [][][]xlsxCell) {
	t.Helper()
	f, err := excelize.OpenReader(bytes.NewReader(data))
	require.NoError(t, err)
	defer f.Close()
	for _, name := range f.GetSheetList() {
		rows, err := f.GetRows(name, excelize.Options{RawCellValue: true})
		require.NoError(t, err)
		var sheet [][]xlsxCell
		for r, row := range rows {
			var cells []xlsxCell
			for c, v := range row {
				ref, err := excelize.CoordinatesToCellName(c+1, r+1)
				require.NoError(t, err)
				typ, err := f.GetCellType(name, ref)
				require.NoError(t, err)
				switch typ {
				case excelize.CellTypeUnset, excelize.CellTypeNumber:
					cells = append(cells, xlsxCell{number: v != "", text: v})
				case excelize.CellTypeInlineString, excelize.CellTypeSharedString:
					cells = append(cells, xlsxCell{text: v})
				default:
					t.Fatalf("sheet %s cell %s: unexpected type %v", name, ref, typ)
				}
			}
			sheet = append(sheet, cells)
		}
		names = append(names, name)
		sheets = append(sheets, sheet)
	}
	return names, sheets
}

// inXLSX is the text an XLSX cell holds for text cell c: XML 1.0 cannot
// hold control characters other than tab, line feed and carriage return
// (they become U+FFFD), and a cell holds at most 32,767 UTF-16 code units.
func inXLSX(c string) string {
	c = strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' {
			return '\uFFFD'
		}
		return r
	}, c)
	if u := utf16.Encode([]rune(c)); len(u) > excelize.TotalCellChars {
		c = string(utf16.Decode(u[:excelize.TotalCellChars]))
	}
	return c
}

// requireSameRows compares tables cell by cell, quoting at most the first
// 100 bytes of a cell that differs (some are 40,000 bytes long).
func requireSameRows(t *testing.T, want, got [][]string, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	short := func(s string) string { return s[:min(len(s), 100)] }
	for r := range want {
		require.Len(t, got[r], len(want[r]), "%s: row %d", msg, r+1)
		for c := range want[r] {
			if want[r][c] != got[r][c] {
				t.Fatalf("%s: row %d column %d: want %q, got %q", msg, r+1, c+1, short(want[r][c]), short(got[r][c]))
			}
		}
	}
}

// requireSameCell checks one XLSX cell against the CSV text want: a plain
// number is a number cell of the same value, anything else text.
func requireSameCell(t *testing.T, want string, got xlsxCell, where string) {
	t.Helper()
	if v, ok := plainNumber(want); ok {
		require.True(t, got.number, "%s: %q must be a number cell, got text %q", where, want, got.text)
		g, err := strconv.ParseFloat(got.text, 64)
		require.NoError(t, err, where)
		require.Equal(t, v, g, "%s: %q", where, want)
		return
	}
	require.False(t, got.number, "%s: %.100q must be text, got the number %s", where, want, got.text)
	if w := inXLSX(want); w != got.text {
		t.Fatalf("%s: want the text %.100q, got %.100q", where, w, got.text)
	}
}

// requireSameTable checks every cell of one XLSX sheet against want.
func requireSameTable(t *testing.T, want [][]string, got [][]xlsxCell) {
	t.Helper()
	require.Len(t, got, len(want), "rows")
	for r, row := range want {
		require.LessOrEqual(t, len(got[r]), len(row), "row %d", r+1)
		for c, w := range row {
			var g xlsxCell
			if c < len(got[r]) {
				g = got[r][c]
			}
			where := fmt.Sprintf("row %d column %d", r+1, c+1)
			if r == 0 {
				require.False(t, g.number, "%s: headers are text", where)
				require.Equal(t, w, g.text, where)
				continue
			}
			requireSameCell(t, w, g, where)
		}
	}
}

func TestWriteXLSXMatchesCSVAndCells(t *testing.T) {
	t.Parallel()
	for _, statuses := range [][]engine.ItemStatus{nil, {engine.ItemDone, engine.ItemError}, {engine.ItemSkipped}} {
		s := &fakeStore{items: everyStatusItems()}
		want := expectedTable(t, s, statuses)

		var csvBuf, xlsxBuf bytes.Buffer
		n, err := WriteCSV(context.Background(), s, testJob, statuses, &csvBuf)
		require.NoError(t, err)
		require.Equal(t, int64(len(want)-1), n)
		requireSameRows(t, want, readCSV(t, csvBuf.String()), "CSV: Cells, neutralised, in the grid's order")

		n, err = WriteXLSX(context.Background(), s, testJob, statuses, &xlsxBuf)
		require.NoError(t, err)
		require.Equal(t, int64(len(want)-1), n)
		require.Equal(t, 2, s.scans, "one pass per file")
		names, sheets := readXLSX(t, xlsxBuf.Bytes())
		require.Equal(t, []string{"Items"}, names)
		requireSameTable(t, want, sheets[0])
		requireSameTable(t, readCSV(t, csvBuf.String()), sheets[0])
	}
}

// TestWriteXLSXCellTypes pins the typing and the limits of the format on
// the every-status job.
func TestWriteXLSXCellTypes(t *testing.T) {
	t.Parallel()
	s := &fakeStore{items: everyStatusItems()}
	var buf bytes.Buffer
	_, err := WriteXLSX(context.Background(), s, testJob, nil, &buf)
	require.NoError(t, err)
	_, sheets := readXLSX(t, buf.Bytes())
	rows := sheets[0]
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c.text] = i
	}
	bySeq := map[string][]xlsxCell{}
	for _, r := range rows[1:] {
		require.True(t, r[0].number, "Seq is a number")
		bySeq[r[0].text] = r
	}
	cell := func(seq int, label string) xlsxCell {
		r := bySeq[strconv.Itoa(seq)]
		if i := col[label]; i < len(r) {
			return r[i]
		}
		return xlsxCell{}
	}
	num := func(v string) xlsxCell { return xlsxCell{number: true, text: v} }
	text := func(v string) xlsxCell { return xlsxCell{text: v} }
	require.Equal(t, num("12.5"), cell(1, "price"), "1.50 is the number 1.5")
	require.Equal(t, num("3"), cell(1, "qty"))
	require.Equal(t, num("-5"), cell(1, "neg"))
	require.Equal(t, num("0"), cell(1, "zero"))
	require.Equal(t, num("1500"), cell(1, "sci"))
	require.Equal(t, num("42"), cell(1, "strnum"), "a JSON string that is a plain number is a number too")
	require.Equal(t, num("12345"), cell(9, "Attempts"))
	require.Equal(t, num("0.1"), cell(9, "price"))
	require.Equal(t, num("0.00002"), cell(9, "sci"))
	require.Equal(t, num("999999999999999"), cell(9, "big"))
	require.Equal(t, text("12345678901234567890123"), cell(1, "big"), "more digits than a spreadsheet keeps")
	require.Equal(t, text("1234567890123456"), cell(9, "huge"))
	require.Equal(t, text("-1e999"), cell(1, "huge"), "out of range")
	require.Equal(t, text("1e-400"), cell(1, "tiny"), "underflows")
	require.Equal(t, text("007"), cell(1, "zip"), "leading zeros are kept")
	require.Equal(t, text("+1"), cell(1, "plus"))
	require.Equal(t, text("1."), cell(1, "dot"))
	require.Equal(t, text("true"), cell(1, "ok"))
	require.Equal(t, text(`["a",{"b":null}]`), cell(1, "tags"))
	require.Equal(t, xlsxCell{}, cell(1, "none"), "null is an empty cell")
	require.Equal(t, text("'=SUM(A1:A9)"), cell(3, "name"))
	require.Equal(t, text("'@cmd"), cell(3, "note"))
	require.Equal(t, text("'=HYPERLINK(\"http://x\")\nline 2"), cell(2, "Error"))
	require.Equal(t, text("café 日本 🙂 שלום"), cell(7, "name"))
	require.Equal(t, text("'\tTab"), cell(7, "note"))
	require.Equal(t, text("'\rCR"), cell(7, "extra"))
	require.Equal(t, text("'-"), cell(7, "price"))
	require.Equal(t, text("1,5"), cell(7, "qty"))
	require.Equal(t, text(" padded "), cell(8, "name"))
	require.Equal(t, text("line 1\nline 2"), cell(8, "note"))
	require.Equal(t, text("_x0041_ stays"), cell(8, "extra"))
	require.Equal(t, text("bell\uFFFD and nul\uFFFD"), cell(8, "ctl"))
	require.True(t, cell(8, "long") == text(longText[:excelize.TotalCellChars]), "a long cell is cut at 32,767 characters")
	require.Equal(t, xlsxCell{}, cell(5, "name"), "no result: empty cells")
}

func TestWriteXLSXEmpty(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	n, err := WriteXLSX(context.Background(), &fakeStore{items: manyItems(3)}, testJob+1, nil, &buf)
	require.NoError(t, err)
	require.Zero(t, n)
	names, sheets := readXLSX(t, buf.Bytes())
	require.Equal(t, []string{"Items"}, names)
	require.Equal(t, [][]xlsxCell{{{text: "Seq"}, {text: "Status"}, {text: "Attempts"}, {text: "Error"}}}, sheets[0])
}

func TestWriteXLSXBadResult(t *testing.T) {
	t.Parallel()
	s := &fakeStore{items: append(manyItems(2), item(3, engine.ItemDone, `{"n":1,}`))}
	var buf bytes.Buffer
	n, err := WriteXLSX(context.Background(), s, testJob, nil, &buf)
	require.ErrorContains(t, err, "seq 3")
	require.Zero(t, n)
	require.Empty(t, buf.Bytes(), "nothing is written before the pass is complete")
}

func TestWriteXLSXContextCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	s := &fakeStore{items: manyItems(100)}
	s.onItem = func(visited int) {
		if visited == 10 {
			cancel()
		}
	}
	var buf bytes.Buffer
	n, err := WriteXLSX(ctx, s, testJob, nil, &buf)
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, n)
	require.Empty(t, buf.Bytes())
}

func TestWriteXLSXWriteError(t *testing.T) {
	t.Parallel()
	_, err := WriteXLSX(context.Background(), &fakeStore{items: manyItems(50)}, testJob, nil, failWriter{})
	require.ErrorContains(t, err, "disk full")
}

// TestWriteXLSXSheets: a job larger than a sheet continues on further
// sheets, each with the header; so does one whose sheet would pass the
// size limit.
func TestWriteXLSXSheets(t *testing.T) {
	t.Parallel()
	s := &fakeStore{items: manyItems(7)}
	want := expectedTable(t, s, nil)
	// The bytes of the header and of three rows (all rows are the same
	// size here; empty cells are left out).
	size := func(row []string) (n int64) {
		for _, c := range row {
			if c != "" {
				n += cellBytes(c)
			}
		}
		return n
	}
	for _, lim := range []xlsxLimits{
		{rows: 3, bytes: 1 << 30},
		{rows: 100, bytes: size(want[0]) + 3*size(want[1])},
	} {
		t.Run(fmt.Sprint(lim.rows), func(t *testing.T) {
			tab, err := buildTable(context.Background(), s, testJob, nil, encodeCells, false)
			require.NoError(t, err)
			defer tab.spool.close()
			var buf bytes.Buffer
			n, err := tab.writeXLSX(context.Background(), &buf, lim)
			require.NoError(t, err)
			require.Equal(t, int64(7), n)
			names, sheets := readXLSX(t, buf.Bytes())
			require.Equal(t, []string{"Items", "Items 2", "Items 3"}, names)
			requireSameTable(t, append([][]string{want[0]}, want[1:4]...), sheets[0])
			requireSameTable(t, append([][]string{want[0]}, want[4:7]...), sheets[1])
			requireSameTable(t, append([][]string{want[0]}, want[7:]...), sheets[2])
		})
	}
}

func TestWriteXLSXTooManyColumns(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("{")
	for i := range excelize.MaxColumns {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":1`, i)
	}
	b.WriteString("}")
	s := &fakeStore{items: []*engine.Item{item(1, engine.ItemDone, b.String())}}
	var buf bytes.Buffer
	_, err := WriteXLSX(context.Background(), s, testJob, nil, &buf)
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err), "%v", err)
	require.ErrorContains(t, err, "16384")
	require.Empty(t, buf.Bytes())
}

func TestPlainNumber(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text string
		want float64
		ok   bool
	}{
		{"0", 0, true}, {"-0", 0, true}, {"12", 12, true}, {"-12.50", -12.5, true}, {"1e3", 1000, true},
		{"1.5E-3", 0.0015, true}, {"123456789012345", 123456789012345, true},
		{"1234567890123450000", 1234567890123450000, true}, {"0.000123456789012345", 0.000123456789012345, true},
		{"9.99999999999999e307", 9.99999999999999e307, true}, {"2.2250738585073e-308", 2.2250738585073e-308, true},
		{"2.2250738585072e-308", 0, false}, {"2.2250738585072014e-308", 0, false},
		{"1234567890123456", 0, false}, {"0.1234567890123456", 0, false}, {"1e308", 0, false},
		{"1e-320", 0, false}, {"1e-400", 0, false}, {"1e999", 0, false},
		{"", 0, false}, {"007", 0, false}, {"+1", 0, false}, {"1.", 0, false}, {".5", 0, false}, {"1e", 0, false},
		{"- 1", 0, false}, {"1 ", 0, false}, {"0x10", 0, false}, {"Inf", 0, false}, {"NaN", 0, false}, {"1_000", 0, false},
	} {
		v, ok := plainNumber(c.text)
		require.Equal(t, c.ok, ok, c.text)
		if ok {
			require.Equal(t, c.want, v, c.text)
		}
	}
}

func TestFormats(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Format{"csv": FormatCSV, "XLSX": FormatXLSX, " xlsx ": FormatXLSX} {
		f, err := ParseFormat(in)
		require.NoError(t, err, in)
		require.Equal(t, want, f, in)
	}
	_, err := ParseFormat("pdf")
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
	require.Equal(t, FormatXLSX, FormatOf("out/Results.XLSX"))
	require.Equal(t, FormatCSV, FormatOf("results.csv"))
	require.Equal(t, FormatCSV, FormatOf("results"))
	require.Equal(t, FormatCSV, FormatOf("-"))
	require.Equal(t, ".xlsx", FormatXLSX.Ext())
	require.Contains(t, FormatXLSX.ContentType(), "spreadsheetml")
	require.Contains(t, FormatCSV.ContentType(), "text/csv")

	s := &fakeStore{items: everyStatusItems()}
	for _, f := range []Format{"csv", "CSV", "xlsx"} {
		var viaWrite, direct bytes.Buffer
		_, err := Write(context.Background(), s, testJob, nil, f, &viaWrite)
		require.NoError(t, err, f)
		if strings.EqualFold(string(f), "csv") {
			_, err = WriteCSV(context.Background(), s, testJob, nil, &direct)
			require.NoError(t, err)
			require.Equal(t, direct.String(), viaWrite.String())
		} else {
			_, sheets := readXLSX(t, viaWrite.Bytes())
			requireSameTable(t, expectedTable(t, s, nil), sheets[0])
		}
	}
	var buf bytes.Buffer
	_, err = Write(context.Background(), s, testJob, nil, "ods", &buf)
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
}
