package httpproc

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEscapeComponent(t *testing.T) {
	t.Parallel()
	require.Equal(t, "a-b.c_d~9", escapeComponent("a-b.c_d~9"))
	require.Equal(t, "A%20B%26C%3DD%2F%3F%23%2B", escapeComponent("A B&C=D/?#+"))
	require.Equal(t, "%C3%A9", escapeComponent("é"))
}

func TestURLActionsAreEscapedUnlessRaw(t *testing.T) {
	t.Parallel()
	tm, err := compile("url", `http://h/{{.a}}/x?q={{.a}}&r={{raw .b}}&s={{urlquery .a}}{{$v := .a}}&t={{$v}}{{if .a}}&u={{.a}}{{end}}`, nil, true)
	require.NoError(t, err)
	out, err := render("url", tm, map[string]any{"a": "x y/z", "b": "p&q=1"})
	require.NoError(t, err)
	require.Equal(t, "http://h/x%20y%2Fz/x?q=x%20y%2Fz&r=p&q=1&s=x+y%2Fz&t=x%20y%2Fz&u=x%20y%2Fz", out)
}

func TestRenderMissingFieldAndGet(t *testing.T) {
	t.Parallel()
	tm, err := compile("headers.X", `{{.a}}-{{get . "b"}}`, nil, false)
	require.NoError(t, err)
	out, err := render("headers.X", tm, map[string]any{"a": "1"})
	require.NoError(t, err)
	require.Equal(t, "1-", out)
	_, err = render("headers.X", tm, map[string]any{"z": "1", "y": 2})
	require.EqualError(t, err, `headers.X: the item has no field "a" (fields: y, z)`)
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"7":   7 * time.Second,
		" 0 ": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):       0,
		"99999999999": maxRetryAfter,
	} {
		d, ok := ParseRetryAfter(v, now)
		require.True(t, ok, v)
		require.Equal(t, want, d, v)
	}
	for _, v := range []string{"", "soon", "-3"} {
		_, ok := ParseRetryAfter(v, now)
		require.False(t, ok, v)
	}
}

func TestRedactorKeepsJSONValid(t *testing.T) {
	t.Parallel()
	require.NoError(t, os.Setenv("SLUICE_TEST_REDACT_UNIT", "n"))
	t.Cleanup(func() { _ = os.Unsetenv("SLUICE_TEST_REDACT_UNIT") })
	r := &redactor{}
	require.Equal(t, []byte(`{"a":"n"}`), r.json([]byte(`{"a":"n"}`)), "no secrets, no change")
	r = newRedactor(map[string]string{"k": "SLUICE_TEST_REDACT_UNIT"})
	require.JSONEq(t, `{"a":"li***e\nx","***":1.50}`, string(r.json([]byte(`{"a":"line\nx","n":1.50}`))))
}
