package engine_test

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	cases := []engine.Cursor{
		{UpdatedAt: time.Date(2031, 3, 4, 5, 6, 7, 891_000_000, time.UTC), ID: 42},
		{UpdatedAt: time.UnixMilli(0).UTC(), ID: 0},
		{UpdatedAt: time.Date(1969, 12, 31, 23, 59, 59, 1_000_000, time.UTC), ID: 1 << 62},
	}
	for _, c := range cases {
		s := engine.EncodeCursor(&c)
		require.NotEmpty(t, s)
		require.Equal(t, s, c.String())
		got, err := engine.DecodeCursor(s)
		require.NoError(t, err)
		require.Equal(t, c.ID, got.ID)
		require.True(t, c.UpdatedAt.Equal(got.UpdatedAt), "%s != %s", c.UpdatedAt, got.UpdatedAt)
		require.Equal(t, time.UTC, got.UpdatedAt.Location())
	}
}

func TestCursorKeepsMilliseconds(t *testing.T) {
	t.Parallel()
	loc := time.FixedZone("X", 3*3600)
	in := &engine.Cursor{UpdatedAt: time.Date(2030, 1, 2, 3, 4, 5, 123_456_789, loc), ID: 7}
	got, err := engine.DecodeCursor(engine.EncodeCursor(in))
	require.NoError(t, err)
	require.Equal(t, time.Date(2030, 1, 2, 0, 4, 5, 123_000_000, time.UTC), got.UpdatedAt)
	require.Equal(t, in.UpdatedAt.UnixMilli(), got.UpdatedAt.UnixMilli())
}

func TestCursorIsOpaqueURLSafe(t *testing.T) {
	t.Parallel()
	s := engine.EncodeCursor(&engine.Cursor{UpdatedAt: time.UnixMilli(1700000000123), ID: 99})
	require.NotContains(t, s, "=")
	require.NotContains(t, s, "/")
	require.NotContains(t, s, "+")
	raw, err := base64.RawURLEncoding.DecodeString(s)
	require.NoError(t, err)
	require.Equal(t, "1700000000123|99", string(raw))
	// Padding added by a client is tolerated.
	got, err := engine.DecodeCursor(s + "==")
	require.NoError(t, err)
	require.Equal(t, int64(99), got.ID)
}

func TestCursorEmptyIsNil(t *testing.T) {
	t.Parallel()
	require.Equal(t, "", engine.EncodeCursor(nil))
	var c *engine.Cursor
	require.Equal(t, "", c.String())
	got, err := engine.DecodeCursor("")
	require.NoError(t, err)
	require.Nil(t, got)
}

func TestCursorGarbageIsInvalid(t *testing.T) {
	t.Parallel()
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, s := range []string{
		"!!!not base64!!!",
		"a b",
		enc("no separator"),
		enc("abc|1"),
		enc("123|abc"),
		enc("123|"),
		enc("|5"),
		enc("123|-1"),
		enc("1.5|2"),
	} {
		got, err := engine.DecodeCursor(s)
		require.Error(t, err, "%q", s)
		require.Nil(t, got)
		require.Equal(t, engine.EINVALID, engine.ErrorCode(err), "%q: %v", s, err)
		require.Contains(t, engine.ErrorMessage(err), "invalid cursor")
	}
}
