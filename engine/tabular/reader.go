// Package tabular reads people's delimited text files (CSV, TSV and their
// relatives) as a stream of rows, without ever holding the whole file in
// memory.
//
// A CSVReader detects the encoding: UTF-8 with or without a byte-order mark,
// UTF-16 with a byte-order mark, or Windows-1252 when the first 64 KiB are not
// UTF-8 (UTF-8 with a few broken bytes is still read as UTF-8, so that the
// broken line is reported rather than every accent garbled). It then sniffs
// the delimiter among ',', ';', '\t' and '|', reads the header row and hands
// out one Row per record.
//
// The dialect is RFC 4180 with the usual real-world latitude:
//
//   - Records end with LF or CRLF; a file whose start has only CR line
//     endings (classic Mac) is read with CR as the line ending. The last
//     record may lack a line ending. Completely empty lines are skipped.
//   - A field that starts with '"' is quoted: it may hold delimiters, line
//     endings (kept exactly as in the file, CRLF included) and doubled quotes
//     ("") that stand for one quote.
//   - A quote inside an unquoted field (5'10", 37°36'37.8"N) is kept as a
//     literal character: an unquoted field cannot span lines, so the record
//     boundaries stay unambiguous. This is what Excel and the csv-spectrum
//     suite expect.
//   - A record whose field count differs from the header's is returned with
//     Row.Err set; reading goes on.
//
// Problems after which no later record can be trusted are fatal and reported
// as a *FormatError naming the line: a closing quote followed by something
// other than a delimiter or a line ending (an undoubled quote inside a quoted
// field), a quoted field still open at the end of the file, a record larger
// than Options.MaxRecordBytes, NUL bytes (binary data), and invalid UTF-8 in a
// file read as UTF-8.
package tabular

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

const (
	// bufferSize is the read buffer; lines shorter than this are parsed in
	// place without copying.
	bufferSize = 256 << 10
	// sniffBytes is how much of the start of a file encoding detection and
	// delimiter sniffing look at.
	sniffBytes = 64 << 10
)

// DefaultMaxRecordBytes is the largest record read when
// Options.MaxRecordBytes is 0.
const DefaultMaxRecordBytes = 16 << 20

// Options tune how a CSVReader reads its input. The zero value detects
// everything.
type Options struct {
	// Delimiter separates fields. 0 sniffs it from the first records among
	// ',', ';', '\t' and '|' (an Excel "sep=X" first line also sets it).
	// Any other value must be a single ASCII character other than '"', CR
	// and LF.
	Delimiter rune
	// Encoding names the character encoding: "" or "auto" detects it;
	// otherwise "utf-8", "utf-16le", "utf-16be", "utf-16" (byte-order mark
	// decides, little-endian without one) or "windows-1252", with aliases
	// such as "utf8", "cp1252" and "latin1". An unknown name is an error.
	Encoding string
	// MaxRecordBytes caps the size of one record, so that a stray quote
	// cannot make the reader swallow the rest of a huge file into one field.
	// 0 means DefaultMaxRecordBytes.
	MaxRecordBytes int
	// ReuseRecord lets Next return the same *Row on every call, with a
	// Fields slice and strings that share the reader's buffers: they are
	// valid only until the next call to Next. It saves an allocation and a
	// copy of every record for callers that consume each row at once (the
	// ingest encodes it into JSON), like encoding/csv's field of that name.
	ReuseRecord bool
}

// Row is one data record of the file.
type Row struct {
	// Line is the 1-based physical line number where the record starts.
	Line int
	// Fields holds the values. The slice and its strings are the caller's
	// to keep; the reader never reuses them, unless Options.ReuseRecord is
	// set.
	Fields []string
	// Err is non-empty when the record is malformed but reading can go on,
	// e.g. "line 7: has 4 fields, header has 6". Fields still holds what was
	// read.
	Err string
}

// FormatError reports that the input is not usable as CSV. It is fatal: the
// reader returns it again on every later call.
type FormatError struct {
	// Line is the 1-based physical line the problem was found on, or 0 when
	// it concerns the file as a whole.
	Line int
	// Reason describes the problem.
	Reason string
}

// Error returns "line N: reason", or just the reason when Line is 0.
func (e *FormatError) Error() string {
	if e.Line <= 0 {
		return e.Reason
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Reason)
}

