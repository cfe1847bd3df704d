package export

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEachField(t *testing.T) {
	var got [][2]string
	err := EachField([]byte(`{"b":"x\"y","a":1.50,"n":null,"o":{"k": [1, 2]},"t":true}`), func(k, v string) bool {
		got = append(got, [2]string{k, v})
		return true
	})
	require.NoError(t, err)
	require.Equal(t, [][2]string{{"b", `x"y`}, {"a", "1.50"}, {"n", ""}, {"o", `{"k":[1,2]}`}, {"t", "true"}}, got)

	n := 0
	require.NoError(t, EachField([]byte(`{"a":1,"b":2,"c":3}`), func(string, string) bool { n++; return n < 2 }))
	require.Equal(t, 2, n, "stops when fn says so")
	require.NoError(t, EachField(nil, func(string, string) bool { t.Fatal("no fields"); return false }))
	require.Error(t, EachField([]byte(`{"a":`), func(string, string) bool { return true }))
	require.Error(t, EachField([]byte(`[1]`), func(string, string) bool { return true }))
}
