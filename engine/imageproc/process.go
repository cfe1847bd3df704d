package imageproc

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"io/fs"
	"os"

	// Standard library decoders.
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"

	"github.com/sluicehq/sluice/engine"
	"golang.org/x/sync/semaphore"
)

// Processor is the image processor built by the factory New returns. It is
// safe for concurrent use.
type Processor struct {
	cfg       Config
	budget    *semaphore.Weighted
	thumbSize int
}

// Input is the part of an image item's input the processor reads.
type Input struct {
	// Blob is the key of the image in the store's blob store (where
	// ingest puts it, so that a worker on any machine can read it).
	Blob string `json:"blob,omitempty"`
	// Path is the absolute path of the image file; read only when Blob is
	// empty (items ingested before images were kept in the store).
	Path string `json:"path"`
}

// Result is the result object of an image stage; its keys become grid
// columns. EXIF keys are omitted when the image has no such tag.
type Result struct {
	// Format is the decoder's name: jpeg, png, gif, webp, bmp or tiff.
	Format string `json:"format"`
	// Width and Height are the stored dimensions (before EXIF orientation).
	Width  int `json:"width"`
	Height int `json:"height"`
	// SHA256 is the hex sha256 of the file.
	SHA256 string `json:"sha256"`
	// PHash is the 64-bit difference hash of the oriented image, 16 hex
	// digits; similar images have hashes at a small Hamming distance.
	PHash string `json:"phash"`
	// Thumbnail is the thumbnail's blob key ("jobs/<job>/thumbs/<sha256>.jpg")
	// when the processor has a blob store, else its path relative to the
	// data directory ("thumbs/<sha256>.jpg"); absent when thumbnails are off.
	Thumbnail string `json:"thumbnail,omitempty"`
	// ExifDate is DateTimeOriginal (or DateTime) as written by the camera.
	ExifDate string `json:"exifDate,omitempty"`
	// Camera is "Make Model".
	Camera string `json:"camera,omitempty"`
	// Orientation is the EXIF orientation, 1..8.
	Orientation int `json:"orientation,omitempty"`
	// GPSLat and GPSLon are the position in decimal degrees.
	GPSLat *float64 `json:"gpsLat,omitempty"`
	GPSLon *float64 `json:"gpsLon,omitempty"`
}

// Process implements engine.Processor for one image item.
func (p *Processor) Process(ctx context.Context, t *engine.Task) (json.RawMessage, error) {
	var in Input
	if err := json.Unmarshal(t.Input, &in); err != nil {
		return nil, engine.Permanent(fmt.Errorf("image: input is not a JSON object: %v", err))
	}
	var res *Result
	var err error
	switch {
	case in.Blob != "" && p.cfg.Blobs != nil:
		res, err = p.processBlob(ctx, t.Item, in.Blob)
	case in.Blob != "":
		return nil, engine.Permanent(errors.New("image: the input is a stored blob but this processor has no blob store"))
	case in.Path != "":
		res, err = p.processFile(ctx, t.Item, in.Path)
	default:
		return nil, engine.Permanent(errors.New(`image: input has no "blob" or "path" field`))
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// processBlob does the work of Process for the stored blob under key.
func (p *Processor) processBlob(ctx context.Context, it *engine.Item, key string) (*Result, error) {
	r, err := p.cfg.Blobs.OpenBlob(ctx, key)
	if err != nil {
		if engine.IsNotFound(err) {
			return nil, engine.Permanent(fmt.Errorf("image: stored file not found: %s", key))
		}
		return nil, fmt.Errorf("image: open %s: %w", key, err)
	}
	defer r.Close()
	return p.processReader(ctx, it, key, r, r.Size())
}

// processFile does the work of Process for the file at name.
func (p *Processor) processFile(ctx context.Context, it *engine.Item, name string) (*Result, error) {
	f, err := os.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, engine.Permanent(fmt.Errorf("image: file not found: %s", name))
		}
		return nil, engine.Permanent(fmt.Errorf("image: cannot open %s: %v", name, unwrapPath(err)))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("image: stat %s: %v", name, unwrapPath(err))
	}
	if !st.Mode().IsRegular() {
		return nil, engine.Permanent(fmt.Errorf("image: %s is not a regular file", name))
	}
	return p.processReader(ctx, it, name, f, st.Size())
}

