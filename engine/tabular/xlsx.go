package tabular

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/xuri/excelize/v2"
)

// Limits that keep a hostile or oversized workbook from exhausting memory or
// disk. All sizes are the uncompressed sizes the zip directory declares;
// archive/zip refuses to inflate an entry beyond its declared size, so they
// are upper bounds that can be checked before anything is unpacked.
const (
	// xlsxMaxUnzipBytes caps the total uncompressed size of a workbook.
	xlsxMaxUnzipBytes = 1 << 30
	// xlsxXMLMemBytes is the size above which excelize unpacks a worksheet
	// or the shared string table to a temporary file and streams it from
	// there instead of holding it in memory.
	xlsxXMLMemBytes = 16 << 20
	// xlsxMaxPartBytes caps each part that excelize always holds in memory
	// (everything but worksheets and the shared string table: workbook,
	// styles, relationships, images, ...).
	xlsxMaxPartBytes = 64 << 20
	// xlsxMaxMemBytes caps the total size of the parts held in memory.
	xlsxMaxMemBytes = 256 << 20
)

// DefaultMaxXLSXRows is the largest number of data rows read from a sheet
// when XLSXOptions.MaxRows is 0.
const DefaultMaxXLSXRows = 5_000_000

// zipSignature starts every zip archive that has at least one entry, XLSX
// workbooks included.
var zipSignature = []byte("PK\x03\x04")

// oleSignature starts OLE compound files: legacy .xls workbooks and
// password-protected (encrypted) .xlsx workbooks.
var oleSignature = []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}

// IsXLSX reports whether head, the first bytes of a file (four are enough),
// starts with the zip signature "PK\x03\x04". Every XLSX workbook does, but
// so do other zip-based files (.docx, .ods, .zip); OpenXLSX tells them apart.
func IsXLSX(head []byte) bool { return bytes.HasPrefix(head, zipSignature) }

// XLSXOptions tune how OpenXLSX reads a workbook. The zero value reads the
// first sheet.
type XLSXOptions struct {
	// Sheet names the worksheet to read. "" reads the first sheet (by
	// position in the workbook, not the active one). A name is matched
	// exactly, else case-insensitively as Excel does; a name the workbook
	// lacks is a *FormatError that lists the sheets it has.
	Sheet string
	// MaxRows caps the number of data rows (non-empty rows after the
	// header). 0 means DefaultMaxXLSXRows. Reading one more is a
	// *FormatError "sheet has more than N rows".
	MaxRows int

	// xmlMemBytes and tmpDir override xlsxXMLMemBytes and the system
	// temporary directory; tests only.
	xmlMemBytes int64
	tmpDir      string
}

// XLSXReader reads the rows of one worksheet of an Office Open XML workbook
// (.xlsx, .xlsm) as a stream, with the same methods and row semantics as
// CSVReader so that callers can use either:
//
//   - The header is the first row that has a non-empty cell; rows above it
//     are ignored. Header and Keys make the names unique exactly as for CSV.
//   - Row.Line is the 1-based row number in the sheet (the number Excel
//     shows), not a line of a file. FormatError.Line is such a row number too.
//   - Completely empty rows (every cell empty or absent) are skipped.
//   - Unlike CSV, a row with fewer cells than the header is normal: XLSX
//     omits empty trailing cells, so the row is padded with "" and has no
//     Row.Err. Empty cells beyond the header's width are dropped as well; a
//     row with a non-empty cell beyond the header's width comes back with
//     Row.Err "row N has M cells, header has K".
//   - Cell values are the text Excel displays: numbers and dates are
//     formatted with the cell's number format as excelize renders it (a
//     date cell with Excel's built-in short date format 14 reads as e.g.
//     "03-14-24", not in the reader's locale), booleans read "TRUE" or
//     "FALSE", and formula cells give their cached result (nothing is
//     recalculated; a formula never calculated reads as "").
//
// Worksheets and the shared string table larger than 16 MiB are unpacked to
// temporary files and streamed from there; Close removes them. Other parts
// are held in memory, within limits checked before anything is unpacked (see
// OpenXLSX). An XLSXReader is not safe for concurrent use.
type XLSXReader struct {
	f       *excelize.File
	rows    *excelize.Rows
	sheet   string
	size    int64 // the file size, for BytesRead
	maxRows int

	header []string
	keys   []string

	rowNo    int  // sheet rows iterated so far: the current row's number
	dataRows int  // data rows returned so far
	done     bool // the sheet has been read to its end
	err      error
}

