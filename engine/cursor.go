package engine

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// EncodeCursor returns the opaque form of a keyset cursor: base64 of
// "updated_at_ms|id". A nil cursor encodes as "".
func EncodeCursor(c *Cursor) string {
	if c == nil {
		return ""
	}
	raw := strconv.FormatInt(c.UpdatedAt.UnixMilli(), 10) + "|" + strconv.FormatInt(c.ID, 10)
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// DecodeCursor parses a cursor made by EncodeCursor. "" gives nil.
func DecodeCursor(s string) (*Cursor, error) {
	if s == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, Errorf(EINVALID, "invalid cursor %q: not base64", s)
	}
	ts, id, ok := strings.Cut(string(raw), "|")
	if !ok {
		return nil, Errorf(EINVALID, "invalid cursor %q", s)
	}
	msec, err1 := strconv.ParseInt(ts, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if err1 != nil || err2 != nil || n < 0 {
		return nil, Errorf(EINVALID, "invalid cursor %q", s)
	}
	return &Cursor{UpdatedAt: time.UnixMilli(msec).UTC(), ID: n}, nil
}

// String is the cursor's opaque form.
func (c *Cursor) String() string { return EncodeCursor(c) }

var _ fmt.Stringer = (*Cursor)(nil)
