package imageproc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"strings"
)

// jpegMeta is what the segments before a JPEG's image data tell.
type jpegMeta struct {
	exif exifInfo
	// progressive is set for progressive (and other non-baseline
	// multi-scan) JPEGs, whose decoding keeps all coefficients in memory.
	progressive bool
}

// exifInfo holds the EXIF tags the processor reports; zero values are
// absent tags.
type exifInfo struct {
	date, make, model string
	orientation       int
	lat, lon          float64
	hasGPS            bool
}

// apply copies the tags that are present into res.
func (e exifInfo) apply(res *Result) {
	res.ExifDate = e.date
	switch {
	case e.make == "":
		res.Camera = e.model
	case e.model == "":
		res.Camera = e.make
	case strings.HasPrefix(e.model, e.make): // "Canon" "Canon EOS R5"
		res.Camera = e.model
	default:
		res.Camera = e.make + " " + e.model
	}
	if e.orientation >= 1 && e.orientation <= 8 {
		res.Orientation = e.orientation
	}
	if e.hasGPS {
		lat, lon := e.lat, e.lon
		res.GPSLat, res.GPSLon = &lat, &lon
	}
}

// scanJPEG reads the marker segments of a JPEG up to its image data and
// parses the first EXIF APP1 segment. It never fails: whatever it cannot
// read is left out.
func scanJPEG(r io.Reader) jpegMeta {
	var m jpegMeta
	br := bufio.NewReaderSize(r, 4096)
	var soi [2]byte
	if _, err := io.ReadFull(br, soi[:]); err != nil || soi != [2]byte{0xFF, 0xD8} {
		return m
	}
	seenExif := false
	for {
		b, err := br.ReadByte()
		if err != nil || b != 0xFF {
			return m
		}
		marker, err := br.ReadByte()
		for err == nil && marker == 0xFF { // fill bytes
			marker, err = br.ReadByte()
		}
		if err != nil {
			return m
		}
		switch {
		case marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7):
			continue // no length
		case marker == 0xD9 || marker == 0xDA: // EOI, SOS: image data follows
			return m
		case marker == 0xC2 || marker == 0xC6 || marker == 0xCA || marker == 0xCE:
			m.progressive = true
		}
		var lb [2]byte
		if _, err := io.ReadFull(br, lb[:]); err != nil {
			return m
		}
		n := int(binary.BigEndian.Uint16(lb[:])) - 2
		if n < 0 {
			return m
		}
		if marker == 0xE1 && !seenExif {
			seg := make([]byte, n)
			if _, err := io.ReadFull(br, seg); err != nil {
				return m
			}
			if rest, ok := bytes.CutPrefix(seg, []byte("Exif\x00\x00")); ok {
				seenExif = true
				m.exif = parseTIFF(rest)
			}
			continue
		}
		if _, err := br.Discard(n); err != nil {
			return m
		}
	}
}

// TIFF/EXIF tags read by parseTIFF.
const (
	tagMake             = 0x010F
	tagModel            = 0x0110
	tagOrientation      = 0x0112
	tagDateTime         = 0x0132
	tagExifIFD          = 0x8769
	tagGPSIFD           = 0x8825
	tagDateTimeOriginal = 0x9003
	tagGPSLatRef        = 1
	tagGPSLat           = 2
	tagGPSLonRef        = 3
	tagGPSLon           = 4
)

// tiff is a TIFF structure (the body of an EXIF segment).
type tiff struct {
	b  []byte
	bo binary.ByteOrder
}

// entry is one IFD entry: its type, count and value bytes.
type entry struct {
	typ   uint16
	count uint32
	val   []byte
}

// parseTIFF reads Make, Model, Orientation and DateTime from IFD0,
// DateTimeOriginal from the EXIF IFD and the position from the GPS IFD.
func parseTIFF(b []byte) exifInfo {
	var e exifInfo
	if len(b) < 8 {
		return e
	}
	t := tiff{b: b}
	switch string(b[:2]) {
	case "II":
		t.bo = binary.LittleEndian
	case "MM":
		t.bo = binary.BigEndian
	default:
		return e
	}
	if t.bo.Uint16(b[2:]) != 42 {
		return e
	}
	ifd0 := t.ifd(t.bo.Uint32(b[4:]))
	e.make = t.ascii(ifd0[tagMake])
	e.model = t.ascii(ifd0[tagModel])
	e.orientation = int(t.short(ifd0[tagOrientation]))
	e.date = t.ascii(ifd0[tagDateTime])
	if p, ok := ifd0[tagExifIFD]; ok && p.typ == 4 {
		if d := t.ascii(t.ifd(t.bo.Uint32(p.val))[tagDateTimeOriginal]); d != "" {
			e.date = d
		}
	}
	if p, ok := ifd0[tagGPSIFD]; ok && p.typ == 4 {
		gps := t.ifd(t.bo.Uint32(p.val))
		lat, okLat := t.degrees(gps[tagGPSLat])
		lon, okLon := t.degrees(gps[tagGPSLon])
		if okLat && okLon && lat <= 90 && lon <= 180 {
			if strings.EqualFold(t.ascii(gps[tagGPSLatRef]), "S") {
				lat = -lat
			}
			if strings.EqualFold(t.ascii(gps[tagGPSLonRef]), "W") {
				lon = -lon
			}
			e.lat, e.lon, e.hasGPS = lat, lon, true
		}
	}
	return e
}

// ifd reads the IFD at off; entries that point outside the data are left
// out.
func (t tiff) ifd(off uint32) map[uint16]entry {
	out := map[uint16]entry{}
	if uint64(off)+2 > uint64(len(t.b)) {
		return out
	}
	n := int(t.bo.Uint16(t.b[off:]))
	base := int(off) + 2
	if base+12*n > len(t.b) {
		return out
	}
	sizes := map[uint16]uint64{1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 7: 1, 9: 4, 10: 8}
	for i := range n {
		ent := t.b[base+12*i : base+12*i+12]
		typ, count := t.bo.Uint16(ent[2:]), t.bo.Uint32(ent[4:])
		size, ok := sizes[typ]
		if !ok {
			continue
		}
		total := size * uint64(count)
		val := ent[8:12]
		if total > 4 {
			o := uint64(t.bo.Uint32(ent[8:]))
			if o+total > uint64(len(t.b)) {
				continue
			}
			val = t.b[o : o+total]
		} else {
			val = val[:total]
		}
		out[t.bo.Uint16(ent)] = entry{typ: typ, count: count, val: val}
	}
	return out
}

// ascii returns an ASCII value without its NULs and surrounding spaces.
func (t tiff) ascii(e entry) string {
	if e.typ != 2 {
		return ""
	}
	s, _, _ := strings.Cut(string(e.val), "\x00")
	return strings.TrimSpace(s)
}

// short returns a SHORT value, 0 when absent.
func (t tiff) short(e entry) uint16 {
	if e.typ != 3 || len(e.val) < 2 {
		return 0
	}
	return t.bo.Uint16(e.val)
}

// degrees converts three RATIONALs (degrees, minutes, seconds) to decimal
// degrees.
func (t tiff) degrees(e entry) (float64, bool) {
	if e.typ != 5 || e.count < 3 || len(e.val) < 24 {
		return 0, false
	}
	var v float64
	for i, scale := range []float64{1, 60, 3600} {
		num, den := t.bo.Uint32(e.val[8*i:]), t.bo.Uint32(e.val[8*i+4:])
		if den == 0 {
			if num == 0 { // 0/0: some cameras leave seconds unset
				continue
			}
			return 0, false
		}
		v += float64(num) / float64(den) / scale
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}
