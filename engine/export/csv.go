package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"io"

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
	enc := newCSVEncoder()
	t, err := buildTable(ctx, s, jobID, statuses, enc.encode)
	if err != nil {
		return 0, err
	}
	defer t.spool.close()
	return t.writeCSV(w)
}

// csvEncoder encodes one row as a CSV record without its line end.
type csvEncoder struct {
	buf bytes.Buffer
	w   *csv.Writer
}

func newCSVEncoder() *csvEncoder {
	e := &csvEncoder{}
	e.w = csv.NewWriter(&e.buf)
	return e
}

// encode returns the CSV text of cells; it is valid until the next call.
// Writing to a bytes.Buffer cannot fail.
func (e *csvEncoder) encode(_ []byte, cells []string) []byte {
	e.buf.Reset()
	_ = e.w.Write(cells)
	e.w.Flush()
	b := e.buf.Bytes()
	return b[:len(b)-1] // without the "\n"
}

// writeCSV writes the header and the spooled rows to w, each row completed
// with empty cells for the columns that appeared after it was read.
func (t *table) writeCSV(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	labels := make([]string, len(t.cols))
	for i, c := range t.cols {
		labels[i] = Neutralize(c.Label)
	}
	enc := newCSVEncoder()
	if _, err := bw.Write(enc.encode(nil, labels)); err != nil {
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
