// Package httpproc is the "http" processor: it sends one request per item,
// templated from the item's fields, and maps JSON paths of the answer to
// result columns. Answers are classified for the retry policy: NOT_FOUND
// rules, 429 (rate limited, honouring Retry-After), 5xx, timeouts and
// connection errors (transient), other 4xx (permanent), malformed JSON
// (transient on the first attempt, permanent after).
//
// Templates are Go text/template over the item's normalised fields, with
// missingkey=error (a missing field fails the item permanently, naming the
// field) and these functions:
//
//	secret "name"   the value of a declared secret (from its environment variable)
//	json .x         .x as JSON (a quoted string, a number, ...), for bodies
//	get . "x"       .x, or "" when the item has no field x
//	raw .x          .x unescaped in the url template
//	urlescape .x    .x percent-encoded (what the url template does by itself)
//
// In the url template every action's output is percent-encoded, so
// http://host/lookup?sku={{.sku}} is safe for any sku, in a path segment as
// in a query value; {{raw .x}} (or urlquery) opts out. Values of the query
// map are encoded as query values; headers and body are not escaped.
//
// Every request carries Idempotency-Key: sluice-<item id>-<stage>, the same
// for every attempt of an item at a stage, and a fresh W3C traceparent per
// attempt. Failures carry a Detail (status, duration, redacted URL,
// traceparent, variant) for the attempt record. Secret values are replaced
// by "***" in errors, details and results.
//
// Successful attempts report the same Detail through Task.Detail.
package httpproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/hostlimit"
)

// Kind is the processor kind under which the engine registers New.
const Kind = "http"

// Processor is a configured http stage. It is safe for concurrent use.
type Processor struct {
	cfg      *Config
	main     *compiled
	variants []*compiled
	mapping  *mapping
	notFound map[int]bool
	timeout  time.Duration
	client   *http.Client
	// limits paces requests per host (nil: no pacing).
	limits *hostlimit.Limiter
}

// NewFactory returns a factory whose processors pace their requests per
// host with limits (one Limiter per process, shared by every http stage):
// each request waits for its host's token and concurrency slot, reports its
// outcome, and a 429's Retry-After pauses the host for every worker.
func NewFactory(limits *hostlimit.Limiter) engine.Factory {
	return func(config json.RawMessage) (engine.Processor, error) {
		p, err := New(config)
		if err != nil {
			return nil, err
		}
		p.(*Processor).limits = limits
		return p, nil
	}
}

