package export

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNeutralize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"a=b", "a=b"},
		{" =1", " =1"},
		{"'quoted", "'quoted"},
		{"=SUM(A1)", "'=SUM(A1)"},
		{"=", "'="},
		{"+1", "+1"},
		{"+", "'+"},
		{"+1+2", "'+1+2"},
		{"-5", "-5"},
		{"-5.25", "-5.25"},
		{"-.5", "-.5"},
		{"-5.", "-5."},
		{"-1e-3", "-1e-3"},
		{"-1E+999", "-1E+999"},
		{"-1e", "'-1e"},
		{"-.", "'-."},
		{"-x", "'-x"},
		{"-", "'-"},
		{"- 5", "'- 5"},
		{"-5 ", "'-5 "},
		{"-Inf", "'-Inf"},
		{"-NaN", "'-NaN"},
		{"-0x1p3", "'-0x1p3"},
		{"-1_000", "'-1_000"},
		{"@cmd", "'@cmd"},
		{"@SUM(1+1)*cmd|' /C calc'!A0", "'@SUM(1+1)*cmd|' /C calc'!A0"},
		{"\t=1", "'\t=1"},
		{"\r=1", "'\r=1"},
		{"\t5", "'\t5"},
		{"5", "5"},
		{"12abc", "12abc"},
	} {
		require.Equal(t, tc.want, Neutralize(tc.in), "%q", tc.in)
	}
}

// TestIsDecimalAgreesWithParseFloat checks isDecimal against strconv on
// decimal-looking inputs (ParseFloat also takes inf, nan, hex and
// underscores, which isDecimal rejects on purpose).
func TestIsDecimalAgreesWithParseFloat(t *testing.T) {
	t.Parallel()
	alphabet := []byte("01.e-+")
	var gen func(prefix []byte, n int)
	gen = func(prefix []byte, n int) {
		s := string(prefix)
		_, err := strconv.ParseFloat(s, 64)
		ok := err == nil || err.(*strconv.NumError).Err == strconv.ErrRange
		require.Equal(t, ok, isDecimal(s), "%q", s)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			gen(append(prefix, c), n-1)
		}
	}
	gen(nil, 5)
}
