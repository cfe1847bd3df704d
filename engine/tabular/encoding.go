package tabular

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"
)

// Canonical encoding names, as Encoding reports them.
const (
	EncodingUTF8        = "utf-8"
	EncodingUTF16LE     = "utf-16le"
	EncodingUTF16BE     = "utf-16be"
	EncodingWindows1252 = "windows-1252"

	// encodingUTF16 is "utf-16": the byte-order mark decides the byte order.
	encodingUTF16 = "utf-16"
)

var (
	bomUTF8    = []byte{0xEF, 0xBB, 0xBF}
	bomUTF16LE = []byte{0xFF, 0xFE}
	bomUTF16BE = []byte{0xFE, 0xFF}
)

// canonicalEncoding maps a user-given encoding name to a canonical one; ""
// means detect.
func canonicalEncoding(name string) (string, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	n = strings.ReplaceAll(n, "_", "-")
	switch n {
	case "", "auto":
		return "", nil
	case "utf-8", "utf8":
		return EncodingUTF8, nil
	case "utf-16le", "utf16le", "utf-16-le":
		return EncodingUTF16LE, nil
	case "utf-16be", "utf16be", "utf-16-be":
		return EncodingUTF16BE, nil
	case "utf-16", "utf16", "unicode":
		return encodingUTF16, nil
	case "windows-1252", "windows1252", "cp1252", "cp-1252", "win-1252",
		"latin1", "latin-1", "iso-8859-1", "iso8859-1", "l1":
		// Like the WHATWG encoding standard, ISO-8859-1 is read as its
		// superset Windows-1252, which is what such files really are.
		return EncodingWindows1252, nil
	}
	return "", fmt.Errorf("unknown encoding %q (want auto, utf-8, utf-16le, utf-16be or windows-1252)", name)
}

// setupDecoding decides the encoding (detecting it when enc is ""), skips a
// byte-order mark and sets r.br to a reader of UTF-8 text.
func (r *CSVReader) setupDecoding(enc string) error {
	head, err := r.raw.Peek(sniffBytes)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the start of the file: %w", err)
	}
	atEOF := err != nil
	bom := 0
	switch enc {
	case "":
		switch {
		case bytes.HasPrefix(head, bomUTF8):
			enc, bom = EncodingUTF8, len(bomUTF8)
		case bytes.HasPrefix(head, bomUTF16LE):
			enc, bom = EncodingUTF16LE, len(bomUTF16LE)
		case bytes.HasPrefix(head, bomUTF16BE):
			enc, bom = EncodingUTF16BE, len(bomUTF16BE)
		case looksUTF8(head, atEOF):
			enc = EncodingUTF8
			r.guessed = isASCII(head)
		default:
			enc = EncodingWindows1252
		}
	case EncodingUTF8:
		if bytes.HasPrefix(head, bomUTF8) {
			bom = len(bomUTF8)
		}
	case encodingUTF16:
		enc = EncodingUTF16LE
		if bytes.HasPrefix(head, bomUTF16BE) {
			enc = EncodingUTF16BE
		}
		fallthrough
	case EncodingUTF16LE, EncodingUTF16BE:
		if (enc == EncodingUTF16LE && bytes.HasPrefix(head, bomUTF16LE)) ||
			(enc == EncodingUTF16BE && bytes.HasPrefix(head, bomUTF16BE)) {
			bom = 2
		}
	}
	if enc == EncodingUTF8 || enc == EncodingWindows1252 {
		r.hint = utf16Guess(head)
	}
	if _, err := r.raw.Discard(bom); err != nil {
		return fmt.Errorf("reading the start of the file: %w", err)
	}
	r.encoding = enc
	var dec *encoding.Decoder
	switch enc {
	case EncodingUTF8:
		r.validate = true
		r.br = r.raw
		return nil
	case EncodingUTF16LE:
		dec = unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM).NewDecoder()
	case EncodingUTF16BE:
		dec = unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM).NewDecoder()
	default:
		dec = charmap.Windows1252.NewDecoder()
	}
	r.br = bufio.NewReaderSize(transform.NewReader(r.raw, dec), bufferSize)
	return nil
}

// looksUTF8 reports whether b, the first bytes of the input, is UTF-8: valid
// (forgiving a character cut off at the end when more input follows), or with
// more valid multi-byte characters than invalid bytes. The latter is UTF-8
// with damage, or mixed with another encoding; reading it as UTF-8 reports
// the damage instead of silently garbling every character.
func looksUTF8(b []byte, atEOF bool) bool {
	if !atEOF {
		for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
			if utf8.RuneStart(b[len(b)-i]) {
				if !utf8.FullRune(b[len(b)-i:]) {
					b = b[:len(b)-i]
				}
				break
			}
		}
	}
	if utf8.Valid(b) {
		return true
	}
	multi, bad := 0, 0
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		c, size := utf8.DecodeRune(b[i:])
		if c == utf8.RuneError && size == 1 {
			bad++
		} else {
			multi++
		}
		i += size
	}
	return multi > bad
}

// utf16Guess looks for the pattern of UTF-16 text without a byte-order mark
// (mostly ASCII, so every other byte is NUL) and returns a hint for the
// binary-data error, or "".
func utf16Guess(head []byte) string {
	if len(head) > 4096 {
		head = head[:4096]
	}
	var even, odd int
	for i, c := range head {
		if c == 0 {
			if i%2 == 0 {
				even++
			} else {
				odd++
			}
		}
	}
	half := len(head) / 2
	switch {
	case half < 2:
		return ""
	case odd*10 >= half*7 && even*10 < half:
		return "; if it is UTF-16 text without a byte-order mark, try --encoding utf-16le"
	case even*10 >= half*7 && odd*10 < half:
		return "; if it is UTF-16 text without a byte-order mark, try --encoding utf-16be"
	}
	return ""
}

// detectEOL returns '\r' when the sample has CR line endings and no LF at
// all (classic Mac files), '\n' otherwise.
func detectEOL(sample []byte) byte {
	if bytes.IndexByte(sample, '\n') < 0 && bytes.IndexByte(sample, '\r') >= 0 {
		return '\r'
	}
	return '\n'
}

// CheckEncoding reports whether name is an encoding Options accepts ("" and
// "auto" included), so callers can refuse a bad name before doing any work.
func CheckEncoding(name string) error {
	_, err := canonicalEncoding(name)
	return err
}

// isASCII reports whether b holds only 7-bit bytes.
func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// switchToWindows1252 is called at the first invalid UTF-8 line of a file
// whose start was all ASCII: that start reads the same in Windows-1252, so
// the rest of the file is decoded as Windows-1252 and line is converted.
func (r *CSVReader) switchToWindows1252(line []byte) ([]byte, error) {
	dec := charmap.Windows1252.NewDecoder()
	out, err := dec.Bytes(line)
	if err != nil {
		return nil, &FormatError{Line: r.lineNo, Reason: "neither UTF-8 nor Windows-1252"}
	}
	r.encoding, r.validate, r.guessed = EncodingWindows1252, false, false
	r.br = bufio.NewReaderSize(transform.NewReader(r.raw, charmap.Windows1252.NewDecoder()), bufferSize)
	return out, nil
}
