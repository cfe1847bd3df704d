package imageproc

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/gif"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/stretchr/testify/require"
)

// thumbSize decodes the thumbnail at the data-dir-relative rel and returns
// its dimensions.
func thumbDims(t *testing.T, dataDir, rel string) (int, int) {
	t.Helper()
	f, err := os.Open(filepath.Join(dataDir, filepath.FromSlash(rel)))
	require.NoError(t, err)
	defer f.Close()
	cfg, format, err := image.DecodeConfig(f)
	require.NoError(t, err)
	require.Equal(t, "jpeg", format)
	return cfg.Width, cfg.Height
}

func TestProcessStableAndDistinct(t *testing.T) {
	t.Parallel()
	dir, data := t.TempDir(), t.TempDir()
	jpgA := encodeJPEG(t, gradient(640, 480, 1))
	a := writeFile(t, dir, "a.jpg", jpgA)
	a2 := writeFile(t, dir, "a-copy.jpg", jpgA)
	b := writeFile(t, dir, "b.jpg", encodeJPEG(t, gradient(640, 480, 5)))
	c := writeFile(t, dir, "c.png", encodePNG(t, gradient(300, 700, 2)))
	p := newProc(t, Config{ThumbDir: filepath.Join(data, "thumbs")}, "")

	ra, err := run(t, p, a)
	require.NoError(t, err)
	sum := sha256.Sum256(jpgA)
	require.Equal(t, "jpeg", ra["format"])
	require.EqualValues(t, 640, ra["width"])
	require.EqualValues(t, 480, ra["height"])
	require.Equal(t, hex.EncodeToString(sum[:]), ra["sha256"])
	require.Len(t, ra["phash"], 16)
	require.Equal(t, "thumbs/"+ra["sha256"].(string)+".jpg", ra["thumbnail"])
	for _, k := range []string{"exifDate", "camera", "orientation", "gpsLat", "gpsLon"} {
		require.NotContains(t, ra, k, "no EXIF, no key")
	}
	w, h := thumbDims(t, data, ra["thumbnail"].(string))
	require.Equal(t, [2]int{256, 192}, [2]int{w, h})
	st, err := os.Stat(filepath.Join(data, "thumbs", ra["sha256"].(string)+".jpg"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	st, err = os.Stat(filepath.Join(data, "thumbs"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm())

	again, err := run(t, p, a2) // same bytes, thumbnail exists already
	require.NoError(t, err)
	require.Equal(t, ra, again)

	rb, err := run(t, p, b)
	require.NoError(t, err)
	require.NotEqual(t, ra["sha256"], rb["sha256"])
	require.NotEqual(t, ra["phash"], rb["phash"])

	rc, err := run(t, p, c)
	require.NoError(t, err)
	require.Equal(t, "png", rc["format"])
	require.EqualValues(t, 300, rc["width"])
	require.EqualValues(t, 700, rc["height"])
	w, h = thumbDims(t, data, rc["thumbnail"].(string))
	require.Equal(t, [2]int{109, 256}, [2]int{w, h})
	left, err := filepath.Glob(filepath.Join(data, "thumbs", ".thumb-*"))
	require.NoError(t, err)
	require.Empty(t, left, "no temporary files left")
}

func TestProcessThumbSizeOverrideAndNoThumbs(t *testing.T) {
	t.Parallel()
	dir, data := t.TempDir(), t.TempDir()
	var g bytes.Buffer
	require.NoError(t, gif.Encode(&g, gradient(100, 50, 3), nil))
	small := writeFile(t, dir, "small.gif", g.Bytes())
	big := writeFile(t, dir, "big.png", encodePNG(t, gradient(400, 200, 3)))

	p := newProc(t, Config{ThumbDir: filepath.Join(data, "thumbs")}, `{"thumbSize": 64}`)
	r, err := run(t, p, big)
	require.NoError(t, err)
	require.Equal(t, "thumbs/"+r["sha256"].(string)+"-64.jpg", r["thumbnail"])
	w, h := thumbDims(t, data, r["thumbnail"].(string))
	require.Equal(t, [2]int{64, 32}, [2]int{w, h})

	r, err = run(t, p, small) // smaller than the thumbnail size: not enlarged
	require.NoError(t, err)
	require.Equal(t, "gif", r["format"])
	w, h = thumbDims(t, data, r["thumbnail"].(string))
	require.Equal(t, [2]int{64, 32}, [2]int{w, h})

	none := newProc(t, Config{}, "")
	r, err = run(t, none, big)
	require.NoError(t, err)
	require.NotContains(t, r, "thumbnail")
	require.Len(t, r["phash"], 16)
}

// TestProcessRejectsBombBeforeDecoding is not parallel so that the
// allocation count it reads is its own.
func TestProcessRejectsBombBeforeDecoding(t *testing.T) {
	dir := t.TempDir()
	bomb := writeFile(t, dir, "bomb.png", bombPNG(100000, 100000))
	p := newProc(t, Config{ThumbDir: filepath.Join(dir, "thumbs")}, "")

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := run(t, p, bomb)
	runtime.ReadMemStats(&after)
	require.Error(t, err)
	require.Equal(t, engine.ClassPermanent, engine.ClassOf(err))
	require.Contains(t, err.Error(), "png declares 100000×100000 = 10000000000 pixels")
	require.Contains(t, err.Error(), "decompression bomb")
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "nothing large allocated")

	// A lower limit applies to ordinary images too.
	ok := writeFile(t, dir, "ok.png", encodePNG(t, gradient(20, 20, 1)))
	_, err = run(t, newProc(t, Config{MaxPixels: 399}, ""), ok)
	require.ErrorContains(t, err, "more than the limit of 399")
}

func TestProcessBadFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jpg := encodeJPEG(t, gradient(200, 200, 1))
	truncated := writeFile(t, dir, "cut.jpg", jpg[:len(jpg)/2])
	headerOnly := writeFile(t, dir, "head.png", encodePNG(t, gradient(50, 50, 1))[:20])
	text := writeFile(t, dir, "notes.txt", []byte("just some text, not an image\n"))
	empty := writeFile(t, dir, "empty.jpg", nil)
	missing := filepath.Join(dir, "nope", "missing.jpg")
	p := newProc(t, Config{ThumbDir: filepath.Join(dir, "thumbs")}, "")

	cases := []struct {
		name, path, want string
	}{
		{"truncated jpeg", truncated, "truncated or corrupt image: "},
		{"truncated png header", headerOnly, "truncated or corrupt image: "},
		{"text", text, "not an image (unknown format)"},
		{"empty", empty, "not an image (unknown format)"},
		{"missing", missing, "file not found: " + missing},
		{"directory", dir, "is not a regular file"},
	}
	for _, c := range cases {
		_, err := run(t, p, c.path)
		require.ErrorContains(t, err, c.want, c.name)
		require.Equal(t, engine.ClassPermanent, engine.ClassOf(err), c.name)
	}

	_, err := run(t, newProc(t, Config{MaxFileBytes: 100}, ""), writeFile(t, dir, "a.jpg", jpg))
	require.ErrorContains(t, err, "more than the limit of 100")
	require.Equal(t, engine.ClassPermanent, engine.ClassOf(err))

	for _, in := range []string{`{"name":"x.jpg","size":3}`, `[1,2]`} {
		_, err := p.Process(t.Context(), &engine.Task{Item: &engine.Item{}, Input: []byte(in)})
		require.Error(t, err, in)
		require.Equal(t, engine.ClassPermanent, engine.ClassOf(err), in)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	f := New(Config{})
	for _, ok := range []string{"", "null", "{}", `{"thumbSize":16}`, `{"thumbSize":2048}`} {
		_, err := f([]byte(ok))
		require.NoError(t, err, ok)
	}
	for cfg, want := range map[string]string{
		`{"thumbSize":8}`:    "thumbSize: must be between 16 and 2048, got 8",
		`{"thumbSize":5000}`: "thumbSize: must be between",
		`{"thumbSize":-1}`:   "thumbSize: must be between",
		`{"thumbSize":"x"}`:  "thumbSize",
		`{"thumb":1}`:        `unknown field "thumb"`,
		`[`:                  "image:",
	} {
		_, err := f([]byte(cfg))
		require.Error(t, err, cfg)
		require.Equal(t, engine.EINVALID, engine.ErrorCode(err), cfg)
		require.ErrorContains(t, err, want, cfg)
	}
}

// BenchmarkProcessJPEG4000x3000 processes a 12-megapixel JPEG per
// iteration; -benchmem shows the memory one item allocates.
func BenchmarkProcessJPEG4000x3000(b *testing.B) {
	dir := b.TempDir()
	path := writeFile(b, dir, "big.jpg", encodeJPEG(b, gradient(4000, 3000, 7)))
	p := newProc(b, Config{ThumbDir: filepath.Join(dir, "thumbs")}, "")
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := run(b, p, path); err != nil {
				b.Error(err)
			}
		}
	})
}
