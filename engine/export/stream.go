package export

import (
	"context"

	"github.com/sluicehq/sluice/engine"
)

// batchSize is how many items the scanning goroutine hands over at once.
const batchSize = 256

// streamItems scans a job's items in one of statuses (the grid's fields
// only, in the grid's order) and calls fn for each on the caller's
// goroutine. The store is read on another goroutine, a few batches ahead,
// so the scan and fn use both cores; fn sees the items in scan order.
//
// It stops at the first error: ctx cancelled (checked before every item),
// fn's, or the store's. The scan is stopped, and waited for, before it
// returns.
func streamItems(ctx context.Context, s engine.Store, jobID int64, statuses []engine.ItemStatus, fn func(*engine.Item) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []*engine.Item, 4)
	scanned := make(chan error, 1)
	go func() {
		defer close(batches)
		batch := make([]*engine.Item, 0, batchSize)
		send := func() error {
			select {
			case batches <- batch:
				batch = make([]*engine.Item, 0, batchSize)
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		p := &engine.ScanItemsParams{JobID: jobID, Statuses: statuses, GridOnly: true}
		err := s.ScanItems(ctx, p, func(it *engine.Item) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			batch = append(batch, it)
			if len(batch) == batchSize {
				return send()
			}
			return nil
		})
		if err == nil && len(batch) > 0 {
			err = send()
		}
		scanned <- err
	}()
	var err error
	for batch := range batches {
		if err != nil {
			continue // the scan is being stopped; let it finish
		}
		for _, it := range batch {
			if err = ctx.Err(); err == nil {
				err = fn(it)
			}
			if err != nil {
				cancel()
				break
			}
		}
	}
	if scanErr := <-scanned; err == nil {
		err = scanErr
	}
	return err
}
