package export

import (
	"strconv"

	"github.com/sluicehq/sluice/engine"
)

// Cells renders one item as strings in the order of cols, which usually come
// from Columns but may be any subset or order of them: seq and attempts as
// decimals, the status name, LastError, and each result column as the text
// of its value (see the package documentation). A column whose key the item
// does not have, an item without a Result (a PENDING row) included, gets "".
// The grid and the export both use Cells, so they always agree.
//
// Cells returns the cells as they are; files apply Neutralize on top.
// It fails if the Result is not valid JSON or is neither an object nor null.
func Cells(it *engine.Item, cols []Column) ([]string, error) {
	cells := make([]string, len(cols))
	if err := fillCells(cells, it, cols); err != nil {
		return nil, err
	}
	return cells, nil
}

// fillCells renders it into cells, which has one element per column. The
// Result is converted to a string once; string and number cells are
// substrings of it, so a row costs one allocation plus one per escaped
// string, per non-compact nested value and per seq or attempts above 99.
func fillCells(cells []string, it *engine.Item, cols []Column) error {
	for i, c := range cols {
		switch c.Key {
		case keySeq:
			cells[i] = strconv.FormatInt(it.Seq, 10)
		case keyStatus:
			cells[i] = string(it.Status)
		case keyAttempts:
			cells[i] = strconv.Itoa(it.Attempts)
		case keyError:
			cells[i] = it.LastError
		default:
			cells[i] = ""
		}
	}
	hint := 0
	return eachResultField(it, func(k string, value rawValue) error {
		j := findColumn(cols, k, hint)
		if j < 0 {
			return nil
		}
		hint = j + 1
		var err error
		cells[j], err = value.cellText()
		return err
	})
}

// findColumn returns the index of the column that shows result key k, or -1.
// The search starts at from and wraps around: result keys usually come in
// the columns' order, so each lookup typically costs one comparison.
func findColumn(cols []Column, k string, from int) int {
	n := len(cols)
	if from >= n {
		from = 0
	}
	for j := from; j < n; j++ {
		if showsResultKey(cols[j].Key, k) {
			return j
		}
	}
	for j := 0; j < from; j++ {
		if showsResultKey(cols[j].Key, k) {
			return j
		}
	}
	return -1
}
