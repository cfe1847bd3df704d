package export

import (
	"context"
	"encoding/csv"
	"io"

	"github.com/sluicehq/sluice/engine"
)

// WriteCSV writes a job's export to w as CSV: a header row of the column
// labels, then one row per item in the grid's order (Store.ListItems':
// updated_at, id), restricted to items in one of
// statuses (nil or empty: every item). It returns the number of item rows
// written, the header not counted.
//
// It reads the items twice, once for Columns and once for the rows, and
// holds one item at a time, so any job size streams in constant memory.
// Every cell, the header included, goes through Neutralize. Lines end in
// "\n" (see the package documentation).
//
// The two passes are not one snapshot: on a job that is still running, an
// item may change between them. Its row then shows its state at the second
// pass, and a result key that first appears between the passes has no column
// and is left out; export a finished (or paused) job for an exact file.
//
// WriteCSV stops at the first error: ctx cancelled (checked before every
// item), a failed write to w, or an item whose Result is not a JSON object or
// null. It then flushes the rows produced so far to w and returns their count
// with the error, so a caller that already sent part of a response can tell
// how far it got.
func WriteCSV(ctx context.Context, s engine.Store, jobID int64, statuses []engine.ItemStatus, w io.Writer) (int64, error) {
	cols, err := Columns(ctx, s, jobID, statuses)
	if err != nil {
		return 0, err
	}
	cw := csv.NewWriter(w)
	row := make([]string, len(cols))
	for i, c := range cols {
		row[i] = Neutralize(c.Label)
	}
	if err := cw.Write(row); err != nil {
		return 0, err
	}
	var n int64
	p := &engine.ScanItemsParams{JobID: jobID, Statuses: statuses}
	err = s.ScanItems(ctx, p, func(it *engine.Item) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fillCells(row, it, cols); err != nil {
			return err
		}
		for i, c := range row {
			row[i] = Neutralize(c)
		}
		if err := cw.Write(row); err != nil {
			return err
		}
		n++
		return nil
	})
	cw.Flush()
	if err == nil {
		err = cw.Error()
	}
	return n, err
}