// OpenXLSX opens the workbook at path, selects the sheet opt.Sheet names and
// reads its header row. The caller must Close the reader.
//
// Problems with the content are *FormatError with Line 0: a file that is not
// a workbook ("not an XLSX workbook: ..."; a legacy .xls or an encrypted
// workbook is named as such), a workbook that unpacks to more than 1 GiB or
// whose in-memory parts are too large (checked from the zip directory before
// anything is unpacked, so zip bombs are rejected cheaply), a missing sheet,
// and a sheet without a header row. An error opening or reading the file
// itself is returned as a plain error.
func OpenXLSX(path string, opt XLSXOptions) (*XLSXReader, error) {
	size, err := checkXLSXFile(path, opt)
	if err != nil {
		return nil, err
	}
	memLimit := opt.xmlMemBytes
	if memLimit <= 0 {
		memLimit = xlsxXMLMemBytes
	}
	f, err := excelize.OpenFile(path, excelize.Options{
		UnzipSizeLimit:    xlsxMaxUnzipBytes,
		UnzipXMLSizeLimit: memLimit,
		TmpDir:            opt.tmpDir,
	})
	if err != nil {
		if f != nil {
			_ = f.Close()
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("opening workbook: %w", err)
		}
		reason := err.Error()
		if errors.Is(err, io.EOF) {
			reason = "its workbook part is missing or empty"
		}
		return nil, &FormatError{Reason: "not an XLSX workbook: " + reason}
	}
	r := &XLSXReader{f: f, size: size, maxRows: opt.MaxRows}
	if r.maxRows <= 0 {
		r.maxRows = DefaultMaxXLSXRows
	}
	if err := r.start(opt.Sheet); err != nil {
		_ = r.Close()
		return nil, err
	}
	return r, nil
}

// checkXLSXFile checks that path is a zip archive within the size limits and
// returns the file's size.
func checkXLSXFile(path string, opt XLSXOptions) (int64, error) {
	file, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		return 0, err
	}
	head := make([]byte, len(oleSignature))
	n, err := io.ReadFull(file, head)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return 0, fmt.Errorf("reading the start of the file: %w", err)
	}
	head = head[:n]
	switch {
	case bytes.Equal(head, oleSignature):
		return 0, &FormatError{Reason: "not an XLSX workbook: an OLE compound file, i.e. a legacy .xls workbook " +
			"or a password-protected one; save it as an unprotected .xlsx"}
	case !IsXLSX(head):
		return 0, &FormatError{Reason: "not an XLSX workbook: the file is not a zip archive"}
	}
	zr, err := zip.NewReader(file, info.Size())
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return 0, &FormatError{Reason: "not an XLSX workbook: " + err.Error()}
	}
	if !hasContentTypes(zr.File) {
		return 0, &FormatError{Reason: "not an XLSX workbook: a zip archive without the [Content_Types].xml of Office documents"}
	}
	memLimit := opt.xmlMemBytes
	if memLimit <= 0 {
		memLimit = xlsxXMLMemBytes
	}
	if err := checkZipSizes(zr.File, memLimit); err != nil {
		return 0, err
	}
	return info.Size(), nil
}

// hasContentTypes reports whether files include the [Content_Types].xml
// part every Office Open XML package has.
func hasContentTypes(files []*zip.File) bool {
	for _, zf := range files {
		if strings.EqualFold(zf.Name, "[Content_Types].xml") {
			return true
		}
	}
	return false
}

// checkZipSizes applies the size limits to the declared uncompressed sizes
// of the workbook's parts. Worksheets and the shared string table larger
// than memLimit go to temporary files; everything else stays in memory.
func checkZipSizes(files []*zip.File, memLimit int64) error {
	const mib = 1 << 20
	var total, inMemory uint64
	for _, zf := range files {
		size := zf.UncompressedSize64
		total += size
		if total > xlsxMaxUnzipBytes {
			return &FormatError{Reason: fmt.Sprintf("workbook too large: it unpacks to more than %d MiB", xlsxMaxUnzipBytes/mib)}
		}
		name := strings.ToLower(strings.ReplaceAll(zf.Name, "\\", "/"))
		streamed := name == "xl/sharedstrings.xml" || strings.HasPrefix(name, "xl/worksheets/sheet")
		if streamed && size > uint64(memLimit) {
			continue
		}
		if !streamed && size > xlsxMaxPartBytes {
			return &FormatError{Reason: fmt.Sprintf("workbook too large: part %s unpacks to %d MiB, more than the %d MiB allowed",
				zf.Name, size/mib, xlsxMaxPartBytes/mib)}
		}
		inMemory += size
		if inMemory > xlsxMaxMemBytes {
			return &FormatError{Reason: fmt.Sprintf("workbook too large: the parts held in memory unpack to more than %d MiB",
				xlsxMaxMemBytes/mib)}
		}
	}
	return nil
}

