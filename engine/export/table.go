package export

import (
	"context"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// table is a job's export after its one pass over the items: the columns
// (the same as Columns finds) and every row in a spool, encoded by the
// file format with the columns known when the row was read. Columns only
// ever grow at the end, and a row read before a column appeared has no
// value in it, so each row is its first cells; the rest are empty.
type table struct {
	cols  []Column
	rows  int64
	spool *spool
	// segs are the runs of consecutive rows with the same number of cells,
	// in order (a raw spool's only framing: see writeCSV).
	segs []segment
	// maxRowXML bounds the XML of the largest row in an XLSX sheet (see
	// cellBytes).
	maxRowXML int64
}

// rowEncoder appends one row's record to dst; cells are already neutralised.
type rowEncoder func(dst []byte, cells []string) []byte

// segment is a run of consecutive spooled rows that have the same number
// of cells, and the bytes of their records.
type segment struct {
	cells int
	rows  int64
	bytes int64
}

// buildTable reads a job's items in one of statuses once, in the grid's
// order, finding the columns as Columns does and rendering each item as
// Cells does (then Neutralize), into a spool through enc. The caller closes
// the table's spool. Nothing is written anywhere else, so a failure (ctx,
// the store, a bad Result) leaves the caller free to report it.
//
// With raw, the spool holds the records as enc made them, one after the
// other with no framing (enc must make records that can be told apart, as
// CSV lines can); the segments say where the cell counts change.
func buildTable(ctx context.Context, s engine.Store, jobID int64, statuses []engine.ItemStatus, enc rowEncoder, raw bool) (*table, error) {
	b := &tableBuilder{
		cols:  append([]Column(nil), fixedColumns...),
		index: make(map[string]int),
	}
	t := &table{spool: &spool{raw: raw}}
	var rec []byte
	err := streamItems(ctx, s, jobID, statuses, func(it *engine.Item) error {
		cells, err := b.row(it)
		if err != nil {
			return err
		}
		var xml int64
		for i, c := range cells {
			if c != "" {
				cells[i] = Neutralize(c)
				xml += cellBytes(cells[i])
			}
		}
		t.maxRowXML = max(t.maxRowXML, xml)
		rec = enc(rec[:0], cells)
		t.rows++
		if n := len(t.segs); n == 0 || t.segs[n-1].cells != len(cells) {
			t.segs = append(t.segs, segment{cells: len(cells)})
		}
		seg := &t.segs[len(t.segs)-1]
		seg.rows++
		seg.bytes += int64(len(rec))
		return t.spool.put(len(cells), rec)
	})
	t.cols = b.cols
	if err != nil {
		t.spool.close()
		return nil, err
	}
	return t, nil
}

// tableBuilder renders items while finding the columns.
type tableBuilder struct {
	cols []Column
	// index maps each result key seen so far to its column.
	index map[string]int
	cells []string
}

// row renders it with the columns seen so far, adding a column for each
// result key seen for the first time. The cells are valid until the next
// call; for string and number values they share it.Result's memory, which
// must not change until they are used.
func (b *tableBuilder) row(it *engine.Item) ([]string, error) {
	cells := b.cells[:0]
	for range b.cols {
		cells = append(cells, "")
	}
	cells[0] = strconv.FormatInt(it.Seq, 10)
	cells[1] = string(it.Status)
	cells[2] = strconv.Itoa(it.Attempts)
	cells[3] = it.LastError
	hint := len(fixedColumns)
	err := eachOwnResultField(it, func(k string, value rawValue) error {
		// Keys usually come in the columns' order: try the next column
		// before the map.
		j := hint
		if j >= len(b.cols) || !showsResultKey(b.cols[j].Key, k) {
			var ok bool
			if j, ok = b.index[k]; !ok {
				k = strings.Clone(k) // k may point into the whole Result
				j = len(b.cols)
				b.cols = append(b.cols, resultColumn(k))
				b.index[k] = j
				cells = append(cells, "")
			}
		}
		hint = j + 1
		var err error
		cells[j], err = value.cellText()
		return err
	})
	b.cells = cells
	return cells, err
}
