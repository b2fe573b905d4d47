// Package callout answers the server's host callbacks from the team's own
// backend, in any language, over HTTP (docs/callout.md): authentication
// (auth.go), scope resolution (scopes.go), write validation
// (validate.go), remote-operation commands (commands.go) and durable
// reaction webhooks (reactions.go), each a JSON POST to a fixed path under
// one base URL, behind the ports a Go host would implement.
//
// Every callout goes through one Client: pooled connections, a bound on
// the callouts in flight, a hard timeout per call that covers the wait for
// a slot, an answer read only up to a size limit, signing
// (domain/callout) when keys are set, a span per call and a latency and
// outcome count per callback. A backend that hangs, fails, answers
// garbage or too much costs a callout its timeout and nothing more: the
// caller gets an *Outage, which each adapter turns into its port's
// outage signal.
package callout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	contract "github.com/syncd-dev/syncd/domain/callout"
	"github.com/syncd-dev/syncd/ports"
)

// Defaults of Options.
const (
	DefaultMaxConcurrency   = 64
	DefaultMaxResponseBytes = 1 << 20
)

// Options configure a Client.
type Options struct {
	// BaseURL is --callout-url: http(s)://host[:port][/path]; each
	// callback posts to BaseURL/<path>.
	BaseURL string
	// Keys sign every callout, each adding a signature, so a backend
	// holding any one of them verifies; none leaves callouts unsigned.
	// SetKeys replaces them.
	Keys [][]byte
	// MaxConcurrency bounds the callouts in flight (default 64); a
	// callout waits for a slot within its own timeout.
	MaxConcurrency int
	// MaxResponseBytes bounds an answer's body (default 1 MiB); a larger
	// one is an outage and is never read whole.
	MaxResponseBytes int64
	// Transport sends the requests (default a pooled *http.Transport of
	// the client's own; tests wrap it).
	Transport http.RoundTripper
	// Now is the clock of signatures and latencies.
	Now func() time.Time
	// Tracer, when set, starts a client span per callout and passes its
	// context on in the traceparent header.
	Tracer trace.TracerProvider
	// Metrics, when set, counts callouts (NewMetrics).
	Metrics *Metrics
	// Log receives a line per callout that got no usable answer.
	Log *zap.Logger
}

// Client makes the callouts of every adapter of this package.
type Client struct {
	base    string
	http    *http.Client
	own     *http.Transport // closed by Close; nil with Options.Transport
	slots   chan struct{}
	max     int64
	keys    atomic.Pointer[[][]byte]
	now     func() time.Time
	tracer  trace.Tracer
	metrics *Metrics
	log     *zap.Logger
}

// tracerName is the instrumentation scope of the callout spans.
const tracerName = "github.com/syncd-dev/syncd/adapters/callout"

// idleConnTimeout is how long an idle pooled connection to the backend is
// kept (see New).
const idleConnTimeout = 4 * time.Second

