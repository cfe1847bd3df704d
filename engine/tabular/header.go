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
	generated := make([]bool, len(fields))
	for i, f := range fields {
		names[i] = f
		if strings.TrimSpace(f) == "" {
			names[i], generated[i] = columnName(i), true
		}
	}
	return dedupe(names, generated)
}

// uniqueKeys returns the normalised key of each header field (see
// NormalizeKey), "column_N" where that is empty, made unique like the header.
func uniqueKeys(fields []string) []string {
	keys := make([]string, len(fields))
	generated := make([]bool, len(fields))
	for i, f := range fields {
		keys[i] = NormalizeKey(f)
		if keys[i] == "" {
			keys[i], generated[i] = columnName(i), true
		}
	}
	return dedupe(keys, generated)
}

func columnName(i int) string { return "column_" + strconv.Itoa(i+1) }

// dedupe makes names unique in place and returns it. Each name is kept by its
// first occurrence, preferring one that is not generated (a "column_N" made
// up for a blank name yields to a column the file itself calls so). Every
// other occurrence gets the smallest suffix "_K" (K >= 2) that makes a name
// neither in the input nor handed out before, so a column the file calls
// "a_2" keeps that name too. generated may be nil.
func dedupe(names []string, generated []bool) []string {
	taken := make(map[string]bool, len(names))
	owner := make(map[string]int, len(names))
	for i, n := range names {
		taken[n] = true
		if _, ok := owner[n]; !ok && (generated == nil || !generated[i]) {
			owner[n] = i
		}
	}
	for i, n := range names {
		if _, ok := owner[n]; !ok {
			owner[n] = i
		}
	}
	for i, n := range names {
		if owner[n] == i {
			continue
		}
		for k := 2; ; k++ {
			c := n + "_" + strconv.Itoa(k)
			if !taken[c] {
				taken[c] = true
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
