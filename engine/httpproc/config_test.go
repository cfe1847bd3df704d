package httpproc_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/httpproc"
)

func TestConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	for config, want := range map[string]string{
		``:                                      "url: required",
		`{}`:                                    "url: required",
		`{"url":"http://h/{{.x"}`:               "url: template: ",
		`{"url":"ftp://h/x"}`:                   "url: must start with http:// or https://",
		`{"url":"http://h","map":{"price":""}}`: "map.price: empty path",
		`{"url":"http://h","method":"FETCH"}`:   `method: "FETCH" is not supported`,
		`{"url":"http://h","headers":{"Bad Name":"x"}}`:                        "headers.Bad Name: not a valid header name",
		`{"url":"http://h","headers":{"A":"{{secret \"k\"}}"}}`:                `headers.A: secret "k" is not declared in secrets`,
		`{"url":"http://h","headers":{"A":"{{.a"}}`:                            "headers.A: template: ",
		`{"url":"http://h","query":{"q":"{{.a"}}`:                              "query.q: template: ",
		`{"url":"http://h","body":"{{if}}"}`:                                   "body: template: ",
		`{"url":"http://h","secrets":{"k":"not-an-env"}}`:                      `secrets.k: "not-an-env" is not an environment variable name`,
		`{"url":"http://h","notFound":[99]}`:                                   "notFound[0]: 99 is not an HTTP status",
		`{"url":"http://h","map":{"a":"x"},"notFoundIfEmpty":["b"]}`:           `notFoundIfEmpty[0]: "b" is not a map column`,
		`{"url":"http://h","variants":[{}, {"url":"{{"}]}`:                     "variants[1].url: template: ",
		`{"url":"http://h","variants":[{"method":"BREW"}]}`:                    "variants[0].method: ",
		`{"url":"http://h","variants":[{"headers":{"X":"{{secret \"s\"}}"}}]}`: `variants[0].headers.X: secret "s"`,
		`{"url":"http://h","timeoutMs":-1}`:                                    "timeoutMs: must be between",
		`{"url":"http://h","bogus":1}`:                                         `unknown field "bogus"`,
	} {
		_, err := httpproc.New(json.RawMessage(config))
		require.Error(t, err, config)
		require.Equal(t, engine.EINVALID, engine.ErrorCode(err), config)
		require.Contains(t, engine.ErrorMessage(err), want, config)
	}
}

func TestConfigThroughTheRegistry(t *testing.T) {
	t.Parallel()
	reg := engine.NewRegistry()
	reg.Register(httpproc.Kind, httpproc.New)
	_, err := reg.New("http", json.RawMessage(`{"url":"http://h/x?sku={{.sku}}","map":{"price":" "}}`))
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
	require.Equal(t, "config: map.price: empty path", engine.ErrorMessage(err))

	p, err := reg.New("http", json.RawMessage(`{"url":"{{raw .base}}/x","map":{"name":"a.b"},
		"variants":[{"url":"http://h/y"}],"timeoutMs":500,"secrets":{"k":"API_KEY"}}`))
	require.NoError(t, err)
	v, ok := p.(engine.Variants)
	require.True(t, ok)
	require.Equal(t, 2, v.Variants())
}
