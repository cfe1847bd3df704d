package httpproc_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/vendorsim"
)

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
