package app_test

import (
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func writePNG(t *testing.T, path string, w, h int) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := 0; x < w; x++ {
		img.Set(x, x%h, color.RGBA{R: uint8(x), G: 100, B: 200, A: 255})
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o600))
}

// TestCLIIngestImages: a folder of images becomes one job through the
// built-in image pipeline; a corrupt image fails only its own item; a CSV
// given alongside is its own job.
func TestCLIIngestImages(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	writePNG(t, filepath.Join(dir, "a.png"), 64, 48)
	writePNG(t, filepath.Join(dir, "nested", "b.png"), 20, 20)
	var good bytes.Buffer
	require.NoError(t, png.Encode(&good, image.NewRGBA(image.Rect(0, 0, 30, 30))))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken.png"), good.Bytes()[:40], 0o600)) // header only
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not an image"), 0o600))
	csv := c.file("rows.csv", "a\n1\n")

	out := c.ok("ingest", dir, csv, "--wait")
	require.Contains(t, out, "job 1: 1 items from")
	require.Contains(t, out, "job 2: 3 images")

	var job struct {
		Pipeline string           `json:"pipeline"`
		State    string           `json:"state"`
		Counts   map[string]int64 `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("job", "2", "--json")), &job))
	require.Equal(t, "image", job.Pipeline)
	require.Equal(t, "DONE", job.State)
	require.Equal(t, int64(2), job.Counts["DONE"])
	require.Equal(t, int64(1), job.Counts["ERROR"])

	export := c.ok("export", "2", "-o", "-")
	require.Contains(t, export, "format,width,height,sha256,phash,thumbnail")
	require.Contains(t, export, ",png,64,48,")
	require.Contains(t, export, "truncated or corrupt image")
	require.Equal(t, 2, strings.Count(export, ",jobs/2/thumbs/"), "thumbnails are kept in the store: %s", export)
	_, err := os.Stat(filepath.Join(c.data, "thumbs"))
	require.ErrorIs(t, err, os.ErrNotExist, "no thumbnail only on this machine's disk")
}
