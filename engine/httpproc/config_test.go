package httpproc_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/httpproc"
	"github.com/sluicehq/sluice/engine/vendorsim"
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

// secretValue has characters that every encoding changes.
const secretValue = "s3cr3t/v&l ue<>"

func TestSecretsReachTheRequestButNothingElse(t *testing.T) {
	t.Parallel()
	setenv(t, "SLUICE_TEST_SECRET_ECHO", secretValue)
	s := sim(t, vendorsim.Config{Echo: true, StatusKeys: map[string]int{secretValue: 400, "e500": 500}})
	p := newProc(t, s.URL(), `{"url":"$URL/lookup?sku={{.sku}}&token={{secret \"key\"}}",
		"headers":{"X-Api-Key":"{{secret \"key\"}}"},
		"secrets":{"key":"SLUICE_TEST_SECRET_ECHO"},
		"map":{"name":"product.name","echoed":"request.headers.X-Api-Key","query":"request.query","request":"request"}}`)

	out, err := p.Process(t.Context(), task(`{"sku":"a"}`, 1, 0))
	require.NoError(t, err)
	require.Equal(t, secretValue, s.LastHeaders("a").Get("X-Api-Key"), "the vendor got the secret")
	require.True(t, json.Valid(out))
	requireNoSecret(t, string(out))
	var res map[string]any
	require.NoError(t, json.Unmarshal(out, &res))
	require.Equal(t, "***", res["echoed"])
	require.Equal(t, "sku=a&token=***", res["query"])

	_, err = p.Process(t.Context(), task(`{"sku":"e500"}`, 1, 0))
	f := failure(t, err, engine.ClassTransient)
	require.Equal(t, s.URL()+"/lookup?sku=e500&token=***", detail(t, f).URL)
	requireNoSecret(t, string(f.Detail))
	requireNoSecret(t, err.Error())

	// The vendor's error body names the key, which is the secret here.
	leaky := newProc(t, s.URL(), `{"url":"$URL/lookup?sku={{secret \"key\"}}","secrets":{"key":"SLUICE_TEST_SECRET_ECHO"}}`)
	_, err = leaky.Process(t.Context(), task(`{}`, 1, 0))
	f = failure(t, err, engine.ClassPermanent)
	require.Contains(t, err.Error(), "***")
	requireNoSecret(t, err.Error())
	requireNoSecret(t, string(f.Detail))
}

func TestMissingSecretIsPermanentAndNamesTheVariable(t *testing.T) {
	t.Parallel()
	s := sim(t, vendorsim.Config{})
	p := newProc(t, s.URL(), `{"url":"$URL/lookup?sku={{.sku}}","headers":{"Authorization":"Bearer {{secret \"tok\"}}"},
		"secrets":{"tok":"SLUICE_TEST_SECRET_NEVER_SET"}}`)
	_, err := p.Process(t.Context(), task(`{"sku":"a"}`, 1, 0))
	failure(t, err, engine.ClassPermanent)
	require.Contains(t, err.Error(), `headers.Authorization: secret "tok": environment variable SLUICE_TEST_SECRET_NEVER_SET is not set`)
	require.Zero(t, s.Stats().Requests)
}

// requireNoSecret checks that no form of the secret is in s.
func requireNoSecret(t *testing.T, s string) {
	t.Helper()
	for _, form := range []string{secretValue, "s3cr3t"} {
		require.False(t, strings.Contains(s, form), "secret leaked in %s", s)
	}
}
