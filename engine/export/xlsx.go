package export

import (
	"archive/zip"
	"context"
	"encoding/binary"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/xuri/excelize/v2"

	"github.com/sluicehq/sluice/engine"
)

// xlsxLimits bound one XLSX sheet; a job with more rows continues on
// further sheets, each with the header again. bytes keeps every sheet's XML
// under 4 GiB, past which the archive needs ZIP64 entries that archive/zip
// writes in a form Excel reports as corrupt: every sheet but the last holds
// as many rows as the largest row allows (see cellBytes), so that each
// sheet's size, and its dimension, is known before it is written.
type xlsxLimits struct {
	rows  int // item rows, the header not counted
	bytes int64
}

// sheetLimits are the limits of a real sheet: the header takes one of
// Excel's 1,048,576 rows.
var sheetLimits = xlsxLimits{rows: excelize.TotalRows - 1, bytes: 3 << 30}

// xlsxSheetName is the name of the export's n-th sheet, from 1.
func xlsxSheetName(n int) string {
	if n == 1 {
		return "Items"
	}
	return "Items " + strconv.Itoa(n)
}

// WriteXLSX writes a job's export to w as an XLSX workbook with the same
// columns, rows, order and cell text as WriteCSV: the header row (bold,
// frozen), then one row per item in the grid's order, restricted to items
// in one of statuses (nil or empty: every item). It returns the number of
// item rows written, the header not counted.
//
// A cell whose text is a plain decimal number (see the package
// documentation) is written as a number, any other as text after
// Neutralize, exactly as in the CSV file; empty cells are left out. A sheet
// holds at most 1,048,575 items; a larger job continues on sheets "Items
// 2", "Items 3", ..., each starting with the header. A job with more than
// 16,384 columns cannot be written (EINVALID).
//
// The items are read once, from one snapshot, as in WriteCSV, and the
// rows wait in a spool. excelize's StreamWriter then writes the sheets to
// its own temporary files and the archive is compressed straight into w,
// so memory stays bounded whatever the job's size; the temporary files
// (in os.TempDir) take a few times the size of the CSV file meanwhile.
//
// Nothing is written to w until every item has been read and the sheets
// are complete: a cancelled ctx, a failing store or a Result that is
// neither a JSON object nor null returns 0 and the error with w untouched.
// A failed write to w returns 0 and the error; what w received is then an
// incomplete archive.
func WriteXLSX(ctx context.Context, s engine.Store, jobID int64, statuses []engine.ItemStatus, w io.Writer) (int64, error) {
	t, err := buildTable(ctx, s, jobID, statuses, encodeCells, false)
	if err != nil {
		return 0, err
	}
	defer t.spool.close()
	if len(t.cols) > excelize.MaxColumns {
		return 0, engine.Errorf(engine.EINVALID,
			"export: job %d has %d columns; an XLSX sheet holds at most %d (export CSV instead)", jobID, len(t.cols), excelize.MaxColumns)
	}
	return t.writeXLSX(ctx, w, sheetLimits)
}

// encodeCells appends cells to dst, each as its length (a uvarint) and its
// bytes.
func encodeCells(dst []byte, cells []string) []byte {
	for _, c := range cells {
		dst = binary.AppendUvarint(dst, uint64(len(c)))
		dst = append(dst, c...)
	}
	return dst
}

// decodeCells appends the n cells of rec to dst. The cells are substrings
// of one string made of rec.
func decodeCells(dst []string, rec []byte, n int) ([]string, error) {
	s := string(rec)
	for range n {
		l, k := binary.Uvarint(rec)
		if k <= 0 || uint64(len(rec)-k) < l {
			return nil, errSpoolCorrupt
		}
		start := len(s) - len(rec) + k
		dst = append(dst, s[start:start+int(l)])
		rec = rec[k+int(l):]
	}
	return dst, nil
}

