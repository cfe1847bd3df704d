package export

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/sluicehq/sluice/engine"
)

// errNotObject reports a Result that is valid JSON but neither an object nor
// null.
var errNotObject = errors.New("result is not a JSON object")

// errInvalidJSON reports a Result that is not valid JSON.
var errInvalidJSON = errors.New("result is not valid JSON")

// maxDepth is how deeply values may nest, as in encoding/json.
const maxDepth = 10000

// objectIter walks the top-level members of a JSON object held in a string,
// in the order of the text, validating as it goes: one pass over the text
// both checks it (with the same verdict as json.Valid) and finds the members.
type objectIter struct {
	s     string
	i     int
	first bool
}

// newObjectIter positions an iterator on the object in s. It returns ok
// false, with no error, for an empty Result or JSON null (an item without a
// result), errNotObject for other valid JSON and errInvalidJSON for text that
// is not JSON.
func newObjectIter(s string) (it objectIter, ok bool, err error) {
	if len(s) == 0 {
		return objectIter{}, false, nil
	}
	i := skipSpace(s, 0)
	if at(s, i) == '{' {
		return objectIter{s: s, i: i + 1, first: true}, true, nil
	}
	if strings.HasPrefix(s[i:], "null") && skipSpace(s, i+4) == len(s) {
		return objectIter{}, false, nil
	}
	if json.Valid([]byte(s)) {
		return objectIter{}, false, errNotObject
	}
	return objectIter{}, false, errInvalidJSON
}

// rawValue is one member's value as raw JSON text, with what the walk that
// checked it learnt: spaced, whitespace outside strings inside an object
// or array (which then needs compacting); plain, a string whose text is its
// own value (ASCII without escapes, see stringEnd).
type rawValue struct {
	text          string
	spaced, plain bool
}

// next returns the next member: its key, unquoted, and its value. ok is
// false after the last member, once the rest of the text is checked to be
// only whitespace; err is errInvalidJSON as soon as the text is not JSON,
// or unquote's error for a key it cannot decode.
func (it *objectIter) next() (key string, v rawValue, ok bool, err error) {
	s := it.s
	i := skipSpace(s, it.i)
	switch c := at(s, i); {
	case c == '}':
		if skipSpace(s, i+1) != len(s) {
			return "", v, false, errInvalidJSON
		}
		it.i = len(s)
		return "", v, false, nil
	case it.first:
	case c == ',':
		i = skipSpace(s, i+1)
	default:
		return "", v, false, errInvalidJSON
	}
	if at(s, i) != '"' {
		return "", v, false, errInvalidJSON
	}
	kend, kplain, ok := stringEnd(s, i)
	if !ok {
		return "", v, false, errInvalidJSON
	}
	key = s[i+1 : kend-1]
	i = skipSpace(s, kend)
	if at(s, i) != ':' {
		return "", v, false, errInvalidJSON
	}
	i = skipSpace(s, i+1)
	var vend int
	if at(s, i) == '"' {
		vend, v.plain, ok = stringEnd(s, i)
	} else {
		vend, v.spaced, ok = valueEnd(s, i, 2) // the object itself is depth 1
	}
	if !ok {
		return "", v, false, errInvalidJSON
	}
	v.text = s[i:vend]
	it.i = vend
	it.first = false
	if !kplain {
		if key, err = unquote(key); err != nil {
			return "", v, false, err
		}
	}
	return key, v, true, nil
}

// at returns s[i], or 0 (never valid in JSON outside strings) past the end.
func at(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// skipSpace returns the index of the first non-whitespace byte at or after i.
func skipSpace(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd checks the JSON string that starts at s[i] (a quote) and returns
// the index just past its closing quote. Like encoding/json, it accepts
// invalid UTF-8 (decoding turns it into U+FFFD). plain reports text that is
// its own value: ASCII without escapes (see unquote).
func stringEnd(s string, i int) (end int, plain, ok bool) {
	plain = true
	for i++; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			return i + 1, plain, true
		case c >= utf8.RuneSelf:
			plain = false
			i++
		case c == '\\':
			plain = false
			switch at(s, i+1) {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(s) || !isHex(s[i+2]) || !isHex(s[i+3]) || !isHex(s[i+4]) || !isHex(s[i+5]) {
					return 0, false, false
				}
				i += 6
			default:
				return 0, false, false
			}
		case c < 0x20:
			return 0, false, false
		default:
			i++
		}
	}
	return 0, false, false
}

// isHex reports whether c is a hexadecimal digit.
func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// isDigit reports whether c is a decimal digit.
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// valueEnd checks the JSON value that starts at s[i], at nesting depth
// depth, and returns the index just past it; spaced reports whitespace
// outside strings inside an object or array.
func valueEnd(s string, i, depth int) (end int, spaced, ok bool) {
	switch c := at(s, i); c {
	case '"':
		end, _, ok = stringEnd(s, i)
		return end, false, ok
	case '{', '[':
		return compositeEnd(s, i, depth)
	case 't':
		return literalEnd(s, i, "true")
	case 'f':
		return literalEnd(s, i, "false")
	case 'n':
		return literalEnd(s, i, "null")
	default:
		end, ok = numberEnd(s, i)
		return end, false, ok
	}
}

