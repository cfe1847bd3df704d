package api

import (
	"context"
	"io"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/export"
)

// exportWrite writes the grid in a format ("csv" or "xlsx").
func exportWrite(ctx context.Context, st engine.Store, jobID int64, sts []engine.ItemStatus, format string, w io.Writer) (int64, error) {
	f, err := export.ParseFormat(format)
	if err != nil {
		return 0, engine.FieldErrorf("format", "%s", engine.ErrorMessage(err))
	}
	return export.Write(ctx, st, jobID, sts, f, w)
}
