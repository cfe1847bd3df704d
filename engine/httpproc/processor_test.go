package httpproc_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/httpproc"
	"github.com/sluicehq/sluice/engine/vendorsim"
)

// sim starts a vendor simulator for the test.
func sim(t *testing.T, cfg vendorsim.Config) *vendorsim.Server {
	t.Helper()
	s := vendorsim.New(cfg)
	t.Cleanup(s.Close)
	return s
}

// newProc builds an http processor; "$URL" in config is replaced by base.
func newProc(t *testing.T, base, config string) *httpproc.Processor {
	t.Helper()
	p, err := httpproc.New(json.RawMessage(strings.ReplaceAll(config, "$URL", base)))
	require.NoError(t, err)
	hp, ok := p.(*httpproc.Processor)
	require.True(t, ok)
	t.Cleanup(hp.CloseIdleConnections)
	return hp
}

// task is attempt `attempt` of item 42 at stage 0 with the given input.
func task(input string, attempt, strategy int) *engine.Task {
	return &engine.Task{Item: &engine.Item{ID: 42, JobID: 7, Seq: 1, Stage: 0, Attempts: attempt},
		Input: json.RawMessage(input), Attempt: attempt, Strategy: strategy}
}

// failure checks err is an *engine.Failure of class and returns it.
func failure(t *testing.T, err error, class engine.ErrorClass) *engine.Failure {
	t.Helper()
	require.Error(t, err)
	var f *engine.Failure
	require.True(t, errors.As(err, &f), "not a Failure: %v", err)
	require.Equal(t, class, f.Class, "error: %v", err)
	require.Equal(t, class, engine.ClassOf(err))
	return f
}

// detail decodes a failure's detail.
func detail(t *testing.T, f *engine.Failure) httpproc.Detail {
	t.Helper()
	var d httpproc.Detail
	require.NoError(t, json.Unmarshal(f.Detail, &d), "detail %s", f.Detail)
	return d
}

// setenv sets a process-wide environment variable whose name is unique to
// the test (t.Setenv cannot be used with t.Parallel).
func setenv(t *testing.T, name, value string) {
	t.Helper()
	require.NoError(t, os.Setenv(name, value))
	t.Cleanup(func() { _ = os.Unsetenv(name) })
}

const lookup = `{"url":"$URL/lookup?sku={{.sku}}","map":{"name":"product.name","price":"product.price","sku":"product.sku","product":"product"}}`

