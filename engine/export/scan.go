package export

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"
)

// errNotObject reports a Result that is valid JSON but neither an object nor
// null.
var errNotObject = errors.New("result is not a JSON object")

// errInvalidJSON reports a Result that is not valid JSON.
var errInvalidJSON = errors.New("result is not valid JSON")

// objectIter walks the top-level members of a JSON object held in a string,
// in the order of the text. It trusts its input to be valid JSON (callers
// check with json.Valid first) and so only looks for structure.
type objectIter struct {
	s string
	i int
}

// newObjectIter checks that raw is valid JSON and positions an iterator on
// its top-level object. It returns ok false, with no error, for an empty
// Result or JSON null (an item without a result), and errNotObject or
// errInvalidJSON for anything else that is not an object.
func newObjectIter(raw []byte, s string) (it objectIter, ok bool, err error) {
	if len(raw) == 0 {
		return objectIter{}, false, nil
	}
	if !json.Valid(raw) {
		return objectIter{}, false, errInvalidJSON
	}
	i := skipSpace(s, 0)
	switch s[i] {
	case '{':
		return objectIter{s: s, i: i + 1}, true, nil
	case 'n':
		return objectIter{}, false, nil
	default:
		return objectIter{}, false, errNotObject
	}
}

// next returns the next member: its key as the raw text between the quotes,
// and its value as raw JSON text. spaced reports whitespace outside strings
// inside an object or array value (so it needs compacting). ok is false after
// the last member.
func (it *objectIter) next() (rawKey, value string, spaced, ok bool) {
	s := it.s
	i := skipSpace(s, it.i)
	if i >= len(s) || s[i] == '}' {
		it.i = len(s)
		return "", "", false, false
	}
	if s[i] == ',' {
		i = skipSpace(s, i+1)
	}
	kend := stringEnd(s, i)
	rawKey = s[i+1 : kend-1]
	i = skipSpace(s, kend)
	i = skipSpace(s, i+1) // past ':'
	vend, spaced := valueEnd(s, i)
	it.i = vend
	return rawKey, s[i:vend], spaced, true
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

// stringEnd returns the index just past the closing quote of the JSON string
// that starts at s[i].
func stringEnd(s string, i int) int {
	for i++; i < len(s); i++ {
		switch s[i] {
		case '"':
			return i + 1
		case '\\':
			i++ // skip the escaped byte
		}
	}
	return len(s)
}

// valueEnd returns the index just past the JSON value that starts at s[i];
// spaced reports whitespace outside strings inside an object or array.
func valueEnd(s string, i int) (end int, spaced bool) {
	switch s[i] {
	case '"':
		return stringEnd(s, i), false
	case '{', '[':
		depth := 0
		for i < len(s) {
			switch s[i] {
			case '"':
				i = stringEnd(s, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, spaced
				}
			case ' ', '\t', '\n', '\r':
				spaced = true
			}
			i++
		}
		return len(s), spaced
	default: // number, true, false, null
		for i < len(s) {
			switch s[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i, false
			}
			i++
		}
		return i, false
	}
}

// unquote returns the text of a JSON string given the raw text between its
// quotes. Text without escapes and in valid UTF-8 is returned as a substring
// (no copy); anything else is decoded by encoding/json, which also replaces
// invalid UTF-8 with U+FFFD, so keys and values read the same everywhere.
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

// valueText renders one raw JSON value as cell text.
func valueText(v string, spaced bool) (string, error) {
	switch v[0] {
	case '"':
		return unquote(v[1 : len(v)-1])
	case 'n':
		return "", nil
	case '{', '[':
		if !spaced {
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