// literalEnd checks that lit starts at s[i].
func literalEnd(s string, i int, lit string) (int, bool, bool) {
	if !strings.HasPrefix(s[i:], lit) {
		return 0, false, false
	}
	return i + len(lit), false, true
}

// numberEnd checks the JSON number that starts at s[i]:
// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func numberEnd(s string, i int) (int, bool) {
	if at(s, i) == '-' {
		i++
	}
	switch c := at(s, i); {
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		for i++; isDigit(at(s, i)); i++ {
		}
	default:
		return 0, false
	}
	if at(s, i) == '.' {
		i++
		if !isDigit(at(s, i)) {
			return 0, false
		}
		for i++; isDigit(at(s, i)); i++ {
		}
	}
	if c := at(s, i); c == 'e' || c == 'E' {
		i++
		if c := at(s, i); c == '+' || c == '-' {
			i++
		}
		if !isDigit(at(s, i)) {
			return 0, false
		}
		for i++; isDigit(at(s, i)); i++ {
		}
	}
	return i, true
}

// compositeEnd checks the object or array that starts at s[i].
func compositeEnd(s string, i, depth int) (end int, spaced, ok bool) {
	if depth > maxDepth {
		return 0, false, false
	}
	closer := byte(']')
	object := s[i] == '{'
	if object {
		closer = '}'
	}
	// space skips whitespace from j, noting whether there was any.
	space := func(j int) int {
		k := skipSpace(s, j)
		if k != j {
			spaced = true
		}
		return k
	}
	i = space(i + 1)
	if at(s, i) == closer {
		return i + 1, spaced, true
	}
	for {
		if object {
			if at(s, i) != '"' {
				return 0, false, false
			}
			if i, _, ok = stringEnd(s, i); !ok {
				return 0, false, false
			}
			i = space(i)
			if at(s, i) != ':' {
				return 0, false, false
			}
			i = space(i + 1)
		}
		var sp bool
		if i, sp, ok = valueEnd(s, i, depth+1); !ok {
			return 0, false, false
		}
		spaced = spaced || sp
		i = space(i)
		switch at(s, i) {
		case ',':
			i = space(i + 1)
		case closer:
			return i + 1, spaced, true
		default:
			return 0, false, false
		}
	}
}

// unquote returns the text of a JSON string given the (checked) raw text
// between its quotes. Text without escapes and in valid UTF-8 is returned as
// a substring (no copy); anything else is decoded by encoding/json, which
// also replaces invalid UTF-8 with U+FFFD, so keys and values read the same
// everywhere.
func unquote(inner string) (string, error) {
	if strings.IndexByte(inner, '\\') < 0 && utf8.ValidString(inner) {
		return inner, nil
	}
	b := make([]byte, 0, len(inner)+2)
	b = append(b, '"')
	b = append(b, inner...)
	b = append(b, '"')
	var out string
	if err := json.Unmarshal(b, &out); err != nil {
		return "", err
	}
	return out, nil
}

// cellText renders one (checked) raw JSON value as cell text.
func (rv rawValue) cellText() (string, error) {
	v := rv.text
	switch v[0] {
	case '"':
		if rv.plain {
			return v[1 : len(v)-1], nil
		}
		return unquote(v[1 : len(v)-1])
	case 'n':
		return "", nil
	case '{', '[':
		if !rv.spaced {
			return v, nil
		}
		var buf bytes.Buffer
		buf.Grow(len(v))
		if err := json.Compact(&buf, []byte(v)); err != nil {
			return "", err
		}
		return buf.String(), nil
	default: // numbers as written, true, false
		return v, nil
	}
}

// eachResultField calls fn for every key of an item's Result object, in
// text order, with the raw value; a Result that is null or absent has none.
// Errors (malformed JSON, or fn's) name the item. Keys and values may be
// substrings of a copy of the Result.
func eachResultField(it *engine.Item, fn func(key string, value rawValue) error) error {
	return eachField(it, string(it.Result), fn)
}

// eachOwnResultField is eachResultField without the copy: keys and values
// may be substrings of it.Result itself, so it is only for items that
// nothing changes while they are in use (those of the export's own scan).
func eachOwnResultField(it *engine.Item, fn func(key string, value rawValue) error) error {
	return eachField(it, unsafe.String(unsafe.SliceData(it.Result), len(it.Result)), fn)
}

// eachField walks result, the text of it.Result, for eachResultField.
func eachField(it *engine.Item, result string, fn func(key string, value rawValue) error) error {
	iter, ok, err := newObjectIter(result)
	if err != nil {
		return itemError(it, err)
	}
	if !ok {
		return nil
	}
	for {
		k, value, more, err := iter.next()
		if err != nil {
			return itemError(it, err)
		}
		if !more {
			return nil
		}
		if err := fn(k, value); err != nil {
			return itemError(it, err)
		}
	}
}