func TestMapsNumbersStringsAndObjects(t *testing.T) {
	t.Parallel()
	s := sim(t, vendorsim.Config{})
	p := newProc(t, s.URL(), lookup)
	out, err := p.Process(t.Context(), task(`{"sku":"A 1/&x"}`, 1, 0))
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"Name A 1/&x","price":12.5,"sku":"A 1/&x",
		"product":{"sku":"A 1/&x","name":"Name A 1/&x","price":12.5}}`, string(out))
	require.Contains(t, string(out), `"price":12.5`, "numbers stay numbers")
	require.Equal(t, 1, s.Hits("A 1/&x"), "the sku is escaped in the URL")
	require.Equal(t, 0, p.Variants())
}

func TestNumberFieldsKeepTheirText(t *testing.T) {
	t.Parallel()
	s := sim(t, vendorsim.Config{})
	p := newProc(t, s.URL(), lookup)
	_, err := p.Process(t.Context(), task(`{"sku":12345678901234567890}`, 1, 0))
	require.NoError(t, err)
	require.Equal(t, 1, s.Hits("12345678901234567890"))
}

func TestMissingTemplateFieldIsPermanentAndNamed(t *testing.T) {
	t.Parallel()
	s := sim(t, vendorsim.Config{})
	p := newProc(t, s.URL(), lookup)
	_, err := p.Process(t.Context(), task(`{"name":"x"}`, 1, 0))
	f := failure(t, err, engine.ClassPermanent)
	require.Contains(t, err.Error(), `url: the item has no field "sku" (fields: name)`)
	require.Zero(t, detail(t, f).Status)
	require.Zero(t, s.Stats().Requests)
}

func TestNotFoundStatusAndEmptyPaths(t *testing.T) {
	t.Parallel()
	s := sim(t, vendorsim.Config{NotFoundKeys: []string{"gone"}, Records: map[string]string{
		"/lookup?sku=empty": `{"product":{"name":"","price":null,"tags":[]}}`,
		"/lookup?sku=half":  `{"product":{"name":"Half"}}`,
	}})
	p := newProc(t, s.URL(), `{"url":"$URL/lookup?sku={{.sku}}","map":{"name":"product.name","price":"product.price","tags":"product.tags"}}`)
	_, err := p.Process(t.Context(), task(`{"sku":"gone"}`, 1, 0))
	f := failure(t, err, engine.ClassNotFound)
	require.Equal(t, http.StatusNotFound, detail(t, f).Status)

	_, err = p.Process(t.Context(), task(`{"sku":"empty"}`, 1, 0))
	failure(t, err, engine.ClassNotFound)
	require.Contains(t, err.Error(), "name (product.name)")

	out, err := p.Process(t.Context(), task(`{"sku":"half"}`, 1, 0))
	require.NoError(t, err, "one column is enough by default")
	require.JSONEq(t, `{"name":"Half","price":null,"tags":null}`, string(out))

	req := newProc(t, s.URL(), `{"url":"$URL/lookup?sku={{.sku}}","map":{"name":"product.name","price":"product.price"},"notFoundIfEmpty":["price"]}`)
	_, err = req.Process(t.Context(), task(`{"sku":"half"}`, 1, 0))
	failure(t, err, engine.ClassNotFound)
	require.Contains(t, err.Error(), "price (product.price)")

	off := newProc(t, s.URL(), `{"url":"$URL/lookup?sku={{.sku}}","map":{"name":"product.name"},"notFoundIfEmpty":[],"notFound":[]}`)
	_, err = off.Process(t.Context(), task(`{"sku":"empty"}`, 1, 0))
	require.NoError(t, err)
	_, err = off.Process(t.Context(), task(`{"sku":"gone"}`, 1, 0))
	failure(t, err, engine.ClassPermanent)
}

func TestRateLimitedHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	secs := sim(t, vendorsim.Config{RatePerSec: 0.5})
	p := newProc(t, secs.URL(), lookup)
	_, err := p.Process(t.Context(), task(`{"sku":"a"}`, 1, 0))
	require.NoError(t, err)
	_, err = p.Process(t.Context(), task(`{"sku":"a"}`, 1, 0))
	f := failure(t, err, engine.ClassRateLimited)
	require.Equal(t, 2*time.Second, f.RetryAfter)
	require.Equal(t, http.StatusTooManyRequests, detail(t, f).Status)

	date := sim(t, vendorsim.Config{RatePerSec: 0.2, RetryAfterDate: true})
	p = newProc(t, date.URL(), lookup)
	_, err = p.Process(t.Context(), task(`{"sku":"a"}`, 1, 0))
	require.NoError(t, err)
	_, err = p.Process(t.Context(), task(`{"sku":"a"}`, 1, 0))
	f = failure(t, err, engine.ClassRateLimited)
	// An HTTP date has whole seconds: 5 s ahead, less the part lost.
	require.Greater(t, f.RetryAfter, 3*time.Second)
	require.LessOrEqual(t, f.RetryAfter, 5*time.Second)
}

func TestStatusClasses(t *testing.T) {
	t.Parallel()
	s := sim(t, vendorsim.Config{StatusKeys: map[string]int{"e500": 500, "e503": 503, "e400": 400, "e401": 401}})
	p := newProc(t, s.URL(), lookup)
	for key, class := range map[string]engine.ErrorClass{
		"e500": engine.ClassTransient, "e503": engine.ClassTransient,
		"e400": engine.ClassPermanent, "e401": engine.ClassPermanent,
	} {
		_, err := p.Process(t.Context(), task(`{"sku":"`+key+`"}`, 1, 0))
		f := failure(t, err, class)
		require.Contains(t, err.Error(), "HTTP "+key[1:])
		require.Contains(t, err.Error(), "configured for key", "the error shows the start of the body")
		d := detail(t, f)
		require.Equal(t, key[1:], strings.TrimSpace(strings.Fields(err.Error())[1]))
		require.Equal(t, s.URL()+"/lookup?sku="+key, d.URL)
		require.Equal(t, "GET", d.Method)
		require.Positive(t, d.DurationMs)
	}
}

func TestMalformedJSONIsTransientOnceThenPermanent(t *testing.T) {
	t.Parallel()
	s := sim(t, vendorsim.Config{MalformedKeys: []string{"bad"}})
	p := newProc(t, s.URL(), lookup)
	_, err := p.Process(t.Context(), task(`{"sku":"bad"}`, 1, 0))
	failure(t, err, engine.ClassTransient)
	require.Contains(t, err.Error(), "not valid JSON")
	_, err = p.Process(t.Context(), task(`{"sku":"bad"}`, 2, 0))
	failure(t, err, engine.ClassPermanent)
}

func TestTimeoutAndConnectionRefusedAreTransient(t *testing.T) {
	t.Parallel()
	slow := sim(t, vendorsim.Config{Latency: time.Hour})
	p := newProc(t, slow.URL(), `{"url":"$URL/lookup?sku={{.sku}}","timeoutMs":50}`)
	_, err := p.Process(t.Context(), task(`{"sku":"a"}`, 1, 0))
	f := failure(t, err, engine.ClassTransient)
	require.Contains(t, err.Error(), "no answer within 50ms")
	require.Zero(t, detail(t, f).Status)

	gone := vendorsim.New(vendorsim.Config{})
	base := gone.URL()
	gone.Close()
	p = newProc(t, base, lookup)
	_, err = p.Process(t.Context(), task(`{"sku":"a"}`, 1, 0))
	failure(t, err, engine.ClassTransient)
	require.Contains(t, err.Error(), "request failed")
	require.NotContains(t, err.Error(), base, "the URL is in the detail, not the message")
}

func TestVariantsRotateTheRequest(t *testing.T) {
	t.Parallel()
	s := sim(t, vendorsim.Config{NotFoundKeys: []string{"main"}})
	p := newProc(t, s.URL(), `{"url":"$URL/lookup?sku={{.sku}}","map":{"name":"product.name"},
		"headers":{"X-A":"a"},
		"variants":[{"url":"$URL/lookup?sku={{.alt}}","headers":{"X-B":"b"}},{"query":{"sku":"{{.sku}}-q"}}]}`)
	require.Equal(t, 3, p.Variants())
	_, err := p.Process(t.Context(), task(`{"sku":"main","alt":"other"}`, 1, 0))
	f := failure(t, err, engine.ClassNotFound)
	require.Zero(t, detail(t, f).Variant)

	out, err := p.Process(t.Context(), task(`{"sku":"main","alt":"other"}`, 2, 1))
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"Name other"}`, string(out))
	h := s.LastHeaders("other")
	require.Equal(t, "a", h.Get("X-A"), "variant headers merge over the main ones")
	require.Equal(t, "b", h.Get("X-B"))

	out, err = p.Process(t.Context(), task(`{"sku":"main","alt":"other"}`, 3, 2))
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"Name main-q"}`, string(out), "query replaces the URL's parameter")
}

var traceparent = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`)

