package export

import (
	"context"
	"io"
	"path/filepath"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// Format is an export file format.
type Format string

// The formats Write knows.
const (
	FormatCSV  Format = "csv"
	FormatXLSX Format = "xlsx"
)

// Formats lists every format.
var Formats = []Format{FormatCSV, FormatXLSX}

// ParseFormat parses a format name, ignoring case.
func ParseFormat(s string) (Format, error) {
	f := Format(strings.ToLower(strings.TrimSpace(s)))
	switch f {
	case FormatCSV, FormatXLSX:
		return f, nil
	}
	return "", engine.Errorf(engine.EINVALID, "export format %q is not supported (csv, xlsx)", s)
}

// FormatOf returns the format a file name asks for by its extension:
// xlsx for ".xlsx" (any case), csv for anything else.
func FormatOf(name string) Format {
	if strings.EqualFold(filepath.Ext(name), ".xlsx") {
		return FormatXLSX
	}
	return FormatCSV
}

// ContentType is the format's media type, for an HTTP response.
func (f Format) ContentType() string {
	if f == FormatXLSX {
		return "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
	}
	return "text/csv; charset=utf-8"
}

// Ext is the format's file name extension, with its dot.
func (f Format) Ext() string { return "." + string(f) }

// Write writes a job's export in format ("csv" or "xlsx", any case) to w:
// WriteCSV or WriteXLSX, with their contracts. An unknown format is
// EINVALID, with nothing read or written.
func Write(ctx context.Context, s engine.Store, jobID int64, statuses []engine.ItemStatus, format Format, w io.Writer) (int64, error) {
	f, err := ParseFormat(string(format))
	if err != nil {
		return 0, err
	}
	if f == FormatXLSX {
		return WriteXLSX(ctx, s, jobID, statuses, w)
	}
	return WriteCSV(ctx, s, jobID, statuses, w)
}
