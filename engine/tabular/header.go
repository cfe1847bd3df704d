package tabular

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// uniqueHeader turns the header record into unique column names: a blank name
// becomes "column_N" (N the 1-based column index), then repeats get "_2",
// "_3", ... suffixes. Non-blank names are kept exactly as in the file.
func uniqueHeader(fields []string) []string {
	names := make([]string, len(fields))
	for i, f := range fields {
		if strings.TrimSpace(f) == "" {
			f = columnName(i)
		}
		names[i] = f
	}
	return dedupe(names)
}

// uniqueKeys returns the normalised key of each header field (see
// NormalizeKey), "column_N" where that is empty, made unique like the header.
func uniqueKeys(fields []string) []string {
	keys := make([]string, len(fields))
	for i, f := range fields {
		k := NormalizeKey(f)
		if k == "" {
			k = columnName(i)
		}
		keys[i] = k
	}
	return dedupe(keys)
}

func columnName(i int) string { return "column_" + strconv.Itoa(i+1) }

// dedupe makes names unique in place and returns it. The first occurrence of
// a name keeps it; later ones get the smallest suffix "_K" (K >= 2) that
// makes a name neither in the input nor handed out before, so a column the
// file itself calls "a_2" keeps that name.
func dedupe(names []string) []string {
	taken := make(map[string]bool, len(names))
	for _, n := range names {
		taken[n] = true
	}
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		if !seen[n] {
			seen[n] = true
			continue
		}
		for k := 2; ; k++ {
			c := n + "_" + strconv.Itoa(k)
			if !taken[c] {
				taken[c], seen[c] = true, true
				names[i] = c
				break
			}
		}
	}
	return names
}

// NormalizeKey returns the canonical key for a column name: lower-cased, with
// every run of characters that are not letters or numbers (Unicode-aware:
// "Größe" stays "größe") turned into a single '_' and no '_' at either end.
// "  Product Name " gives "product_name", "Price (€)" gives "price". The
// result is "" when s has no letter or number; callers then use "column_N".
// Combining marks that follow a letter are kept with it.
func NormalizeKey(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	gap := false // a separator is pending
	for i := 0; i < len(s); {
		c := rune(s[i])
		size := 1
		if c >= utf8.RuneSelf {
			c, size = utf8.DecodeRuneInString(s[i:])
		}
		i += size
		keep := false
		switch {
		case c < utf8.RuneSelf:
			keep = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		case c == utf8.RuneError && size == 1:
			keep = false
		case unicode.IsLetter(c) || unicode.IsNumber(c):
			keep = true
		case unicode.IsMark(c):
			keep = b.Len() > 0 && !gap
		}
		if !keep {
			gap = true
			continue
		}
		if gap && b.Len() > 0 {
			b.WriteByte('_')
		}
		gap = false
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b.WriteByte(byte(c))
		} else {
			b.WriteRune(unicode.ToLower(c))
		}
	}
	return b.String()
}