func TestIdempotencyKeyStableTraceparentFresh(t *testing.T) {
	t.Parallel()
	s := sim(t, vendorsim.Config{StatusKeys: map[string]int{"k": 503}})
	p := newProc(t, s.URL(), lookup)
	var keys, traces []string
	for attempt := 1; attempt <= 2; attempt++ {
		_, err := p.Process(t.Context(), task(`{"sku":"k"}`, attempt, 0))
		f := failure(t, err, engine.ClassTransient)
		h := s.LastHeaders("k")
		keys = append(keys, h.Get("Idempotency-Key"))
		traces = append(traces, h.Get("Traceparent"))
		require.Equal(t, h.Get("Traceparent"), detail(t, f).Traceparent)
	}
	require.Equal(t, []string{"sluice-42-0", "sluice-42-0"}, keys)
	require.NotEqual(t, traces[0], traces[1])
	for _, tp := range traces {
		require.Regexp(t, traceparent, tp)
	}
}

func TestPostWithJSONBody(t *testing.T) {
	t.Parallel()
	s := sim(t, vendorsim.Config{Echo: true})
	p := newProc(t, s.URL(), `{"method":"post","url":"$URL/lookup","body":"{\"sku\": {{json .sku}}}",
		"map":{"name":"product.name","method":"request.method","ctype":"request.headers.Content-Type"}}`)
	out, err := p.Process(t.Context(), task(`{"sku":"Q \"1\""}`, 1, 0))
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"Name Q \"1\"","method":"POST","ctype":"application/json"}`, string(out))

	bad := newProc(t, s.URL(), `{"method":"POST","url":"$URL/lookup","body":"{\"sku\": {{.sku}}}"}`)
	_, err = bad.Process(t.Context(), task(`{"sku":"not json"}`, 1, 0))
	failure(t, err, engine.ClassPermanent)
	require.Contains(t, err.Error(), "body: the rendered template is not valid JSON")
}