// CSVReader reads records from a delimited text stream. It is not safe for
// concurrent use.
type CSVReader struct {
	count    *countingReader
	raw      *bufio.Reader // the undecoded input
	br       *bufio.Reader // the input as UTF-8; raw itself on the UTF-8 path
	encoding string
	validate bool // check every line for valid UTF-8 (UTF-8 input only)
	// guessed: UTF-8 was detected from an ASCII-only start (no BOM, not
	// forced) and no non-ASCII byte has been read yet, so a first invalid
	// byte means the file is Windows-1252 after all (see readLine).
	guessed   bool
	hint      string // appended to the binary-data error
	delim     byte
	delimSep  []byte // delim as a one-byte slice, for bytes.Count
	eol       byte   // '\n', or '\r' for CR-only files
	maxRecord int

	header []string
	keys   []string

	lineNo int    // physical lines read so far
	long   []byte // assembles lines longer than the buffer
	rec    []byte // field bytes of the record being parsed (quoted path)
	ends   []int  // end offset in rec of each field
	err    error  // sticky error

	// reuse: Options.ReuseRecord, in force once the header is read. Then
	// fields and row are handed out again on every call.
	reuse  bool
	fields []string
	row    Row
}

// NewCSVReader prepares to read r and reads its header row. Problems with the
// content, including an empty file ("empty file: no header row"), are
// *FormatError; an invalid Options value or an error from r itself is returned
// as a plain error.
func NewCSVReader(r io.Reader, opt Options) (*CSVReader, error) {
	enc, err := canonicalEncoding(opt.Encoding)
	if err != nil {
		return nil, err
	}
	delim, err := checkDelimiter(opt.Delimiter)
	if err != nil {
		return nil, err
	}
	cr := &CSVReader{count: &countingReader{r: r}, maxRecord: opt.MaxRecordBytes}
	if cr.maxRecord <= 0 {
		cr.maxRecord = DefaultMaxRecordBytes
	}
	cr.raw = bufio.NewReaderSize(cr.count, bufferSize)
	if err := cr.setupDecoding(enc); err != nil {
		return nil, err
	}
	sample, err := cr.br.Peek(sniffBytes)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("reading the start of the file: %w", err)
	}
	atEOF := err != nil
	cr.eol = detectEOL(sample)
	if sep, ok := excelSepLine(sample, cr.eol); ok {
		if _, err := cr.readLine(); err != nil {
			return nil, err
		}
		if delim == 0 {
			delim = sep
		}
	} else if delim == 0 {
		delim = sniffDelimiter(sample, cr.eol, atEOF)
	}
	cr.delim, cr.delimSep = delim, []byte{delim}

	fields, _, err := cr.readRecord()
	if errors.Is(err, io.EOF) {
		return nil, &FormatError{Reason: "empty file: no header row"}
	}
	if err != nil {
		return nil, err
	}
	cr.header = uniqueHeader(fields)
	cr.keys = uniqueKeys(fields)
	cr.reuse = opt.ReuseRecord
	return cr, nil
}

// Header returns the column names as in the file, made unique: an empty name
// becomes "column_N" (N the 1-based column index) and repeats get "_2", "_3"
// suffixes. The caller must not modify the slice.
func (r *CSVReader) Header() []string { return r.header }

// Keys returns a normalised key (see NormalizeKey) for each header column,
// made unique the same way as Header. The caller must not modify the slice.
func (r *CSVReader) Keys() []string { return r.keys }

// Delimiter returns the field delimiter in use, given or sniffed.
func (r *CSVReader) Delimiter() rune { return rune(r.delim) }

// Encoding returns the encoding in use: "utf-8", "utf-16le", "utf-16be" or
// "windows-1252".
func (r *CSVReader) Encoding() string { return r.encoding }

// BytesRead returns how many raw bytes have been consumed from the input, for
// progress reports. With a decoding encoding it can run ahead of the last row
// returned by up to a few hundred KiB of read-ahead.
func (r *CSVReader) BytesRead() int64 { return r.count.n - int64(r.raw.Buffered()) }

// Next returns the next data row, or io.EOF after the last one. A malformed
// row that does not stop reading comes back with Row.Err set; a problem that
// does is a *FormatError, and an error from the underlying reader is returned
// wrapped. Errors are sticky.
func (r *CSVReader) Next() (*Row, error) {
	if r.err != nil {
		return nil, r.err
	}
	fields, line, err := r.readRecord()
	if err != nil {
		r.err = err
		return nil, err
	}
	row := &Row{Line: line, Fields: fields}
	if r.reuse {
		r.row = Row{Line: line, Fields: fields}
		row = &r.row
	}
	if len(fields) != len(r.header) {
		row.Err = fmt.Sprintf("line %d: has %d fields, header has %d", line, len(fields), len(r.header))
	}
	return row, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
