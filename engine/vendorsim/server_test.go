package vendorsim_test

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine/vendorsim"
)

// get sends a GET and returns status, headers and body.
func get(t *testing.T, url string, h map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

func newServer(t *testing.T, cfg vendorsim.Config) *vendorsim.Server {
	t.Helper()
	s := vendorsim.New(cfg)
	t.Cleanup(s.Close)
	require.True(t, strings.HasPrefix(s.URL(), "http://127.0.0.1:"), s.URL())
	return s
}

func TestLookupAnswersKnownMissingAndMalformedKeys(t *testing.T) {
	t.Parallel()
	s := newServer(t, vendorsim.Config{NotFoundKeys: []string{"gone"}, MalformedKeys: []string{"bad"},
		StatusKeys: map[string]int{"nope": 400}})

	code, _, body := get(t, s.URL()+"/lookup?sku=A%201", map[string]string{"Idempotency-Key": "k1"})
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"product":{"sku":"A 1","name":"Name A 1","price":12.5}}`, body)
	require.Equal(t, "k1", s.LastHeaders("A 1").Get("Idempotency-Key"))

	code, _, _ = get(t, s.URL()+"/lookup?sku=gone", nil)
	require.Equal(t, 404, code)
	code, _, body = get(t, s.URL()+"/lookup?sku=bad", nil)
	require.Equal(t, 200, code)
	require.False(t, json.Valid([]byte(body)))
	code, _, _ = get(t, s.URL()+"/lookup?sku=nope", nil)
	require.Equal(t, 400, code)
	code, _, _ = get(t, s.URL()+"/lookup", nil)
	require.Equal(t, 400, code)

	require.Equal(t, vendorsim.Stats{Requests: 5, OK: 1, NotFound: 1, ClientErrors: 2, Malformed: 1}, s.Stats())
	require.Equal(t, 1, s.Hits("gone"))
}

func TestPostLookupAndEcho(t *testing.T) {
	t.Parallel()
	s := newServer(t, vendorsim.Config{Echo: true})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL()+"/lookup?x=1", strings.NewReader(`{"sku":"P9"}`))
	require.NoError(t, err)
	req.Header.Set("X-Token", "abc")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Product struct{ SKU, Name string }
		Request struct {
			Method  string
			Headers map[string]string
			Query   string
		}
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, "P9", out.Product.SKU)
	require.Equal(t, "POST", out.Request.Method)
	require.Equal(t, "abc", out.Request.Headers["X-Token"])
	require.Equal(t, "x=1", out.Request.Query)
}

func TestRateLimitAnswers429WithRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := newServer(t, vendorsim.Config{RatePerSec: 0.5, Now: clock})
	code, _, _ := get(t, s.URL()+"/lookup?sku=a", nil)
	require.Equal(t, 200, code)
	code, h, _ := get(t, s.URL()+"/lookup?sku=a", nil)
	require.Equal(t, 429, code)
	secs, err := strconv.Atoi(h.Get("Retry-After"))
	require.NoError(t, err)
	require.Equal(t, 2, secs)

	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	code, _, _ = get(t, s.URL()+"/lookup?sku=a", nil)
	require.Equal(t, 200, code)
	require.Equal(t, int64(1), s.Stats().TooMany)

	d := newServer(t, vendorsim.Config{RatePerSec: 1, RetryAfterDate: true, Now: clock})
	get(t, d.URL()+"/lookup?sku=a", nil)
	code, h, _ = get(t, d.URL()+"/lookup?sku=a", nil)
	require.Equal(t, 429, code)
	at, err := http.ParseTime(h.Get("Retry-After"))
	require.NoError(t, err)
	require.Equal(t, clock().Add(time.Second).Unix(), at.Unix())
}

func TestErr5xxRateIsSeededAndRoughlyRight(t *testing.T) {
	t.Parallel()
	run := func() []int {
		s := newServer(t, vendorsim.Config{Err5xxRate: 0.3, Seed: 7})
		codes := make([]int, 200)
		for i := range codes {
			codes[i], _, _ = get(t, s.URL()+"/lookup?sku=x", nil)
		}
		st := s.Stats()
		require.Equal(t, st.Requests, st.OK+st.ServerErrors)
		require.InDelta(t, 60, st.ServerErrors, 25)
		return codes
	}
	require.Equal(t, run(), run(), "the same seed gives the same answers")
}

func TestRecordsMatchInAnyQueryOrder(t *testing.T) {
	t.Parallel()
	s := newServer(t, vendorsim.Config{Records: map[string]string{
		"/w/api.php?action=wbsearchentities&search=Berlin": `{"search":[{"id":"Q64"}]}`,
	}})
	code, _, body := get(t, s.URL()+"/w/api.php?search=Berlin&action=wbsearchentities", nil)
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"search":[{"id":"Q64"}]}`, body)
	code, _, _ = get(t, s.URL()+"/w/api.php?search=Paris&action=wbsearchentities", nil)
	require.Equal(t, 404, code)
}

func TestLatencyAndClientGivingUp(t *testing.T) {
	t.Parallel()
	s := newServer(t, vendorsim.Config{LatencyFunc: func(*rand.Rand) time.Duration { return time.Hour }})
	// The client gives up once the server has the request (not after a
	// fixed time, which a loaded machine can spend before it arrives).
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for s.Hits("slow") == 0 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/lookup?sku=slow", nil)
	require.NoError(t, err)
	_, err = http.DefaultClient.Do(req)
	require.ErrorIs(t, err, context.Canceled, "the client gives up")
	s.SetLatency(0)
	code, _, _ := get(t, s.URL()+"/lookup?sku=fast", nil)
	require.Equal(t, 200, code)
	require.Equal(t, 1, s.Hits("slow"))
}