// start selects the sheet and reads the header row.
func (r *XLSXReader) start(want string) error {
	sheets := r.f.GetSheetList()
	if len(sheets) == 0 {
		return &FormatError{Reason: "not an XLSX workbook: it has no sheets"}
	}
	sheet, err := pickSheet(sheets, want)
	if err != nil {
		return err
	}
	r.sheet = sheet
	if r.rows, err = r.f.Rows(sheet); err != nil {
		return &FormatError{Reason: fmt.Sprintf("sheet %q: %v", sheet, err)}
	}
	cells, err := r.nextCells()
	if errors.Is(err, io.EOF) {
		return &FormatError{Reason: fmt.Sprintf("sheet %q is empty: no header row", sheet)}
	}
	if err != nil {
		return err
	}
	cells = trimEmptyTail(cells, 0)
	r.header = uniqueHeader(cells)
	r.keys = uniqueKeys(cells)
	return nil
}

// pickSheet returns the sheet want names: the first of sheets when want is
// "", else the exact match, else the case-insensitive one.
func pickSheet(sheets []string, want string) (string, error) {
	if want == "" {
		return sheets[0], nil
	}
	for _, s := range sheets {
		if s == want {
			return s, nil
		}
	}
	for _, s := range sheets {
		if strings.EqualFold(s, want) {
			return s, nil
		}
	}
	quoted := make([]string, len(sheets))
	for i, s := range sheets {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return "", &FormatError{Reason: fmt.Sprintf("no sheet named %q; the workbook has %s", want, strings.Join(quoted, ", "))}
}

// nextCells returns the cells of the next row that has a non-empty cell, or
// io.EOF after the last one. It keeps r.rowNo at that row's number.
func (r *XLSXReader) nextCells() ([]string, error) {
	for r.rows.Next() {
		r.rowNo++
		cells, err := r.rows.Columns()
		if err != nil {
			return nil, &FormatError{Line: r.rowNo, Reason: "unreadable cell: " + err.Error()}
		}
		for _, c := range cells {
			if c != "" {
				return cells, nil
			}
		}
	}
	if err := r.rows.Error(); err != nil {
		return nil, &FormatError{Line: r.rowNo + 1, Reason: fmt.Sprintf("sheet %q: %v", r.sheet, err)}
	}
	return nil, io.EOF
}

// trimEmptyTail drops the empty cells at the end of cells beyond the first
// keep.
func trimEmptyTail(cells []string, keep int) []string {
	n := len(cells)
	for n > keep && cells[n-1] == "" {
		n--
	}
	return cells[:n]
}

// Sheet returns the name of the sheet being read.
func (r *XLSXReader) Sheet() string { return r.sheet }

// Header returns the column names as in the header row, made unique: an
// empty name becomes "column_N" (N the 1-based column index) and repeats get
// "_2", "_3" suffixes. The caller must not modify the slice.
func (r *XLSXReader) Header() []string { return r.header }

// Keys returns a normalised key (see NormalizeKey) for each header column,
// made unique the same way as Header. The caller must not modify the slice.
func (r *XLSXReader) Keys() []string { return r.keys }

// BytesRead is for progress reports, which can only be coarse: the position
// within the compressed worksheet is not known. It returns 0 until the sheet
// has been read to its end, and the file's size from then on.
func (r *XLSXReader) BytesRead() int64 {
	if r.done {
		return r.size
	}
	return 0
}

// Next returns the next non-empty data row, or io.EOF after the last one. A
// row with a non-empty cell beyond the header's width comes back with
// Row.Err set; a row with fewer cells is padded with "" (see XLSXReader).
// A corrupt row or more than MaxRows rows is a *FormatError. Errors are
// sticky.
func (r *XLSXReader) Next() (*Row, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.rows == nil {
		r.err = errors.New("xlsx reader is closed")
		return nil, r.err
	}
	cells, err := r.nextCells()
	if err != nil {
		if errors.Is(err, io.EOF) {
			r.done = true
		}
		r.err = err
		return nil, err
	}
	r.dataRows++
	if r.dataRows > r.maxRows {
		r.err = &FormatError{Line: r.rowNo, Reason: fmt.Sprintf("sheet has more than %d rows", r.maxRows)}
		return nil, r.err
	}
	width := len(r.header)
	cells = trimEmptyTail(cells, width)
	row := &Row{Line: r.rowNo, Fields: cells}
	switch {
	case len(cells) > width:
		row.Err = fmt.Sprintf("row %d has %d cells, header has %d", r.rowNo, len(cells), width)
	case len(cells) < width:
		row.Fields = append(cells, make([]string, width-len(cells))...)
	}
	return row, nil
}

// Close releases the workbook and removes its temporary files. It may be
// called more than once.
func (r *XLSXReader) Close() error {
	var first error
	if r.rows != nil {
		// Rows.Close only closes a read-only temporary file, or repeats
		// the reading error Next has already returned.
		_ = r.rows.Close()
		r.rows = nil
	}
	if r.f != nil {
		if err := r.f.Close(); err != nil && first == nil {
			first = err
		}
		r.f = nil
	}
	return first
}
