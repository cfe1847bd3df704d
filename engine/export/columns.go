package export

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// Column is one grid column.
type Column struct {
	// Key identifies the column: "seq", "status", "attempts", "error", or
	// the result key it shows ("result.<k>" when <k> is a fixed key or
	// itself starts with "result.").
	Key string `json:"key"`
	// Label is the column's header text.
	Label string `json:"label"`
}

// Keys of the fixed columns.
const (
	keySeq      = "seq"
	keyStatus   = "status"
	keyAttempts = "attempts"
	keyError    = "error"
)

// resultPrefix marks a column key that names a result key which could be
// mistaken for a fixed key.
const resultPrefix = "result."

// fixedColumns are the columns every job has, in order.
var fixedColumns = []Column{
	{Key: keySeq, Label: "Seq"},
	{Key: keyStatus, Label: "Status"},
	{Key: keyAttempts, Label: "Attempts"},
	{Key: keyError, Label: "Error"},
}

// isFixed reports whether k is the key of a fixed column.
func isFixed(k string) bool {
	switch k {
	case keySeq, keyStatus, keyAttempts, keyError:
		return true
	}
	return false
}

// resultColumn returns the column that shows result key k.
func resultColumn(k string) Column {
	c := Column{Key: k, Label: k}
	if isFixed(k) || strings.HasPrefix(k, resultPrefix) {
		c.Key = resultPrefix + k
	}
	for _, f := range fixedColumns {
		if strings.EqualFold(k, f.Key) {
			c.Label = k + " (result)"
			break
		}
	}
	return c
}

// showsResultKey reports whether the column with key colKey shows result key
// k; it inverts resultColumn without allocating.
func showsResultKey(colKey, k string) bool {
	if len(colKey) == len(k) {
		return colKey == k && !isFixed(k) && !strings.HasPrefix(k, resultPrefix)
	}
	return len(colKey) == len(resultPrefix)+len(k) &&
		strings.HasPrefix(colKey, resultPrefix) && colKey[len(resultPrefix):] == k
}

// Columns returns the grid's columns for a job's items in one of statuses
// (nil or empty: every item), in order: seq, status, attempts, error, then
// one column per result key in first-seen order (see the package
// documentation for the order, keys and labels). It reads every matching
// item once, keeping only the set of keys seen; the files' columns are
// found the same way in the same pass that renders their rows.
//
// Columns fails if an item's Result is not valid JSON or is neither a JSON
// object nor null.
func Columns(ctx context.Context, s engine.Store, jobID int64, statuses []engine.ItemStatus) ([]Column, error) {
	cols := append([]Column(nil), fixedColumns...)
	seen := make(map[string]struct{})
	err := streamItems(ctx, s, jobID, statuses, func(it *engine.Item) error {
		return eachOwnResultField(it, func(k string, _ rawValue) error {
			if _, dup := seen[k]; dup {
				return nil
			}
			k = strings.Clone(k) // k may point into the whole Result
			seen[k] = struct{}{}
			cols = append(cols, resultColumn(k))
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return cols, nil
}

// itemError wraps an error about one item's Result. The export's scan may
// leave the item's ID zero (see engine.ScanItemsParams.GridOnly); the seq
// names the item within its job, and is the row of the input file.
func itemError(it *engine.Item, err error) error {
	if it.ID == 0 {
		return fmt.Errorf("export: job %d item seq %d: %w", it.JobID, it.Seq, err)
	}
	return fmt.Errorf("export: job %d item %d (seq %d): %w", it.JobID, it.ID, it.Seq, err)
}