// writeXLSX writes the workbook: the spooled rows on as many sheets as
// they need, then the archive into w.
func (t *table) writeXLSX(ctx context.Context, w io.Writer, lim xlsxLimits) (int64, error) {
	f := excelize.NewFile()
	defer f.Close()
	// excelize builds the whole archive in a buffer unless the zip writer
	// it is given ignores that buffer: this one writes straight to w. The
	// fastest deflate level costs a third of the default's time for a file
	// about a third larger, and it runs on every core.
	f.SetZipWriter(func(io.Writer) excelize.ZipWriter {
		zw := zip.NewWriter(w)
		zw.RegisterCompressor(zip.Deflate, func(out io.Writer) (io.WriteCloser, error) {
			return newParallelDeflate(out), nil
		})
		return zw
	})
	bold, err := f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true}})
	if err != nil {
		return 0, err
	}
	header := make([]any, len(t.cols))
	var headerXML int64
	for i, c := range t.cols {
		label := Neutralize(c.Label)
		header[i] = label // always text, even when it looks like a number
		headerXML += cellBytes(label)
	}
	perSheet := int64(lim.rows)
	if t.maxRowXML > 0 {
		perSheet = max(1, min(perSheet, (lim.bytes-headerXML)/t.maxRowXML))
	}
	r, err := t.spool.reader()
	if err != nil {
		return 0, err
	}
	var (
		sw     *excelize.StreamWriter
		sheets int
		row    int // the sheet's last row written
		cells  []string
		values = make([]any, len(t.cols))
	)
	// newSheet finishes the current sheet and starts the next with its
	// dimension (the range its rows cover) and the header.
	newSheet := func(items int64) error {
		if sw != nil {
			if err := sw.Flush(); err != nil {
				return err
			}
		}
		sheets++
		name := xlsxSheetName(sheets)
		if sheets == 1 {
			if err := f.SetSheetName(f.GetSheetName(0), name); err != nil {
				return err
			}
		} else if _, err := f.NewSheet(name); err != nil {
			return err
		}
		last, err := excelize.CoordinatesToCellName(len(t.cols), int(items)+1)
		if err != nil {
			return err
		}
		if err := f.SetSheetDimension(name, "A1:"+last); err != nil {
			return err
		}
		if sw, err = f.NewStreamWriter(name); err != nil {
			return err
		}
		if err := sw.SetPanes(&excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}); err != nil {
			return err
		}
		row = 1
		return sw.SetRow("A1", header, excelize.RowOpts{StyleID: bold})
	}
	if err := newSheet(min(perSheet, t.rows)); err != nil {
		return 0, err
	}
	for n := int64(0); n < t.rows; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
		if n > 0 && n%perSheet == 0 {
			if err := newSheet(min(perSheet, t.rows-n)); err != nil {
				return 0, err
			}
		}
		k, rec, err := r.next()
		if err != nil {
			if err == io.EOF {
				err = errSpoolCorrupt
			}
			return 0, err
		}
		if cells, err = decodeCells(cells[:0], rec, k); err != nil {
			return 0, err
		}
		for i, c := range cells {
			values[i] = xlsxValue(c)
		}
		row++
		ref, err := excelize.CoordinatesToCellName(1, row)
		if err != nil {
			return 0, err
		}
		if err := sw.SetRow(ref, values[:len(cells)]); err != nil {
			return 0, err
		}
	}
	if err := sw.Flush(); err != nil {
		return 0, err
	}
	// The archive goes to w through the zip writer above; what excelize
	// then copies from its own (empty) buffer is nothing.
	if err := f.Write(io.Discard); err != nil {
		return 0, err
	}
	return t.rows, nil
}

// cellBytes bounds the XML that excelize writes for one non-empty cell of
// text c: the element, its reference and type, and the text, cut at
// 32,767 characters (at most 4 bytes each), with every byte escaped at
// worst ("&#34;" and the like).
func cellBytes(c string) int64 {
	return 96 + 6*int64(min(len(c), 4*excelize.TotalCellChars))
}

// xlsxValue is the value excelize gets for one (neutralised) cell: nil for
// an empty cell (left out), an int64 or a float64 for a plain number (the
// same value; excelize formats an int64 faster), else the text.
func xlsxValue(c string) any {
	if c == "" {
		return nil
	}
	v, ok := plainNumber(c)
	if !ok {
		return c
	}
	if strings.IndexAny(c, ".eE") < 0 {
		if n, err := strconv.ParseInt(c, 10, 64); err == nil {
			return n
		}
	}
	return v
}

// maxSignificant is how many significant digits a spreadsheet keeps.
const maxSignificant = 15

// plainNumber reports whether c is a plain decimal number and returns its
// value: JSON's number syntax (an optional minus, no leading zeros, an
// optional fraction and exponent), at most 15 significant digits, and a
// value within a spreadsheet's range (a normal float64 no larger than
// 9.99999999999999e307, or zero). Such a number reads back from the
// spreadsheet as the same value; anything else ("007", "+1", "1.",
// "12345678901234567", "1e400") stays text.
func plainNumber(c string) (float64, bool) {
	if end, ok := numberEnd(c, 0); !ok || end != len(c) {
		return 0, false
	}
	// Significant digits: those of the mantissa from the first non-zero
	// digit to the last non-zero digit.
	first, last, count := -1, -1, 0
	for i := 0; i < len(c); i++ {
		b := c[i]
		if b == 'e' || b == 'E' {
			break
		}
		if b < '0' || b > '9' {
			continue
		}
		if b != '0' {
			if first < 0 {
				first = count
			}
			last = count
		}
		count++
	}
	if first >= 0 && last-first+1 > maxSignificant {
		return 0, false
	}
	v, err := strconv.ParseFloat(c, 64)
	if err != nil {
		return 0, false
	}
	if a := math.Abs(v); a != 0 && (a < 0x1p-1022 || a > 9.99999999999999e307) {
		return 0, false
	}
	if v == 0 && first >= 0 {
		return 0, false // a tiny non-zero number that underflowed to 0
	}
	return v, true
}
