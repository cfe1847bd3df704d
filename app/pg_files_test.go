package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPostgresImagesAcrossMachines: images ingested by one data directory
// (one machine) on PostgreSQL are processed by a `sluice worker` of another
// data directory after the original files are gone from the first, and
// the first machine's API serves their thumbnails and stored copies: the
// files live in the store, not on the disk of the box that ingested them.
func TestPostgresImagesAcrossMachines(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary; not in -short")
	}
	t.Parallel()
	storeURL, _ := pgStoreURL(t)
	bin := buildBinary(t)
	storeEnv := []string{"SLUICE_STORE=" + storeURL}
	pics := t.TempDir()
	writePNG(t, filepath.Join(pics, "a.png"), 640, 480)
	writePNG(t, filepath.Join(pics, "b.png"), 50, 70)
	originals := map[string][]byte{}
	for _, n := range []string{"a.png", "b.png"} {
		b, err := os.ReadFile(filepath.Join(pics, n))
		require.NoError(t, err)
		originals[n] = b
	}
	dataA, dataB := t.TempDir(), t.TempDir()

	var ing struct {
		JobID int64 `json:"jobId"`
		Items int64 `json:"items"`
	}
	out := run(t, sluiceCmd(bin, dataA, storeEnv, "ingest", pics, "--json"))
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &ing), out)
	require.Equal(t, int64(2), ing.Items)
	require.NoError(t, os.RemoveAll(pics), "the worker must not need the original files")

	run(t, sluiceCmd(bin, dataB, storeEnv, "worker", "--drain"))
	for _, d := range []string{dataA, dataB} {
		_, err := os.Stat(filepath.Join(d, "thumbs"))
		require.ErrorIs(t, err, os.ErrNotExist, "no thumbnail on a machine's disk (%s)", d)
	}

	var tok struct {
		Token string `json:"token"`
	}
	out = run(t, sluiceCmd(bin, dataA, storeEnv, "user", "token", "local", "--json"))
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &tok), out)
	base, _, wait, stop := startServe(t, bin, dataA, storeEnv, "--no-workers")
	get := func(path string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, body
	}
	resp, body := get(fmt.Sprintf("/api/jobs/%d/items?limit=10", ing.JobID))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var page struct {
		Items []struct {
			ID     int64           `json:"id"`
			Status string          `json:"status"`
			Result json.RawMessage `json:"result"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal(body, &page))
	require.Len(t, page.Items, 2, "%s", body)
	sizes := map[int]bool{}
	for _, it := range page.Items {
		require.Equal(t, "DONE", it.Status, "%s", body)
		resp, thumb := get(fmt.Sprintf("/api/items/%d/thumbnail", it.ID))
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", thumb)
		cfg, format, err := image.DecodeConfig(bytes.NewReader(thumb))
		require.NoError(t, err)
		require.Equal(t, "jpeg", format)
		require.LessOrEqual(t, max(cfg.Width, cfg.Height), 256)
		sizes[cfg.Width] = true

		resp, orig := get(fmt.Sprintf("/api/items/%d/image", it.ID))
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", orig)
		require.True(t, bytes.Equal(orig, originals["a.png"]) || bytes.Equal(orig, originals["b.png"]),
			"the stored copy is one of the ingested files")
	}
	require.Equal(t, map[int]bool{256: true, 50: true}, sizes, "one thumbnail per image, scaled")
	stop()
	require.NoError(t, wait())
}
