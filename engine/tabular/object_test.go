package tabular

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAppendObjectEscaping(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value, want string
	}{
		{"plain", `"plain"`},
		{"", `""`},
		{`say "hi"`, `"say \"hi\""`},
		{`C:\path`, `"C:\\path"`},
		{"a\nb\r\nc\td", `"a\nb\r\nc\td"`},
		{"\b\f\x00\x01\x1f\x7f", `"\b\f\u0000\u0001\u001f` + "\x7f" + `"`},
		{"<a href='x'>&amp;</a>", `"<a href='x'>&amp;</a>"`},
		{"José €5 日本 🙂", `"José €5 日本 🙂"`},
		{"bad\xffbyte\xC3", "\"bad\uFFFDbyte\uFFFD\""},
		{"\xE2\x82", "\"\uFFFD\uFFFD\""},
		{"\u2028\u2029", "\"\u2028\u2029\""},
	} {
		got := string(AppendObject(nil, []string{"k"}, []string{tc.value}, false))
		require.Equal(t, `{"k":`+tc.want+`}`, got, "value %q", tc.value)
		require.True(t, json.Valid([]byte(got)), got)
		var m map[string]string
		require.NoError(t, json.Unmarshal([]byte(got), &m))
		require.Equal(t, strings.ToValidUTF8(tc.value, "\uFFFD"), strings.ReplaceAll(m["k"], "\uFFFD\uFFFD", "\uFFFD"))
	}
}

func TestAppendObjectKeysAndShape(t *testing.T) {
	t.Parallel()
	keys := []string{"id", `we"ird`, "name"}
	require.Equal(t, `{"id":"1","we\"ird":"x","name":"Ann"}`,
		string(AppendObject(nil, keys, []string{"1", "x", "Ann"}, false)))
	// Missing values are "", extra values are ignored.
	require.Equal(t, `{"id":"1","we\"ird":"","name":""}`,
		string(AppendObject(nil, keys, []string{"1"}, false)))
	require.Equal(t, `{"id":"1","we\"ird":"2","name":"3"}`,
		string(AppendObject(nil, keys, []string{"1", "2", "3", "4"}, false)))
	require.Equal(t, `{}`, string(AppendObject(nil, nil, []string{"x"}, false)))
	// Appends to dst.
	require.Equal(t, `[{"id":"1","we\"ird":"","name":""}`,
		string(AppendObject([]byte("["), keys, []string{"1"}, false)))
}

func TestAppendObjectTrim(t *testing.T) {
	t.Parallel()
	keys := []string{"a", "b"}
	vals := []string{"  padded\t", "\r\n x y \n"}
	require.Equal(t, `{"a":"padded","b":"x y"}`, string(AppendObject(nil, keys, vals, true)))
	require.Equal(t, `{"a":"  padded\t","b":"\r\n x y \n"}`, string(AppendObject(nil, keys, vals, false)))
}

func TestAppendObjectMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	// Every byte value, alone and in context, decodes back to what
	// encoding/json makes of the same string.
	// Positions 0..16 of a 20-byte string cover both the word-at-a-time
	// scan and the byte loop.
	for c := 0; c < 256; c++ {
		for k := 0; k <= 16; k++ {
			v := strings.Repeat("x", k) + string([]byte{byte(c)}) + strings.Repeat("y", 19-k)
			got := AppendObject(nil, []string{"k"}, []string{v}, false)
			var m map[string]string
			require.NoError(t, json.Unmarshal(got, &m), "byte %#x: %s", c, got)
			want, err := json.Marshal(v)
			require.NoError(t, err)
			var w string
			require.NoError(t, json.Unmarshal(want, &w))
			require.Equal(t, w, m["k"], "byte %#x at %d", c, k)
		}
	}
}

func TestWordNeedsCare(t *testing.T) {
	t.Parallel()
	needsCare := func(c byte) bool { return c < 0x20 || c == '"' || c == '\\' || c >= 0x80 }
	word := func(b []byte) uint64 {
		var w uint64
		for i := 7; i >= 0; i-- {
			w = w<<8 | uint64(b[i])
		}
		return w
	}
	for _, fill := range []byte{' ', '!', '#', 'a', '[', ']', '~', 0x7f} {
		clean := []byte{fill, fill, fill, fill, fill, fill, fill, fill}
		require.False(t, wordNeedsCare(word(clean)), "fill %q", fill)
		for c := 0; c < 256; c++ {
			for pos := 0; pos < 8; pos++ {
				b := append([]byte(nil), clean...)
				b[pos] = byte(c)
				if needsCare(byte(c)) {
					require.True(t, wordNeedsCare(word(b)), "byte %#x at %d", c, pos)
				} else {
					require.False(t, wordNeedsCare(word(b)), "byte %#x at %d", c, pos)
				}
			}
		}
	}
}
