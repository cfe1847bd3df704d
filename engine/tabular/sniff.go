package tabular

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// delimiterCandidates are the delimiters sniffing chooses among, in order of
// preference when several fit equally well.
var delimiterCandidates = []byte{',', ';', '\t', '|'}

// sniffRecords is how many records sniffing looks at, at most.
const sniffRecords = 20

// checkDelimiter validates a delimiter given in Options; 0 means sniff.
func checkDelimiter(d rune) (byte, error) {
	if d == 0 {
		return 0, nil
	}
	if d >= 0x80 || d == '"' || d == '\r' || d == '\n' {
		return 0, fmt.Errorf("invalid delimiter %q: must be an ASCII character other than a quote or a line ending", d)
	}
	return byte(d), nil
}

// sniffDelimiter picks the delimiter for sample, the start of the decoded
// input. The winner is the candidate that splits every sampled record into
// the same number of fields, more than one, with the most fields; when no
// candidate is consistent, the one whose header has more than one field and
// that most records agree with; else ','. Quoted fields are honoured, so a
// delimiter or line ending inside quotes does not count.
func sniffDelimiter(sample []byte, eol byte, atEOF bool) byte {
	best, bestFields := byte(','), 1
	counts := make([][]int, len(delimiterCandidates))
	for i, c := range delimiterCandidates {
		counts[i] = fieldCounts(sample, c, eol, atEOF)
		if n, ok := consistentCount(counts[i]); ok && n > bestFields {
			best, bestFields = c, n
		}
	}
	if bestFields > 1 {
		return best
	}
	bestAgree := 0
	for i, c := range delimiterCandidates {
		cs := counts[i]
		if len(cs) == 0 || cs[0] < 2 {
			continue
		}
		agree := 0
		for _, n := range cs {
			if n == cs[0] {
				agree++
			}
		}
		if agree > bestAgree {
			best, bestAgree = c, agree
		}
	}
	return best
}

// consistentCount returns the common field count of counts and whether all
// records share it.
func consistentCount(counts []int) (int, bool) {
	if len(counts) == 0 {
		return 0, false
	}
	for _, n := range counts[1:] {
		if n != counts[0] {
			return 0, false
		}
	}
	return counts[0], true
}

// fieldCounts returns the field count of each of the first sniffRecords
// records of sample when split by delim, skipping empty lines. A record cut
// off by the end of the sample is left out unless the sample is the whole
// input.
func fieldCounts(sample []byte, delim, eol byte, atEOF bool) []int {
	var counts []int
	fields, empty, inQuotes, fieldStart := 1, true, false, true
	for i := 0; i < len(sample); i++ {
		b := sample[i]
		if inQuotes {
			if b == '"' {
				if i+1 < len(sample) && sample[i+1] == '"' {
					i++
				} else {
					inQuotes = false
				}
			}
			continue
		}
		switch {
		case b == eol:
			if !empty {
				counts = append(counts, fields)
				if len(counts) == sniffRecords {
					return counts
				}
			}
			fields, empty, fieldStart = 1, true, true
		case b == delim:
			fields++
			empty, fieldStart = false, true
		case b == '"' && fieldStart:
			inQuotes = true
			empty, fieldStart = false, false
		case b == '\r' && eol == '\n':
			// Part of a CRLF line ending (or a stray CR): not content.
		default:
			empty, fieldStart = false, false
		}
	}
	if atEOF && !empty && !inQuotes {
		counts = append(counts, fields)
	}
	return counts
}

// excelSepLine recognises Excel's "sep=X" first line, which names the
// delimiter, and returns X.
func excelSepLine(sample []byte, eol byte) (byte, bool) {
	i := bytes.IndexByte(sample, eol)
	if i < 0 {
		i = len(sample)
	}
	line := bytes.TrimSuffix(sample[:i], []byte{'\r'})
	if len(line) != 5 || !bytes.EqualFold(line[:4], []byte("sep=")) {
		return 0, false
	}
	d, err := checkDelimiter(rune(line[4]))
	if err != nil || d == 0 {
		return 0, false
	}
	return d, true
}

// ParseDelimiter reads a delimiter as people write it: "" (detect), "tab"
// or `\t`, or one character other than a quote or a line break. It returns
// 0 for "detect".
func ParseDelimiter(s string) (rune, error) {
	switch s {
	case "":
		return 0, nil
	case "tab", `\t`:
		return '\t', nil
	}
	r, size := utf8.DecodeRuneInString(s)
	if size != len(s) || r == '"' || r == '\n' || r == '\r' {
		return 0, fmt.Errorf("%q is not a single character (use tab for a tab)", s)
	}
	return r, nil
}