// processReader analyses the image read by f (size bytes, named name in
// errors): it seeks back to the start between its passes.
func (p *Processor) processReader(ctx context.Context, it *engine.Item, name string, f io.ReadSeeker, size int64) (*Result, error) {
	if size > p.cfg.MaxFileBytes {
		return nil, engine.Permanent(fmt.Errorf("image: %s is %d bytes, more than the limit of %d",
			name, size, p.cfg.MaxFileBytes))
	}

	// The header first: format and declared dimensions, before any
	// allocation proportional to the image.
	cfg, format, err := image.DecodeConfig(bufio.NewReader(f))
	if err != nil {
		if errors.Is(err, image.ErrFormat) {
			return nil, engine.Permanent(errors.New("image: not an image (unknown format)"))
		}
		return nil, engine.Permanent(fmt.Errorf("image: truncated or corrupt image: %v", err))
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, engine.Permanent(fmt.Errorf("image: truncated or corrupt image: %s header declares %d×%d",
			format, cfg.Width, cfg.Height))
	}
	if px := int64(cfg.Width) * int64(cfg.Height); px > p.cfg.MaxPixels {
		return nil, engine.Permanent(fmt.Errorf(
			"image: %s declares %d×%d = %d pixels, more than the limit of %d (decompression bomb?); not decoded",
			format, cfg.Width, cfg.Height, px, p.cfg.MaxPixels))
	}
	res := &Result{Format: format, Width: cfg.Width, Height: cfg.Height}

	var meta jpegMeta
	if format == "jpeg" {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("image: seek %s: %v", name, err)
		}
		meta = scanJPEG(f) // best effort: absent or broken EXIF is no error
		meta.exif.apply(res)
	}

	small, sum, err := p.decodeSmall(ctx, f, cfg, meta.progressive)
	if err != nil {
		return nil, err
	}
	res.SHA256 = sum
	small = orient(small, res.Orientation)
	res.PHash = dHash(small)
	if err := p.saveThumb(ctx, it, res, small); err != nil {
		return nil, fmt.Errorf("image: write thumbnail: %w", err)
	}
	return res, nil
}

// decodeSmall decodes the image within the decode budget, hashing the file
// as it is read, and returns it shrunk to the thumbnail size together with
// the file's hex sha256. The full-size image is garbage once it returns.
func (p *Processor) decodeSmall(ctx context.Context, f io.ReadSeeker, cfg image.Config, progressive bool) (
	small *image.RGBA, sum string, err error) {
	want := min(estimateBytes(cfg, progressive), p.cfg.DecodeBudget)
	if err := p.budget.Acquire(ctx, want); err != nil {
		return nil, "", engine.Transient(fmt.Errorf("image: waiting for decode memory: %w", err))
	}
	defer p.budget.Release(want)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, "", fmt.Errorf("image: seek: %v", err)
	}
	h := sha256.New()
	img, err := safeDecode(bufio.NewReaderSize(io.TeeReader(f, h), 64<<10))
	if err != nil {
		return nil, "", engine.Permanent(fmt.Errorf("image: truncated or corrupt image: %v", err))
	}
	if _, err := io.Copy(h, f); err != nil { // the rest the decoder did not read
		return nil, "", fmt.Errorf("image: read: %v", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, "", engine.Transient(err)
	}
	tw, th := fitInside(cfg.Width, cfg.Height, p.thumbSize)
	return shrink(img, tw, th), hex.EncodeToString(h.Sum(nil)), nil
}

// safeDecode decodes an image, turning a decoder panic into an error.
func safeDecode(r io.Reader) (img image.Image, err error) {
	defer func() {
		if v := recover(); v != nil {
			img, err = nil, fmt.Errorf("decoder failed: %v", v)
		}
	}()
	img, _, err = image.Decode(r)
	return img, err
}

// estimateBytes estimates the memory decoding an image takes, from its
// header: the pixel buffer, plus the coefficient buffers a progressive JPEG
// keeps (64 int32 per 8×8 block per component).
func estimateBytes(cfg image.Config, progressive bool) int64 {
	px := int64(cfg.Width) * int64(cfg.Height)
	perPixel := int64(4)
	if _, ok := cfg.ColorModel.(color.Palette); ok {
		perPixel = 1
	} else if cfg.ColorModel == color.GrayModel || cfg.ColorModel == color.Gray16Model {
		perPixel = 2
	} else if cfg.ColorModel == color.YCbCrModel {
		perPixel = 3 // 4:4:4 at most; 4:2:0 takes 1.5
	} else if cfg.ColorModel == color.RGBA64Model || cfg.ColorModel == color.NRGBA64Model {
		perPixel = 8
	}
	if progressive {
		perPixel += 12
	}
	return px*perPixel + 1<<20
}

// unwrapPath drops the operation and path an *fs.PathError repeats.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
