// Package imageproc is the "image" processor: for one image file it reports
// the format, dimensions, sha256, a perceptual hash (64-bit dHash), the EXIF
// date, camera, orientation and GPS position of JPEGs, and writes a small
// JPEG thumbnail, kept in the store's blob store (or under the data
// directory when the processor has no blob store).
//
// Every check that can fail cheaply runs before the image is decoded: the
// file size, the header (format and declared dimensions, so a decompression
// bomb is rejected before any large allocation), and a memory budget shared
// by all processors built from one factory bounds how many pixels are being
// decoded at once.
package imageproc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/engine"
	"golang.org/x/sync/semaphore"

	// Decoders for the formats the processor accepts, besides the standard
	// library's jpeg, png and gif (imported in process.go).
	_ "golang.org/x/image/bmp"
	_ "golang.org/x/image/tiff"
	_ "golang.org/x/image/webp"
)

// Defaults and limits of the configuration.
const (
	// DefaultThumbSize is the default longest side of a thumbnail, in pixels.
	DefaultThumbSize = 256
	// MinThumbSize and MaxThumbSize bound the thumbSize stage setting.
	MinThumbSize = 16
	// MaxThumbSize is the largest accepted thumbSize.
	MaxThumbSize = 2048
	// DefaultMaxPixels is the default decompression-bomb guard (10000×10000).
	DefaultMaxPixels = 100_000_000
	// DefaultMaxFileBytes is the default largest accepted file (200 MiB).
	DefaultMaxFileBytes = 200 << 20
	// DefaultDecodeBudget is the default memory budget for images being
	// decoded at the same time (128 MiB, estimated from the header).
	DefaultDecodeBudget = 128 << 20
)

// Config configures the image processor factory; the zero value of each
// field means its default.
type Config struct {
	// Blobs, when set, is where images ingested into the store are read
	// from and where thumbnails are written (under the item's job), so that
	// any machine sharing the store can process and show them.
	Blobs engine.BlobStore
	// Now stamps the thumbnails stored in Blobs; default time.Now.
	Now func() time.Time
	// ThumbDir is where thumbnails are written when Blobs is nil (normally
	// <data dir>/thumbs); "" means no thumbnails then. The result names a
	// thumbnail relative to the parent of ThumbDir ("thumbs/<sha256>.jpg").
	ThumbDir string
	// ThumbSize is the longest side of a thumbnail in pixels, default 256.
	// A stage may override it with {"thumbSize": N}.
	ThumbSize int
	// MaxPixels rejects images whose declared width×height is larger,
	// before decoding; default 100,000,000.
	MaxPixels int64
	// MaxFileBytes rejects larger files; default 200 MiB.
	MaxFileBytes int64
	// DecodeBudget bounds the estimated bytes of all images being decoded
	// at once by processors of this factory; default 128 MiB. An image
	// estimated above the budget waits until it can have the whole budget.
	DecodeBudget int64
}

// StageConfig is the per-stage JSON configuration of an image stage.
type StageConfig struct {
	// ThumbSize overrides Config.ThumbSize (16..2048). Thumbnails of a size
	// other than the factory's are named <sha256>-<size>.jpg.
	ThumbSize int `json:"thumbSize,omitempty"`
}

func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.ThumbSize <= 0 {
		c.ThumbSize = DefaultThumbSize
	}
	if c.MaxPixels <= 0 {
		c.MaxPixels = DefaultMaxPixels
	}
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	if c.DecodeBudget <= 0 {
		c.DecodeBudget = DefaultDecodeBudget
	}
	return c
}

// New returns the factory for the processor kind "image". Processors built
// by one factory share its decode budget.
func New(c Config) engine.Factory {
	c = c.withDefaults()
	budget := semaphore.NewWeighted(c.DecodeBudget)
	return func(config json.RawMessage) (engine.Processor, error) {
		sc, err := parseStage(config)
		if err != nil {
			return nil, err
		}
		p := &Processor{cfg: c, budget: budget, thumbSize: c.ThumbSize}
		if sc.ThumbSize != 0 {
			p.thumbSize = sc.ThumbSize
		}
		return p, nil
	}
}

func parseStage(config json.RawMessage) (StageConfig, error) {
	var sc StageConfig
	trimmed := bytes.TrimSpace(config)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return sc, nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		return sc, engine.Errorf(engine.EINVALID, "image: %v", err)
	}
	if sc.ThumbSize != 0 && (sc.ThumbSize < MinThumbSize || sc.ThumbSize > MaxThumbSize) {
		return sc, engine.Errorf(engine.EINVALID,
			"thumbSize: must be between %d and %d, got %d", MinThumbSize, MaxThumbSize, sc.ThumbSize)
	}
	return sc, nil
}

// thumbName is the file name of a thumbnail of the given image hash.
func (p *Processor) thumbName(sum string) string {
	if p.thumbSize == p.cfg.ThumbSize {
		return sum + ".jpg"
	}
	return fmt.Sprintf("%s-%d.jpg", sum, p.thumbSize)
}
