package tabular

import (
	"strings"
	"unicode/utf8"
)

// jsonSafe marks the ASCII bytes that go into a JSON string as they are.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// AppendObject appends to dst a JSON object that maps keys[i] to values[i],
// in key order: {"k1":"v1","k2":"v2"}. Keys and values are encoded as JSON
// strings: quotes, backslashes and control characters are escaped, invalid
// UTF-8 becomes U+FFFD, and '<', '>' and '&' stay as they are. With trim,
// values are strings.TrimSpace'd first. A key without a value gets ""; values
// beyond the keys are ignored (the caller marks such a row malformed).
func AppendObject(dst []byte, keys, values []string, trim bool) []byte {
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		v := ""
		if i < len(values) {
			v = values[i]
			if trim && len(v) > 0 && (maybeSpace(v[0]) || maybeSpace(v[len(v)-1])) {
				v = strings.TrimSpace(v)
			}
		}
		dst = appendString(dst, v)
	}
	return append(dst, '}')
}

// maybeSpace reports whether c may begin or end white space: an ASCII space
// or control character, or any byte of a multi-byte character (U+00A0 and
// friends).
func maybeSpace(c byte) bool { return c <= ' ' || c >= utf8.RuneSelf }

// SWAR constants: every byte 0x01, every byte 0x80.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// wordNeedsCare reports whether any of the 8 bytes in w is a control
// character, '"', '\\' or non-ASCII. It may report true for a clean word
// (borrows propagate upwards) but never false for one that needs care.
func wordNeedsCare(w uint64) bool {
	q := w ^ ('"' * lsb)
	b := w ^ ('\\' * lsb)
	return (w|(w-' '*lsb)&^w|(q-lsb)&^q|(b-lsb)&^b)&msb != 0
}

// load64 reads 8 bytes of s, little-endian.
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// safePrefix returns a length n such that s[:n] needs no escaping and, when
// n < len(s), the first byte needing care is not far after s[n]. Words of 8
// bytes are checked at a time, the last one overlapping its predecessor.
func safePrefix(s string) int {
	if len(s) < 8 {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c >= utf8.RuneSelf || !jsonSafe[c] {
				return i
			}
		}
		return len(s)
	}
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if wordNeedsCare(load64(s[i:])) {
			return i
		}
	}
	if i < len(s) && wordNeedsCare(load64(s[len(s)-8:])) {
		return i
	}
	return len(s)
}

// appendString appends s as a quoted JSON string.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	i := safePrefix(s)
	if i == len(s) {
		dst = append(dst, s...)
		return append(dst, '"')
	}
	start := 0
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
