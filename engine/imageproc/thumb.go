package imageproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/draw"
	"image/jpeg"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/sluicehq/sluice/engine"
)

// ThumbQuality is the JPEG quality of thumbnails.
const ThumbQuality = 80

// fitInside returns the size of a w×h image scaled so that its longest side
// is at most limit, keeping the aspect ratio (never enlarging, never zero).
func fitInside(w, h, limit int) (int, int) {
	if w <= limit && h <= limit {
		return w, h
	}
	if w >= h {
		return limit, max(1, int(int64(h)*int64(limit)/int64(w)))
	}
	return max(1, int(int64(w)*int64(limit)/int64(h))), limit
}

// shrink scales img down to tw×th (not larger than img) by averaging the
// source pixels of each target pixel (a box filter), converting one source
// row at a time so that it needs no second full-size buffer. Transparent
// pixels are composited over white.
func shrink(img image.Image, tw, th int) *image.RGBA {
	b := img.Bounds()
	sw, sh := b.Dx(), b.Dy()
	tw, th = min(tw, sw), min(th, sh)
	row := image.NewRGBA(image.Rect(0, 0, sw, 1))
	xmap := make([]int, sw)
	binW := make([]uint64, tw)
	for x := range sw {
		xmap[x] = x * tw / sw
		binW[xmap[x]]++
	}
	out := image.NewRGBA(image.Rect(0, 0, tw, th))
	sums := make([]uint64, tw*4)
	rows, cur := uint64(0), 0
	flush := func() {
		if rows == 0 {
			return
		}
		dst := out.Pix[cur*out.Stride : cur*out.Stride+tw*4]
		for ox := range tw {
			n := binW[ox] * rows
			s := sums[ox*4 : ox*4+4]
			a := s[3] / n
			for c := range 3 {
				dst[ox*4+c] = uint8(min(255, s[c]/n+255-a))
			}
			dst[ox*4+3] = 255
		}
		clear(sums)
		rows = 0
	}
	for y := range sh {
		oy := y * th / sh
		if oy != cur {
			flush()
			cur = oy
		}
		draw.Draw(row, row.Rect, img, image.Pt(b.Min.X, b.Min.Y+y), draw.Src)
		pix := row.Pix
		for x := range sw {
			s := sums[xmap[x]*4:]
			p := pix[x*4 : x*4+4]
			s[0] += uint64(p[0])
			s[1] += uint64(p[1])
			s[2] += uint64(p[2])
			s[3] += uint64(p[3])
		}
		rows++
	}
	flush()
	return out
}

// orient applies an EXIF orientation (1..8) to img; other values leave it
// as it is.
func orient(img *image.RGBA, o int) *image.RGBA {
	if o < 2 || o > 8 {
		return img
	}
	w, h := img.Rect.Dx(), img.Rect.Dy()
	dw, dh := w, h
	if o >= 5 {
		dw, dh = h, w
	}
	out := image.NewRGBA(image.Rect(0, 0, dw, dh))
	for y := range h {
		for x := range w {
			var dx, dy int
			switch o {
			case 2: // mirrored horizontally
				dx, dy = w-1-x, y
			case 3: // rotated 180°
				dx, dy = w-1-x, h-1-y
			case 4: // mirrored vertically
				dx, dy = x, h-1-y
			case 5: // transposed
				dx, dy = y, x
			case 6: // needs a 90° clockwise turn
				dx, dy = h-1-y, x
			case 7: // transversed
				dx, dy = h-1-y, w-1-x
			case 8: // needs a 90° counter-clockwise turn
				dx, dy = y, w-1-x
			}
			copy(out.Pix[out.PixOffset(dx, dy):][:4], img.Pix[img.PixOffset(x, y):][:4])
		}
	}
	return out
}

// dHash is the 64-bit difference hash of img as 16 hex digits: the image is
// reduced to 9×8 gray cells (area average), and each bit says whether a
// cell is brighter than its right neighbour.
func dHash(img *image.RGBA) string {
	const gw, gh = 9, 8
	w, h := img.Rect.Dx(), img.Rect.Dy()
	var gray [gh][gw]uint64
	for cy := range gh {
		y0, y1 := span(cy, gh, h)
		for cx := range gw {
			x0, x1 := span(cx, gw, w)
			var sum uint64
			for y := y0; y < y1; y++ {
				for x := x0; x < x1; x++ {
					p := img.Pix[img.PixOffset(x, y):]
					sum += 299*uint64(p[0]) + 587*uint64(p[1]) + 114*uint64(p[2])
				}
			}
			gray[cy][cx] = sum / uint64((y1-y0)*(x1-x0))
		}
	}
	var bits uint64
	for cy := range gh {
		for cx := range gw - 1 {
			bits <<= 1
			if gray[cy][cx] > gray[cy][cx+1] {
				bits |= 1
			}
		}
	}
	return fmt.Sprintf("%016x", bits)
}

// span returns the source range [lo, hi) of cell i of n cells over size
// pixels; it is never empty.
func span(i, n, size int) (int, int) {
	lo, hi := i*size/n, (i+1)*size/n
	if hi <= lo {
		hi = min(lo+1, size)
		if hi == lo {
			lo = hi - 1
		}
	}
	return lo, hi
}

// writeThumb writes img as a JPEG to name unless that file exists: into a
// temporary file in the same directory (mode 0600, directory 0700) that is
// then renamed, so that a reader never sees half a thumbnail.
func writeThumb(name string, img image.Image) (err error) {
	if _, err := os.Stat(name); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	dir := filepath.Dir(name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".thumb-*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriter(tmp)
	if err := jpeg.Encode(w, img, &jpeg.Options{Quality: ThumbQuality}); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}

// saveThumb stores the thumbnail of an analysed image and names it in
// res.Thumbnail: in the blob store under the item's job when the processor
// has one (so the API of any machine can serve it), else under ThumbDir.
// A thumbnail already stored is not written again.
func (p *Processor) saveThumb(ctx context.Context, it *engine.Item, res *Result, small image.Image) error {
	file := p.thumbName(res.SHA256)
	if p.cfg.Blobs != nil {
		var job int64
		key := "thumbs/" + file
		if it != nil && it.JobID != 0 {
			job, key = it.JobID, engine.JobBlobKey(it.JobID, key)
		}
		if _, err := p.cfg.Blobs.StatBlob(ctx, key); err == nil {
			res.Thumbnail = key
			return nil
		} else if !engine.IsNotFound(err) {
			return err
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, small, &jpeg.Options{Quality: ThumbQuality}); err != nil {
			return err
		}
		if _, err := p.cfg.Blobs.PutBlob(ctx, &engine.PutBlobParams{Key: key, JobID: job, MediaType: "image/jpeg",
			Body: &buf, Now: p.cfg.Now()}); err != nil {
			return err
		}
		res.Thumbnail = key
		return nil
	}
	if p.cfg.ThumbDir == "" {
		return nil
	}
	if err := writeThumb(filepath.Join(p.cfg.ThumbDir, file), small); err != nil {
		return err
	}
	res.Thumbnail = path.Join(filepath.Base(filepath.Clean(p.cfg.ThumbDir)), file)
	return nil
}
