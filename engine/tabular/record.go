package tabular

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// readLine returns the next physical line, terminator included, or io.EOF
// when the input is exhausted. The slice is only valid until the next call.
// Every line is checked for NUL bytes and, for UTF-8 input, for validity;
// a UTF-8 sequence cannot span a line ending, so checking lines is exact.
func (r *CSVReader) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice(r.eol)
	if errors.Is(err, bufio.ErrBufferFull) {
		r.long = append(r.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if bytes.IndexByte(line, 0) >= 0 {
				return nil, r.binaryError(r.lineNo + 1)
			}
			if len(r.long) > r.maxRecord {
				return nil, r.tooLarge(r.lineNo + 1)
			}
			line, err = r.br.ReadSlice(r.eol)
			r.long = append(r.long, line...)
		}
		line = r.long
		if cap(r.long) > 1<<20 {
			r.long = nil // line stays valid; the next long line starts afresh
		}
	}
	if err != nil {
		if !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading line %d: %w", r.lineNo+1, err)
		}
		if len(line) == 0 {
			return nil, io.EOF
		}
	}
	r.lineNo++
	if bytes.IndexByte(line, 0) >= 0 {
		return nil, r.binaryError(r.lineNo)
	}
	if r.validate {
		if !utf8.Valid(line) {
			if r.guessed {
				return r.switchToWindows1252(line)
			}
			return nil, &FormatError{Line: r.lineNo, Reason: "invalid UTF-8 byte sequence; try --encoding windows-1252"}
		}
		if r.guessed && !isASCII(line) {
			r.guessed = false // real UTF-8 seen: the file is UTF-8
		}
	}
	return line, nil
}

// contentEnd returns the length of line without its line ending. A lone CR
// at the very end of the input also counts as a line ending.
func contentEnd(line []byte, eol byte) int {
	n := len(line)
	if n > 0 && line[n-1] == eol {
		n--
		if eol == '\n' && n > 0 && line[n-1] == '\r' {
			n--
		}
	} else if n > 0 && line[n-1] == '\r' {
		n--
	}
	return n
}

// readRecord parses the next record, skipping empty lines, and returns its
// fields and the line it starts on. All fields share one string allocation.
func (r *CSVReader) readRecord() ([]string, int, error) {
	var line []byte
	var end int
	for {
		var err error
		line, err = r.readLine()
		if err != nil {
			return nil, 0, err
		}
		if end = contentEnd(line, r.eol); end > 0 {
			break
		}
	}
	if bytes.IndexByte(line[:end], '"') < 0 {
		return r.splitPlain(line[:end]), r.lineNo, nil
	}
	return r.parseQuoted(line, end)
}

// splitPlain splits a line that holds no quote at all: the fast path.
func (r *CSVReader) splitPlain(content []byte) []string {
	n := bytes.Count(content, r.delimSep) + 1
	fields := r.fieldSlice(n)
	s := r.recordString(content)
	for i := 0; i < n-1; i++ {
		j := strings.IndexByte(s, r.delim)
		fields[i] = s[:j]
		s = s[j+1:]
	}
	fields[n-1] = s
	return fields
}

// parseQuoted parses a record that has at least one quote in its first line;
// quoted fields may continue over further lines.
func (r *CSVReader) parseQuoted(line []byte, end int) ([]string, int, error) {
	start := r.lineNo
	r.rec, r.ends = r.rec[:0], r.ends[:0]
	pos := 0
	for {
		if pos >= end || line[pos] != '"' {
			// Unquoted field: runs to the next delimiter or the line end.
			// Quotes in it are literal.
			i := bytes.IndexByte(line[pos:end], r.delim)
			if i < 0 {
				r.rec = append(r.rec, line[pos:end]...)
				r.ends = append(r.ends, len(r.rec))
				break
			}
			r.rec = append(r.rec, line[pos:pos+i]...)
			r.ends = append(r.ends, len(r.rec))
			pos += i + 1
			continue
		}
		quoteLine := r.lineNo
		pos++
		for {
			i := bytes.IndexByte(line[pos:], '"')
			if i < 0 {
				r.rec = append(r.rec, line[pos:]...)
				if len(r.rec) > r.maxRecord {
					return nil, 0, r.tooLarge(start)
				}
				var err error
				if line, err = r.readLine(); err != nil {
					if errors.Is(err, io.EOF) {
						return nil, 0, &FormatError{Line: quoteLine,
							Reason: "quoted field opened on this line is not closed before the end of the file"}
					}
					return nil, 0, err
				}
				pos, end = 0, contentEnd(line, r.eol)
				continue
			}
			r.rec = append(r.rec, line[pos:pos+i]...)
			pos += i + 1
			if pos < len(line) && line[pos] == '"' {
				r.rec = append(r.rec, '"')
				pos++
				continue
			}
			break
		}
		r.ends = append(r.ends, len(r.rec))
		if pos >= end {
			break
		}
		if line[pos] != r.delim {
			c, _ := utf8.DecodeRune(line[pos:end])
			return nil, 0, &FormatError{Line: r.lineNo, Reason: fmt.Sprintf(
				"unexpected %q after the closing quote of field %d; a quote inside a quoted field must be doubled (\"\")",
				c, len(r.ends))}
		}
		pos++
	}
	if len(r.rec) > r.maxRecord {
		return nil, 0, r.tooLarge(start)
	}
	s := r.recordString(r.rec)
	if cap(r.rec) > 1<<20 {
		r.rec = nil // do not pin the memory of one huge record
	}
	fields := r.fieldSlice(len(r.ends))
	prev := 0
	for i, e := range r.ends {
		fields[i] = s[prev:e]
		prev = e
	}
	return fields, start, nil
}

// fieldSlice returns a slice for n fields: a new one, or with ReuseRecord
// the reader's own.
func (r *CSVReader) fieldSlice(n int) []string {
	if !r.reuse {
		return make([]string, n)
	}
	if cap(r.fields) < n {
		r.fields = make([]string, n)
	}
	r.fields = r.fields[:n]
	return r.fields
}

// recordString returns the bytes of a record as a string: a copy, or with
// ReuseRecord the bytes themselves (they stay unchanged until the next
// call to Next, which is as long as ReuseRecord promises).
func (r *CSVReader) recordString(b []byte) string {
	if !r.reuse {
		return string(b)
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func (r *CSVReader) binaryError(line int) error {
	return &FormatError{Line: line, Reason: "binary data (NUL byte); not a CSV file" + r.hint}
}

func (r *CSVReader) tooLarge(line int) error {
	return &FormatError{Line: line, Reason: fmt.Sprintf(
		"record is larger than %d bytes (is a quote left open?)", r.maxRecord)}
}
