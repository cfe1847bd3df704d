package imageproc

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/stretchr/testify/require"
)

// gradient returns a w×h test image; seed varies the pattern.
func gradient(w, h, seed int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{
				R: uint8((x*255/w + seed*40) % 256),
				G: uint8((y * 255 / h) % 256),
				B: uint8(((x + y) * seed) % 256),
				A: 255,
			})
		}
	}
	return img
}

// encodeJPEG returns img as JPEG bytes.
func encodeJPEG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}))
	return buf.Bytes()
}

// encodePNG returns img as PNG bytes.
func encodePNG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	return buf.Bytes()
}

// writeFile writes data to name in dir and returns its path.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

// newProc builds a processor from cfg and a stage configuration.
func newProc(t testing.TB, cfg Config, stage string) engine.Processor {
	t.Helper()
	var raw json.RawMessage
	if stage != "" {
		raw = json.RawMessage(stage)
	}
	p, err := New(cfg)(raw)
	require.NoError(t, err)
	return p
}

// run processes the file at path and decodes the result into a map.
func run(t testing.TB, p engine.Processor, path string) (map[string]any, error) {
	t.Helper()
	in, err := json.Marshal(map[string]any{"path": path, "name": filepath.Base(path), "size": 1})
	require.NoError(t, err)
	out, err := p.Process(context.Background(), &engine.Task{Item: &engine.Item{}, Input: in, Attempt: 1})
	if err != nil {
		return nil, err
	}
	var m map[string]any
	require.NoError(t, json.Unmarshal(out, &m))
	return m, nil
}

// bombPNG returns a PNG signature and an IHDR chunk declaring w×h pixels,
// with a correct CRC and no pixel data.
func bombPNG(w, h uint32) []byte {
	var buf bytes.Buffer
	buf.WriteString("\x89PNG\r\n\x1a\n")
	body := make([]byte, 0, 17)
	body = append(body, "IHDR"...)
	body = binary.BigEndian.AppendUint32(body, w)
	body = binary.BigEndian.AppendUint32(body, h)
	body = append(body, 8, 6, 0, 0, 0) // 8-bit RGBA, deflate, no filter, no interlace
	_ = binary.Write(&buf, binary.BigEndian, uint32(13))
	buf.Write(body)
	_ = binary.Write(&buf, binary.BigEndian, crc32.ChecksumIEEE(body))
	return buf.Bytes()
}

// ifdEntry is one entry for buildIFD.
type ifdEntry struct {
	tag, typ uint16
	count    uint32
	data     []byte
}

func asciiEntry(tag uint16, s string) ifdEntry {
	return ifdEntry{tag: tag, typ: 2, count: uint32(len(s) + 1), data: []byte(s + "\x00")}
}

func shortEntry(bo order, tag, v uint16) ifdEntry {
	return ifdEntry{tag: tag, typ: 3, count: 1, data: bo.AppendUint16(nil, v)}
}

func longEntry(bo order, tag uint16, v uint32) ifdEntry {
	return ifdEntry{tag: tag, typ: 4, count: 1, data: bo.AppendUint32(nil, v)}
}

func rationalEntry(bo order, tag uint16, vals ...[2]uint32) ifdEntry {
	var data []byte
	for _, v := range vals {
		data = bo.AppendUint32(bo.AppendUint32(data, v[0]), v[1])
	}
	return ifdEntry{tag: tag, typ: 5, count: uint32(len(vals)), data: data}
}

// buildIFD appends an IFD with its out-of-line values to b and returns the
// new buffer and the IFD's offset.
func buildIFD(b []byte, bo order, entries []ifdEntry) ([]byte, uint32) {
	start := uint32(len(b))
	b = bo.AppendUint16(b, uint16(len(entries)))
	dataOff := start + 2 + 12*uint32(len(entries)) + 4
	var extra []byte
	for _, e := range entries {
		b = bo.AppendUint16(b, e.tag)
		b = bo.AppendUint16(b, e.typ)
		b = bo.AppendUint32(b, e.count)
		if len(e.data) <= 4 {
			b = append(b, append(e.data, make([]byte, 4-len(e.data))...)...)
			continue
		}
		b = bo.AppendUint32(b, dataOff+uint32(len(extra)))
		extra = append(extra, e.data...)
	}
	b = bo.AppendUint32(b, 0)
	return append(b, extra...), start
}

// withExif inserts an APP1 EXIF segment (Canon EOS R5, orientation o, a
// date and a position near Paris, or Rio with south/west refs) after the
// SOI of a JPEG.
func withExif(t testing.TB, jpg []byte, bo order, o uint16, south bool) []byte {
	t.Helper()
	b := []byte("II")
	if bo == binary.BigEndian {
		b = []byte("MM")
	}
	b = bo.AppendUint16(b, 42)
	b = bo.AppendUint32(b, 0) // IFD0 offset, patched below
	b, exifOff := buildIFD(b, bo, []ifdEntry{asciiEntry(tagDateTimeOriginal, "2024:05:01 10:00:00")})
	latRef, lonRef := "N", "E"
	if south {
		latRef, lonRef = "S", "W"
	}
	b, gpsOff := buildIFD(b, bo, []ifdEntry{
		asciiEntry(tagGPSLatRef, latRef),
		rationalEntry(bo, tagGPSLat, [2]uint32{48, 1}, [2]uint32{51, 1}, [2]uint32{2400, 100}),
		asciiEntry(tagGPSLonRef, lonRef),
		rationalEntry(bo, tagGPSLon, [2]uint32{2, 1}, [2]uint32{21, 1}, [2]uint32{3, 1}),
	})
	b, ifd0 := buildIFD(b, bo, []ifdEntry{
		asciiEntry(tagMake, "Canon"),
		asciiEntry(tagModel, "EOS R5"),
		shortEntry(bo, tagOrientation, o),
		asciiEntry(tagDateTime, "2030:01:01 00:00:00"),
		longEntry(bo, tagExifIFD, exifOff),
		longEntry(bo, tagGPSIFD, gpsOff),
	})
	bo.PutUint32(b[4:], ifd0)
	seg := append([]byte("Exif\x00\x00"), b...)
	require.Less(t, len(seg), 65533)
	app1 := []byte{0xFF, 0xE1, byte((len(seg) + 2) >> 8), byte(len(seg) + 2)}
	out := append([]byte{}, jpg[:2]...)
	out = append(out, app1...)
	out = append(out, seg...)
	return append(out, jpg[2:]...)
}

// order is a byte order that can also append.
type order interface {
	binary.ByteOrder
	binary.AppendByteOrder
}
