package imageproc

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProcessExif(t *testing.T) {
	t.Parallel()
	dir, data := t.TempDir(), t.TempDir()
	jpg := encodeJPEG(t, gradient(200, 100, 1))
	p := newProc(t, Config{ThumbDir: filepath.Join(data, "thumbs")}, "")

	for name, bo := range map[string]order{"le": binary.LittleEndian, "be": binary.BigEndian} {
		path := writeFile(t, dir, name+".jpg", withExif(t, jpg, bo, 6, false))
		r, err := run(t, p, path)
		require.NoError(t, err, name)
		require.Equal(t, "jpeg", r["format"])
		require.EqualValues(t, 200, r["width"], "stored dimensions")
		require.EqualValues(t, 100, r["height"])
		require.Equal(t, "2024:05:01 10:00:00", r["exifDate"], "DateTimeOriginal wins over DateTime")
		require.Equal(t, "Canon EOS R5", r["camera"])
		require.EqualValues(t, 6, r["orientation"])
		require.InDelta(t, 48.0+51.0/60+24.0/3600, r["gpsLat"], 1e-9)
		require.InDelta(t, 2.0+21.0/60+3.0/3600, r["gpsLon"], 1e-9)
		w, h := thumbDims(t, data, r["thumbnail"].(string))
		require.Equal(t, [2]int{100, 200}, [2]int{w, h}, "thumbnail turned upright")
	}

	south := writeFile(t, dir, "south.jpg", withExif(t, jpg, binary.BigEndian, 1, true))
	r, err := run(t, p, south)
	require.NoError(t, err)
	require.Less(t, r["gpsLat"], 0.0)
	require.Less(t, r["gpsLon"], 0.0)
	w, h := thumbDims(t, data, r["thumbnail"].(string))
	require.Equal(t, [2]int{200, 100}, [2]int{w, h})
}

func TestParseTIFFBroken(t *testing.T) {
	t.Parallel()
	good := withExif(t, encodeJPEG(t, gradient(8, 8, 1)), binary.LittleEndian, 3, false)
	// The TIFF body starts after SOI, APP1 marker, length and "Exif\0\0".
	body := good[2+4+6:]
	for n := range 200 {
		_ = parseTIFF(body[:n]) // must not panic on any truncation
	}
	require.Equal(t, exifInfo{}, parseTIFF([]byte("XX*\x00\x08\x00\x00\x00")))
	bad := append([]byte{}, body[:200]...)
	binary.LittleEndian.PutUint32(bad[4:], 0xFFFFFF00) // IFD0 far outside
	require.Equal(t, exifInfo{}, parseTIFF(bad))

	m := scanJPEG(bytes.NewReader(good))
	require.Equal(t, 3, m.exif.orientation)
	require.False(t, m.progressive)
	i := bytes.Index(good, []byte{0xFF, 0xC0}) // baseline SOF → progressive
	require.Positive(t, i)
	prog := append([]byte{}, good...)
	prog[i+1] = 0xC2
	require.True(t, scanJPEG(bytes.NewReader(prog)).progressive)
}

func TestOrient(t *testing.T) {
	t.Parallel()
	// A 3×2 image whose pixel at (x, y) has R = 10*x + y.
	src := image.NewRGBA(image.Rect(0, 0, 3, 2))
	for y := range 2 {
		for x := range 3 {
			src.Set(x, y, color.RGBA{R: uint8(10*x + y), A: 255})
		}
	}
	at := func(img *image.RGBA, x, y int) uint8 { return img.RGBAAt(x, y).R }
	cases := map[int]struct {
		w, h int
		// pixel the source's top-left (0,0) and top-right (2,0) land on.
		tl, tr [2]int
	}{
		1: {3, 2, [2]int{0, 0}, [2]int{2, 0}},
		2: {3, 2, [2]int{2, 0}, [2]int{0, 0}},
		3: {3, 2, [2]int{2, 1}, [2]int{0, 1}},
		4: {3, 2, [2]int{0, 1}, [2]int{2, 1}},
		5: {2, 3, [2]int{0, 0}, [2]int{0, 2}},
		6: {2, 3, [2]int{1, 0}, [2]int{1, 2}},
		7: {2, 3, [2]int{1, 2}, [2]int{1, 0}},
		8: {2, 3, [2]int{0, 2}, [2]int{0, 0}},
	}
	for o, c := range cases {
		out := orient(src, o)
		require.Equal(t, [2]int{c.w, c.h}, [2]int{out.Rect.Dx(), out.Rect.Dy()}, o)
		require.Equal(t, uint8(0), at(out, c.tl[0], c.tl[1]), o)
		require.Equal(t, uint8(20), at(out, c.tr[0], c.tr[1]), o)
	}
}

func TestDHashAndFit(t *testing.T) {
	t.Parallel()
	require.Equal(t, "0000000000000000", dHash(image.NewRGBA(image.Rect(0, 0, 1, 1))))
	img := gradient(64, 64, 1)
	require.Equal(t, dHash(img), dHash(shrink(img, 32, 32)), "hash survives a rescale")

	for _, c := range [][5]int{
		{4000, 3000, 256, 256, 192},
		{3000, 4000, 256, 192, 256},
		{100, 50, 256, 100, 50},
		{10000, 1, 256, 256, 1},
	} {
		w, h := fitInside(c[0], c[1], c[2])
		require.Equal(t, [2]int{c[3], c[4]}, [2]int{w, h}, c)
	}
}