// New builds a Client. The base URL must be absolute http or https
// without user info, query or fragment (credentials in it would reach
// logs).
func New(o Options) (*Client, error) {
	u, err := url.Parse(o.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("callout: base URL %q: want http(s)://host[:port][/path] without user info, query or fragment", o.BaseURL)
	}
	if o.Now == nil {
		return nil, errors.New("callout: Options.Now is required")
	}
	if o.MaxConcurrency <= 0 {
		o.MaxConcurrency = DefaultMaxConcurrency
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	c := &Client{
		base:    strings.TrimSuffix(u.String(), "/"),
		slots:   make(chan struct{}, o.MaxConcurrency),
		max:     o.MaxResponseBytes,
		now:     o.Now,
		metrics: o.Metrics,
		log:     o.Log,
	}
	rt := o.Transport
	if rt == nil {
		c.own = &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			ForceAttemptHTTP2:   true,
			MaxIdleConns:        o.MaxConcurrency,
			MaxIdleConnsPerHost: o.MaxConcurrency,
			// Below the shortest keep-alive common backends use (Node's
			// 5 s): a POST on a connection the backend has just closed is
			// not retried, so syncd lets an idle connection go first.
			IdleConnTimeout: idleConnTimeout,
			// The answer is JSON read up to a limit; a compressed one
			// would make that limit the compressed size.
			DisableCompression: true,
		}
		rt = c.own
	}
	c.http = &http.Client{
		Transport: rt,
		// A redirect would carry the forwarded credentials elsewhere: a
		// 3xx is an unexpected status like any other.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if o.Tracer != nil {
		c.tracer = o.Tracer.Tracer(tracerName)
	}
	if len(o.Keys) > 0 {
		if err := c.SetKeys(o.Keys...); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// SetKeys replaces the signing keys (a rotated --callout-key-file). A set
// with a key shorter than contract.MinKeyBytes is refused and the keys in
// use are kept.
func (c *Client) SetKeys(keys ...[]byte) error {
	if err := contract.CheckKeys(keys); err != nil {
		return err
	}
	ks := make([][]byte, len(keys))
	for i, k := range keys {
		ks[i] = append([]byte(nil), k...)
	}
	c.keys.Store(&ks)
	return nil
}

// Close drops the pooled idle connections.
func (c *Client) Close() {
	if c.own != nil {
		c.own.CloseIdleConnections()
	}
}

// Callback is one kind of callout: its name in metrics, spans and logs,
// the path it posts to and its timeout.
type Callback struct {
	Name    string
	Path    string
	Timeout time.Duration
	// Target names what the callout serves within its kind (a command's
	// name, a reaction's type): a span attribute and a log field, never a
	// metric label, so the label set stays the contract's.
	Target string
	// Header holds this callout's own headers, sent beside every
	// callout's (which win on a clash).
	Header http.Header
	// Attributes are added to the callout's span.
	Attributes []attribute.KeyValue
}

// Outcome is how a callout ended, the outcome label of its metrics.
type Outcome string

// Outcomes.
const (
	// OutcomeOK: the backend answered with a decision that grants or
	// accepts.
	OutcomeOK Outcome = "ok"
	// OutcomeRefused: the backend answered no (a 401 or 403 to
	// authenticate, a validator's rejection).
	OutcomeRefused Outcome = "refused"
	// OutcomeQueries: the backend asked for query results before it
	// decides (validate); the callout is made again with them.
	OutcomeQueries Outcome = "queries"
	// The outages: no usable answer.
	OutcomeTimeout     Outcome = "timeout"
	OutcomeUnreachable Outcome = "unreachable"
	OutcomeBadStatus   Outcome = "bad_status"
	OutcomeMalformed   Outcome = "malformed"
	OutcomeTooLarge    Outcome = "too_large"
	// OutcomeCanceled: the request the callout served went away first.
	OutcomeCanceled Outcome = "canceled"
)

// answered reports an outcome with a usable answer; the others are
// outages.
func (o Outcome) answered() bool {
	return o == OutcomeOK || o == OutcomeRefused || o == OutcomeQueries
}

// Outage is a callout that got no usable answer: it timed out (waiting
// for a slot included), could not connect, or the answer had an
// unexpected status, did not parse or was too large.
type Outage struct {
	Callback string
	Outcome  Outcome
	// Status is the answer's HTTP status (0 without one).
	Status int
	Err    error
}

func (o *Outage) Error() string {
	s := "callout " + o.Callback + ": " + string(o.Outcome)
	if o.Status != 0 {
		s += " (HTTP " + strconv.Itoa(o.Status) + ")"
	}
	if o.Err != nil {
		s += ": " + o.Err.Error()
	}
	return s
}

func (o *Outage) Unwrap() error { return o.Err }

// Decide reads an answer: the outcome it is, and what the caller gets.
// An outage outcome (bad status, malformed) makes Call return an *Outage
// around the error; OK, Refused and Queries return the error as it is.
type Decide func(status int, body []byte) (Outcome, error)

// Call posts in as JSON to the callback's path and hands the answer to
// decide. The callback's timeout bounds everything: the wait for a slot,
// the exchange and reading the answer.
func (c *Client) Call(ctx context.Context, cb Callback, in any, decide Decide) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("callout %s: encode request: %w", cb.Name, err)
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, cb.Timeout)
	defer cancel()
	x := c.begin(ctx, cb)
	status, answer, err := c.exchange(x.ctx, cb, body)
	var outcome Outcome
	if err != nil {
		outcome = failure(parent, ctx, err)
	} else {
		outcome, err = decide(status, answer)
	}
	if !outcome.answered() {
		if err == nil {
			err = errors.New("no answer")
		}
		err = &Outage{Callback: cb.Name, Outcome: outcome, Status: status, Err: err}
		c.logOutage(parent, cb, outcome, err)
	}
	x.end(outcome, status)
	return err
}

