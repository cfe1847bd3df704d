package export

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"

	"github.com/sluicehq/sluice/engine"
)

// fakeStore implements the one Store method export uses, ScanItems, over a
// slice. Every other method is the nil embedded interface's and panics.
// It does not look at ctx itself, so tests see whether export stops a scan.
type fakeStore struct {
	engine.Store
	items []*engine.Item
	// scans counts ScanItems calls; visited counts items handed to fn.
	scans, visited int
	// onItem, when set, runs before fn for each item handed out.
	onItem func(visited int)
}

// ScanItems calls fn with a copy of every item of the job in (UpdatedAt,
// ID) order, as a store does, restricted to p.Statuses when not empty.
func (f *fakeStore) ScanItems(_ context.Context, p *engine.ScanItemsParams, fn func(*engine.Item) error) error {
	f.scans++
	items := slices.Clone(f.items)
	slices.SortStableFunc(items, func(a, b *engine.Item) int {
		return cmp.Or(a.UpdatedAt.Compare(b.UpdatedAt), cmp.Compare(a.ID, b.ID))
	})
	for _, it := range items {
		if it.JobID != p.JobID {
			continue
		}
		if len(p.Statuses) > 0 && !slices.Contains(p.Statuses, it.Status) {
			continue
		}
		f.visited++
		if f.onItem != nil {
			f.onItem(f.visited)
		}
		cp := *it
		if err := fn(&cp); err != nil {
			return err
		}
	}
	return nil
}

// testJob is the job id the tests' items belong to.
const testJob = 7

// item returns an item of testJob; result "" means no result (nil).
func item(seq int64, status engine.ItemStatus, result string) *engine.Item {
	it := &engine.Item{ID: 100 + seq, JobID: testJob, Seq: seq, Status: status}
	if result != "" {
		it.Result = json.RawMessage(result)
	}
	return it
}

// keys returns the keys of cols.
func keys(cols []Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Key
	}
	return out
}

// labels returns the labels of cols.
func labels(cols []Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Label
	}
	return out
}
