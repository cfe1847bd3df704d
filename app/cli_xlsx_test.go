package app_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xuri/excelize/v2"
)

// TestCLIIngestXLSX: a workbook is detected by its content and its first
// sheet (or --sheet) ingested with the same semantics as CSV.
func TestCLIIngestXLSX(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	path := filepath.Join(t.TempDir(), "products.xlsx")
	f := excelize.NewFile()
	require.NoError(t, f.SetSheetRow("Sheet1", "A1", &[]any{"SKU", "Product Name", "Price"}))
	require.NoError(t, f.SetSheetRow("Sheet1", "A2", &[]any{"A1", " Kettle ", 12.5}))
	require.NoError(t, f.SetSheetRow("Sheet1", "A3", &[]any{"A2", "Toaster"}))
	_, err := f.NewSheet("Other")
	require.NoError(t, err)
	require.NoError(t, f.SetSheetRow("Other", "A1", &[]any{"code"}))
	require.NoError(t, f.SetSheetRow("Other", "A2", &[]any{"x"}))
	require.NoError(t, f.SaveAs(path))
	require.NoError(t, f.Close())

	var ing struct {
		Items int64  `json:"items"`
		State string `json:"state"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("ingest", path, "--wait", "--json")), &ing))
	require.Equal(t, int64(2), ing.Items)
	require.Equal(t, "DONE", ing.State)
	out := c.ok("export", "1", "-o", "-")
	require.Contains(t, out, "Seq,Status,Attempts,Error,sku,product_name,price\n")
	require.Contains(t, out, "1,DONE,1,,A1,Kettle,12.5\n")
	require.Contains(t, out, "2,DONE,1,,A2,Toaster,\n")

	require.NoError(t, json.Unmarshal([]byte(c.ok("ingest", path, "--sheet", "Other", "--json")), &ing))
	require.Equal(t, int64(1), ing.Items)
	code, _, errs := c.run("ingest", path, "--sheet", "Missing")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "Missing")
}