// exchange sends body and reads the answer up to the size limit.
func (c *Client) exchange(ctx context.Context, cb Callback, body []byte) (int, []byte, error) {
	select {
	case c.slots <- struct{}{}:
		defer func() { <-c.slots }()
	case <-ctx.Done():
		return 0, nil, fmt.Errorf("waiting for a free callout slot: %w", ctx.Err())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/"+cb.Path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	h := req.Header
	for k, vs := range cb.Header {
		h[k] = vs
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	h.Set(contract.HeaderVersion, strconv.Itoa(contract.Version))
	if id := ports.RequestID(ctx); id != "" {
		h.Set(contract.HeaderRequestID, id)
	}
	if ks := c.keys.Load(); ks != nil {
		h.Set(contract.HeaderSignature, contract.Sign(*ks, c.now(), body))
	}
	if c.tracer != nil {
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > c.max {
		return resp.StatusCode, nil, &tooLarge{limit: c.max}
	}
	// One byte past the limit tells a body at the limit from a longer
	// one; closing the rest unread drops the connection.
	answer, err := io.ReadAll(io.LimitReader(resp.Body, c.max+1))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("read answer: %w", err)
	}
	if int64(len(answer)) > c.max {
		return resp.StatusCode, nil, &tooLarge{limit: c.max}
	}
	return resp.StatusCode, answer, nil
}

type tooLarge struct{ limit int64 }

func (e *tooLarge) Error() string {
	return fmt.Sprintf("answer larger than %d bytes (--callout-max-response-bytes)", e.limit)
}

// failure names the outage of an exchange that failed: the request the
// callout served went away, the callout ran out of time, the answer was
// too large, or the backend could not be reached.
func failure(parent, ctx context.Context, err error) Outcome {
	var tl *tooLarge
	switch {
	case errors.As(err, &tl):
		return OutcomeTooLarge
	case parent.Err() != nil:
		return OutcomeCanceled
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimeout
	}
	return OutcomeUnreachable
}

// logOutage logs a callout without a usable answer: at warn, as it costs
// a request its answer, but at debug when that request went away first.
func (c *Client) logOutage(ctx context.Context, cb Callback, outcome Outcome, err error) {
	lvl := zap.WarnLevel
	if outcome == OutcomeCanceled {
		lvl = zap.DebugLevel
	}
	fields := []zap.Field{zap.String("outcome", string(outcome)), zap.Error(err)}
	if cb.Target != "" {
		fields = append(fields, zap.String("target", cb.Target))
	}
	if id := ports.RequestID(ctx); id != "" {
		fields = append(fields, zap.String("request_id", id))
	}
	c.log.Log(lvl, "callout got no usable answer", fields...)
}

// inflight is one callout's span and start.
type inflight struct {
	c     *Client
	cb    Callback
	ctx   context.Context
	span  trace.Span
	start time.Time
}

func (c *Client) begin(ctx context.Context, cb Callback) *inflight {
	x := &inflight{c: c, cb: cb, ctx: ctx, start: c.now()}
	if c.tracer != nil {
		attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(http.MethodPost), attrCallback.String(cb.Name)}
		if cb.Target != "" {
			attrs = append(attrs, attrTarget.String(cb.Target))
		}
		attrs = append(attrs, cb.Attributes...)
		x.ctx, x.span = c.tracer.Start(ctx, "callout "+cb.Name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	}
	return x
}

// Span attributes of syncd's own.
const (
	attrCallback = attribute.Key("syncd.callout.callback")
	attrOutcome  = attribute.Key("syncd.callout.outcome")
	attrTarget   = attribute.Key("syncd.callout.target")
	// attrQueries and attrQueriesFailed mark a validate callout made
	// again with query results: how many, how many of them failed.
	attrQueries       = attribute.Key("syncd.callout.queries")
	attrQueriesFailed = attribute.Key("syncd.callout.queries_failed")
)

func (x *inflight) end(outcome Outcome, status int) {
	x.c.metrics.observe(x.cb.Name, outcome, x.c.now().Sub(x.start))
	if x.span == nil {
		return
	}
	x.span.SetAttributes(attrOutcome.String(string(outcome)))
	if status != 0 {
		x.span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	}
	if !outcome.answered() {
		x.span.SetStatus(codes.Error, string(outcome))
	}
	x.span.End()
}

// decodeStrict parses an answer: exactly one JSON object, no member the
// contract does not name (names match exactly, case included), no member
// twice, no trailing data. A misspelt optional member would otherwise be
// dropped, or matched case-insensitively, and change the decision.
func decodeStrict(body []byte, v any) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errors.New("answer is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf("answer does not parse: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("answer has data after its JSON object")
	}
	if err := exactMembers(raw, reflect.TypeOf(v)); err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("answer does not parse: %w", err)
	}
	return nil
}

