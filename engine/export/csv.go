package export

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sluicehq/sluice/engine"
)

// WriteCSV writes a job's export to w as CSV: a header row of the column
// labels, then one row per item in the grid's order (Store.ListItems':
// updated_at, id), restricted to items in one of statuses (nil or empty:
// every item). It returns the number of item rows written, the header not
// counted.
//
// The items are read once, from one snapshot of the store, so the header
// and the rows always agree, even on a job that is still running. Since
// the header is known only after the last item, the rows wait in a spool
// (memory, then a temporary file in os.TempDir) and memory stays bounded
// whatever the job's size. Every cell, the header included, goes through
// Neutralize. Lines end in "\n" (see the package documentation).
//
// Nothing is written to w until every item has been read: when ctx is
// cancelled (checked before every item), the store fails or an item's
// Result is neither a JSON object nor null, WriteCSV returns 0 and the
// error and w is untouched, so an HTTP handler can still answer with an
// error status. A failed write to w returns the error, with the number of
// rows encoded before it; what w received is then incomplete.
func WriteCSV(ctx context.Context, s engine.Store, jobID int64, statuses []engine.ItemStatus, w io.Writer) (int64, error) {
	t, err := buildTable(ctx, s, jobID, statuses, appendCSVLine, true)
	if err != nil {
		return 0, err
	}
	defer t.spool.close()
	return t.writeCSV(w)
}

// appendCSV appends cells to dst as one CSV record without its line end,
// exactly as encoding/csv's Writer (comma, no CRLF) writes it: a field is
// quoted when it holds a comma, a quote, a carriage return or a line feed,
// when it starts with a space (unicode.IsSpace), or when it is \. (which
// PostgreSQL would read as the end of data); quotes inside are doubled.
func appendCSV(dst []byte, cells []string) []byte {
	for i, c := range cells {
		if i > 0 {
			dst = append(dst, ',')
		}
		if !csvNeedsQuotes(c) {
			dst = append(dst, c...)
			continue
		}
		dst = append(dst, '"')
		for {
			j := strings.IndexByte(c, '"')
			if j < 0 {
				break
			}
			dst = append(dst, c[:j+1]...)
			dst = append(dst, '"')
			c = c[j+1:]
		}
		dst = append(dst, c...)
		dst = append(dst, '"')
	}
	return dst
}

// appendCSVLine is appendCSV with the line end: the record as the file
// holds it.
func appendCSVLine(dst []byte, cells []string) []byte {
	return append(appendCSV(dst, cells), '\n')
}

// csvQuoted marks the bytes that make appendCSV quote a field wherever
// they are.
var csvQuoted = [256]bool{',': true, '"': true, '\r': true, '\n': true}

// csvNeedsQuotes reports whether appendCSV quotes c. One pass over the
// bytes with a table: this runs for every cell of an export.
func csvNeedsQuotes(c string) bool {
	if c == "" {
		return false
	}
	for i := 0; i < len(c); i++ {
		if csvQuoted[c[i]] {
			return true
		}
	}
	if c == `\.` {
		return true
	}
	if c[0] < utf8.RuneSelf {
		return unicode.IsSpace(rune(c[0]))
	}
	r, _ := utf8.DecodeRuneInString(c)
	return unicode.IsSpace(r)
}

// writeCSV writes the header and the spooled rows to w, each row completed
// with empty cells for the columns that appeared after it was read.
//
// The spool holds the CSV lines themselves. The rows read once every
// column was known (usually all of them) are copied as they are, with
// io.Copy, which lets the kernel copy from the spool's file when w is a
// file or a socket (through a bufio.Writer too, once it is flushed). Only
// the rows of earlier segments are read one by one to be completed. A
// failed write returns the rows of the segments written before it.
func (t *table) writeCSV(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	labels := make([]string, len(t.cols))
	for i, c := range t.cols {
		labels[i] = Neutralize(c.Label)
	}
	if _, err := bw.Write(appendCSVLine(nil, labels)); err != nil {
		return 0, err
	}
	src, err := t.spool.rawReader()
	if err != nil {
		return 0, err
	}
	var n int64
	var rec []byte
	for _, seg := range t.segs {
		part := io.LimitReader(src, seg.bytes)
		if seg.cells == len(t.cols) {
			if err := bw.Flush(); err != nil {
				return n, err
			}
			copied, err := io.Copy(w, part)
			if err == nil && copied != seg.bytes {
				err = errSpoolCorrupt
			}
			if err != nil {
				return n, err
			}
			n += seg.rows
			continue
		}
		// Each bufio.Reader stays within its segment (the LimitReader),
		// so src is at the next segment's start afterwards.
		br := bufio.NewReaderSize(part, 64<<10)
		for range seg.rows {
			if rec, err = readCSVLine(br, rec[:0]); err != nil {
				return n, err
			}
			bw.Write(rec[:len(rec)-1])
			for range len(t.cols) - seg.cells {
				bw.WriteByte(',')
			}
			if err := bw.WriteByte('\n'); err != nil {
				return n, err
			}
		}
		n += seg.rows
	}
	return n, bw.Flush()
}

// readCSVLine appends to dst the next record that appendCSVLine made, line
// end included. A line end inside a quoted field is not the record's: the
// record ends at the first line end after an even number of quotes, since
// appendCSV writes quotes only in pairs (the field's two, and each quote
// inside doubled).
func readCSVLine(r *bufio.Reader, dst []byte) ([]byte, error) {
	quotes := 0
	for {
		part, err := r.ReadSlice('\n')
		dst = append(dst, part...)
		quotes += bytes.Count(part, []byte{'"'})
		switch {
		case err == bufio.ErrBufferFull:
		case err != nil:
			return nil, errSpoolCorrupt
		case quotes%2 == 0:
			return dst, nil
		}
	}
}
