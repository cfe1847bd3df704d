package export

import (
	"bufio"
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
	t, err := buildTable(ctx, s, jobID, statuses, appendCSV)
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

// csvNeedsQuotes reports whether appendCSV quotes c.
func csvNeedsQuotes(c string) bool {
	if c == "" {
		return false
	}
	if c == `\.` || strings.ContainsAny(c, ",\"\r\n") {
		return true
	}
	r, _ := utf8.DecodeRuneInString(c)
	return unicode.IsSpace(r)
}

// writeCSV writes the header and the spooled rows to w, each row completed
// with empty cells for the columns that appeared after it was read.
func (t *table) writeCSV(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	labels := make([]string, len(t.cols))
	for i, c := range t.cols {
		labels[i] = Neutralize(c.Label)
	}
	if _, err := bw.Write(appendCSV(nil, labels)); err != nil {
		return 0, err
	}
	if err := bw.WriteByte('\n'); err != nil {
		return 0, err
	}
	r, err := t.spool.reader()
	if err != nil {
		return 0, err
	}
	var n int64
	for ; n < t.rows; n++ {
		cells, rec, err := r.next()
		if err != nil {
			if err == io.EOF {
				err = errSpoolCorrupt
			}
			return n, err
		}
		if _, err := bw.Write(rec); err != nil {
			return n, err
		}
		for range len(t.cols) - cells {
			bw.WriteByte(',')
		}
		if err := bw.WriteByte('\n'); err != nil {
			return n, err
		}
	}
	return n, bw.Flush()
}