// exactMembers checks the members of every object raw holds where t is a
// struct: each one of its fields' JSON names, each once; it looks into
// the items of a list and the values of a map the same way, and a map's
// keys must be distinct too.
func exactMembers(raw json.RawMessage, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	trimmed := bytes.TrimSpace(raw)
	if bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		return structMembers(trimmed, t)
	case reflect.Map:
		if len(trimmed) == 0 || trimmed[0] != '{' {
			return nil // the type mismatch is Unmarshal's to report
		}
		return eachMember(trimmed, t.Name(), func(string) (reflect.Type, error) { return t.Elem(), nil })
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 || len(trimmed) == 0 || trimmed[0] != '[' {
			return nil
		}
		var items []json.RawMessage
		if err := json.Unmarshal(trimmed, &items); err != nil {
			return fmt.Errorf("answer does not parse: %w", err)
		}
		for _, it := range items {
			if err := exactMembers(it, t.Elem()); err != nil {
				return err
			}
		}
	}
	return nil
}

func structMembers(raw json.RawMessage, t reflect.Type) error {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			fields[name] = f.Type
		}
	}
	return eachMember(raw, t.Name(), func(name string) (reflect.Type, error) {
		ft, ok := fields[name]
		if !ok {
			return nil, fmt.Errorf("answer has the unknown member %q", name)
		}
		return ft, nil
	})
}

// eachMember walks the members of the object raw, refusing one named
// twice, and checks each value against the type member gives its name.
func eachMember(raw json.RawMessage, what string, member func(name string) (reflect.Type, error)) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("answer: want an object of %s", what)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("answer does not parse: %w", err)
		}
		name, _ := tok.(string)
		ft, err := member(name)
		if err != nil {
			return err
		}
		if seen[name] {
			return fmt.Errorf("answer has the member %q twice", name)
		}
		seen[name] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return fmt.Errorf("answer does not parse: %w", err)
		}
		if err := exactMembers(value, ft); err != nil {
			return err
		}
	}
	return nil
}

// ok2xx reports a success status.
func ok2xx(status int) bool { return status >= 200 && status < 300 }

// unexpected is the Decide answer to a status the callback does not
// define.
func unexpected(status int) (Outcome, error) {
	return OutcomeBadStatus, fmt.Errorf("unexpected status %d", status)
}