// New builds an http processor from its stage configuration (an
// engine.Factory). It parses every template and returns an EINVALID error
// naming the field when something is wrong.
func New(config json.RawMessage) (engine.Processor, error) {
	cfg, err := parseConfig(config)
	if err != nil {
		return nil, err
	}
	p := &Processor{cfg: cfg, mapping: newMapping(cfg), notFound: map[int]bool{}, timeout: cfg.timeout()}
	if p.main, err = compileRequest("", cfg.Request, nil, cfg.Secrets); err != nil {
		return nil, err
	}
	for i := range cfg.Variants {
		v, err := compileRequest(fmt.Sprintf("variants[%d].", i), cfg.Variants[i], p.main, cfg.Secrets)
		if err != nil {
			return nil, err
		}
		p.variants = append(p.variants, v)
	}
	for _, code := range cfg.NotFound {
		p.notFound[code] = true
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 512
	tr.MaxIdleConnsPerHost = 128
	tr.IdleConnTimeout = 90 * time.Second
	p.client = &http.Client{Transport: tr}
	return p, nil
}

// Variants returns the number of query strategies: 1 + len(variants) when
// the stage has variants, 0 when it has none.
func (p *Processor) Variants() int {
	if len(p.variants) == 0 {
		return 0
	}
	return 1 + len(p.variants)
}

// CloseIdleConnections closes the idle connections of the processor's
// client (for a processor that is being replaced).
func (p *Processor) CloseIdleConnections() { p.client.CloseIdleConnections() }

// request returns the request of a strategy and the strategy it is: a
// strategy without a variant (the stage's variants changed) falls back to
// the main request.
func (p *Processor) request(strategy int) (*compiled, int) {
	if strategy >= 1 && strategy <= len(p.variants) {
		return p.variants[strategy-1], strategy
	}
	return p.main, 0
}

// Process sends the item's request and maps the answer.
func (p *Processor) Process(ctx context.Context, t *engine.Task) (json.RawMessage, error) {
	c, variant := p.request(t.Strategy)
	d := &Detail{Method: c.method, Traceparent: NewTraceparent(), Variant: variant}
	red := newRedactor(p.cfg.Secrets)
	fail := func(class engine.ErrorClass, after time.Duration, err error) error {
		return &engine.Failure{Class: class, RetryAfter: after, Detail: d.marshal(), Err: red.error(err)}
	}
	data, err := fields(t.Input)
	if err != nil {
		return nil, fail(engine.ClassPermanent, 0, err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := c.build(ctx, data)
	if err != nil {
		return nil, fail(engine.ClassPermanent, 0, err)
	}
	d.URL = red.string(req.URL.String())
	if req.Header.Get("Idempotency-Key") == "" && t.Item != nil {
		req.Header.Set("Idempotency-Key", IdempotencyKey(t.Item))
	}
	req.Header.Set("Traceparent", d.Traceparent)

	host := req.URL.Host
	release := func(hostlimit.Outcome) {}
	if p.limits != nil {
		rel, err := p.limits.Acquire(ctx, host)
		if err != nil {
			return nil, fail(engine.ClassTransient, 0, fmt.Errorf("waiting for a request slot for %s: %w", host, err))
		}
		release = rel
	}
	start := time.Now()
	resp, err := p.client.Do(req)
	if err != nil {
		d.DurationMs = millis(time.Since(start))
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			release(hostlimit.Timeout)
		} else {
			release(hostlimit.NetworkError)
		}
		return nil, fail(engine.ClassTransient, 0, p.sendError(ctx, err))
	}
	defer resp.Body.Close()
	release(hostlimit.OutcomeForStatus(resp.StatusCode))
	if resp.StatusCode == http.StatusTooManyRequests && p.limits != nil {
		if after, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok && after > 0 {
			p.limits.RetryAfter(host, after)
		}
	}
	d.Status = resp.StatusCode
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	d.DurationMs = millis(time.Since(start))
	switch {
	case err != nil:
		return nil, fail(engine.ClassTransient, 0, fmt.Errorf("HTTP %d: reading the answer: %w", resp.StatusCode, p.sendError(ctx, err)))
	case len(body) > MaxResponseBytes:
		return nil, fail(engine.ClassPermanent, 0, fmt.Errorf("HTTP %d: response too large (over %d MiB)", resp.StatusCode, MaxResponseBytes>>20))
	}
	res, err := p.classify(t, resp, body, red, fail)
	if err == nil {
		t.Detail = d.marshal()
	}
	return res, err
}

// classify turns an answer into a result or a classified failure.
func (p *Processor) classify(t *engine.Task, resp *http.Response, body []byte, red *redactor,
	fail func(engine.ErrorClass, time.Duration, error) error) (json.RawMessage, error) {
	code := resp.StatusCode
	status := fmt.Sprintf("HTTP %d %s", code, http.StatusText(code))
	withBody := func() error {
		if s := snippet(body); s != "" {
			return fmt.Errorf("%s: %s", status, s)
		}
		return errors.New(status)
	}
	switch {
	case p.notFound[code]:
		return nil, fail(engine.ClassNotFound, 0, fmt.Errorf("nothing found: %s", status))
	case code == http.StatusTooManyRequests:
		after, _ := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		return nil, fail(engine.ClassRateLimited, after, withBody())
	case code >= 500 || code == http.StatusRequestTimeout:
		return nil, fail(engine.ClassTransient, 0, withBody())
	case code < 200 || code > 299:
		return nil, fail(engine.ClassPermanent, 0, withBody())
	}
	if len(bytes.TrimSpace(body)) > 0 && !json.Valid(body) {
		class, retry := engine.ClassPermanent, ""
		if t.Attempt <= 1 {
			class, retry = engine.ClassTransient, "; will retry once"
		}
		return nil, fail(class, 0, fmt.Errorf("%s: the answer is not valid JSON (attempt %d%s): %s", status, t.Attempt, retry, snippet(body)))
	}
	result, empty := p.mapping.apply(body)
	if empty != nil {
		return nil, fail(engine.ClassNotFound, 0, errors.New(p.mapping.describeEmpty(empty)))
	}
	return red.json(result), nil
}

// sendError describes a failed exchange without the URL (the detail has the
// redacted one).
func (p *Processor) sendError(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s (timeoutMs)", p.timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("request failed: %w", err)
}

// millis is d in milliseconds with microsecond precision.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
