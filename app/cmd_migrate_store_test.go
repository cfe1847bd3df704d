package app_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMigrateStoreCLI: an appliance's data directory, filled through the
// CLI (a CSV job processed, an image job with stored files, an account and
// a token), is copied into PostgreSQL; the counts come out equal, and the
// same CLI then works on the PostgreSQL store.
func TestMigrateStoreCLI(t *testing.T) {
	storeURL, _ := pgStoreURL(t)
	t.Parallel()
	c := newCLI(t)
	csv := c.file("rows.csv", "sku,name\nA1,one\nA2,two\nA3,three\n")
	dir := t.TempDir()
	writePNG(t, dir+"/a.png", 30, 20)
	c.ok("ingest", csv, dir, "--wait")
	c.ok("user", "add", "ann")

	code, _, errs := c.run("migrate-store", "--to", "mysql://x")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--to: give the target as a postgres:// URL")

	code, out, errs := c.run("migrate-store", "--from", c.data, "--to", storeURL, "--json", "--batch", "2")
	require.Equal(t, 0, code, errs)
	require.Equal(t, 1, strings.Count(errs, "copying job_items: 4 of 4 rows\n"), errs)
	var res struct {
		OK     bool `json:"ok"`
		Counts []struct {
			Table          string
			Source, Target int64
		} `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &res), out)
	require.True(t, res.OK, out)
	byTable := map[string]int64{}
	for _, ct := range res.Counts {
		require.Equal(t, ct.Source, ct.Target, ct.Table)
		byTable[ct.Table] = ct.Target
	}
	require.Equal(t, int64(4), byTable["job_items"], "3 rows and 1 image")
	require.Equal(t, int64(2), byTable["blobs"], "the image and its thumbnail")

	out = c.ok("--store", storeURL, "jobs", "--json")
	require.Contains(t, out, `"rows.csv"`)
	out = c.ok("--store", storeURL, "export", "2", "-o", "-")
	require.Contains(t, out, ",png,30,20,")
	require.Contains(t, out, ",jobs/2/thumbs/")

	out = c.ok("migrate-store", "--to", storeURL)
	require.Contains(t, out, "0 rows copied (continuing an earlier run)")
	require.Contains(t, out, "job_items")
}
