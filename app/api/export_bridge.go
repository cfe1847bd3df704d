package api

import (
	"context"
	"io"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/export"
)

// exportWrite writes the grid in a format.
func exportWrite(ctx context.Context, st engine.Store, jobID int64, sts []engine.ItemStatus, format string, w io.Writer) (int64, error) {
	if format != "csv" {
		return 0, engine.Errorf(engine.EINVALID, "format: %q export is not available yet", format)
	}
	return export.WriteCSV(ctx, st, jobID, sts, w)
}
