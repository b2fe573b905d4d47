package callout_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/syncd-dev/syncd/adapters/callout"
	contract "github.com/syncd-dev/syncd/domain/callout"
	"github.com/syncd-dev/syncd/ports"
)

// bound stops a hung test; no assertion depends on it.
const bound = 10 * time.Second

// backend is an httptest server on 127.0.0.1 with a handler per path.
func backend(t *testing.T, handlers map[string]http.HandlerFunc) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	for path, h := range handlers {
		// Reading the body first lets the server notice a client that
		// hung up (its context ends), as a real backend's would.
		mux.HandleFunc("POST /"+path, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			h(w, r)
		})
	}
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// countingTransport counts the answer bytes the client reads.
type countingTransport struct {
	read atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.read}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func newClient(t *testing.T, base string, mut func(*callout.Options)) *callout.Client {
	t.Helper()
	o := callout.Options{BaseURL: base, Now: time.Now}
	if mut != nil {
		mut(&o)
	}
	c, err := callout.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// hostile is a backend that misbehaves and the outcome it makes.
type hostile struct {
	name    string
	handler http.HandlerFunc
	want    callout.Outcome
}

// hostileBackends are the faults every callback is tested against: a
// backend that hangs, answers 500, garbage or 10 MB (with a length or
// chunked), or closes the connection.
func hostileBackends() []hostile {
	big := strings.Repeat("x", 10<<20)
	return []hostile{
		{"hangs", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, callout.OutcomeTimeout},
		{"answers 500", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}, callout.OutcomeBadStatus},
		{"answers garbage", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "<html>not json{")
		}, callout.OutcomeMalformed},
		{"answers 10 MB with a length", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "10485760")
			_, _ = io.WriteString(w, big)
		}, callout.OutcomeTooLarge},
		{"answers 10 MB chunked", func(w http.ResponseWriter, _ *http.Request) {
			for i := 0; i < 10; i++ {
				if _, err := io.WriteString(w, big[:1<<20]); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}, callout.OutcomeTooLarge},
		{"closes the connection", func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		}, callout.OutcomeUnreachable},
	}
}

// okAnswer decides {"ok": true} answers.
func okAnswer(status int, body []byte) (callout.Outcome, error) {
	if status != http.StatusOK {
		return callout.OutcomeBadStatus, errors.New("status")
	}
	if strings.TrimSpace(string(body)) != `{"ok":true}` {
		return callout.OutcomeMalformed, errors.New("not ok")
	}
	return callout.OutcomeOK, nil
}

func healthy(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"ok":true}`) }

// TestHostileBackendsCostACalloutItsTimeoutAndNothingElse: a backend that
// hangs, answers 500, garbage or 10 MB, closes the connection or drips
// its answer gives that callout an outage with the outcome saying why,
// never reads more than the size limit, and while it is in flight another
// partition's callout completes.
func TestHostileBackendsCostACalloutItsTimeoutAndNothingElse(t *testing.T) {
	const limit = 64 << 10
	tests := append(hostileBackends(), hostile{"drips its answer", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"ok":`)
		w.(http.Flusher).Flush()
		for r.Context().Err() == nil {
			if _, err := io.WriteString(w, " "); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}, callout.OutcomeTimeout})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			arrived := make(chan struct{}, 1)
			srv := backend(t, map[string]http.HandlerFunc{
				"hostile": func(w http.ResponseWriter, r *http.Request) {
					arrived <- struct{}{}
					tt.handler(w, r)
				},
				"healthy": healthy,
			})
			rt := &countingTransport{}
			reg := prometheus.NewRegistry()
			m, err := callout.NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			c := newClient(t, srv.URL, func(o *callout.Options) {
				o.MaxResponseBytes, o.MaxConcurrency, o.Transport, o.Metrics = limit, 4, rt, m
			})
			done := make(chan error, 1)
			go func() {
				done <- c.Call(context.Background(), callout.Callback{Name: "hostile", Path: "hostile", Timeout: 500 * time.Millisecond}, map[string]string{"partition": "p1"}, okAnswer)
			}()
			select {
			case <-arrived:
			case <-time.After(bound):
				t.Fatal("the hostile callout never reached the backend")
			}
			// Another partition's callout while the hostile one is in flight.
			if err := c.Call(context.Background(), callout.Callback{Name: "healthy", Path: "healthy", Timeout: bound}, map[string]string{"partition": "p2"}, okAnswer); err != nil {
				t.Fatalf("the other partition's callout: %v", err)
			}
			var hostileErr error
			select {
			case hostileErr = <-done:
			case <-time.After(bound):
				t.Fatal("the hostile callout never returned")
			}
			var o *callout.Outage
			if !errors.As(hostileErr, &o) || o.Outcome != tt.want || o.Callback != "hostile" {
				t.Fatalf("hostile callout: %v, want outcome %s", hostileErr, tt.want)
			}
			if n := rt.read.Load(); n > int64(limit+1+len(`{"ok":true}`)) {
				t.Fatalf("read %d answer bytes, the limit is %d", n, limit)
			}
			if got := counter(t, reg, "syncd_callouts_total", "hostile", string(tt.want)); got != 1 {
				t.Fatalf("outcome counter %v", got)
			}
		})
	}
}

// TestSlotsBoundTheCalloutsInFlight: with every slot held by a hung
// callout, another waits for one within its own timeout and fails as a
// timeout; it does not wait past it.
func TestSlotsBoundTheCalloutsInFlight(t *testing.T) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := backend(t, map[string]http.HandlerFunc{
		"hang": func(w http.ResponseWriter, r *http.Request) {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
			healthy(w, r)
		},
		"healthy": healthy,
	})
	c := newClient(t, srv.URL, func(o *callout.Options) { o.MaxConcurrency = 1 })
	done := make(chan error, 1)
	go func() {
		done <- c.Call(context.Background(), callout.Callback{Name: "hang", Path: "hang", Timeout: bound}, nil, okAnswer)
	}()
	<-arrived
	err := c.Call(context.Background(), callout.Callback{Name: "healthy", Path: "healthy", Timeout: 50 * time.Millisecond}, nil, okAnswer)
	var o *callout.Outage
	if !errors.As(err, &o) || o.Outcome != callout.OutcomeTimeout || !strings.Contains(err.Error(), "slot") {
		t.Fatalf("callout without a slot: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the held callout: %v", err)
	}
	if err := c.Call(context.Background(), callout.Callback{Name: "healthy", Path: "healthy", Timeout: bound}, nil, okAnswer); err != nil {
		t.Fatalf("after the slot came back: %v", err)
	}
}

// TestCalloutsAreSignedAndTraced: with keys every callout carries the
// contract's version and a signature a backend verifies with
// contract.Verify; rotated keys sign the next callout; the request id and
// the trace context travel along, and each callout is a client span
// with its outcome.
func TestCalloutsAreSignedAndTraced(t *testing.T) {
	oldKey, newKey := []byte(strings.Repeat("o", 32)), []byte(strings.Repeat("n", 32))
	now := time.Unix(1_800_000_000, 0)
	type seen struct {
		version, requestID, traceparent string
		verifiedOld, verifiedNew        bool
		signed                          bool
	}
	got := make(chan seen, 4)
	srv := backend(t, map[string]http.HandlerFunc{"check": func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sig := r.Header.Get(contract.HeaderSignature)
		got <- seen{
			version: r.Header.Get(contract.HeaderVersion), requestID: r.Header.Get(contract.HeaderRequestID),
			traceparent: r.Header.Get("traceparent"), signed: sig != "",
			verifiedOld: contract.Verify(sig, body, [][]byte{oldKey}, now, time.Minute) == nil,
			verifiedNew: contract.Verify(sig, body, [][]byte{newKey}, now, time.Minute) == nil,
		}
		healthy(w, r)
	}})
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	c := newClient(t, srv.URL+"/", func(o *callout.Options) {
		o.Keys, o.Tracer, o.Now = [][]byte{oldKey}, tp, func() time.Time { return now }
	})
	ctx := ports.WithRequestID(context.Background(), "req-1")
	cb := callout.Callback{Name: "check", Path: "check", Timeout: bound}
	if err := c.Call(ctx, cb, map[string]int{"n": 1}, okAnswer); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.version != "1" || s.requestID != "req-1" || s.traceparent == "" || !s.verifiedOld || s.verifiedNew {
		t.Fatalf("first callout: %+v", s)
	}
	if err := c.SetKeys([]byte("short")); err == nil {
		t.Fatal("a short key was accepted")
	}
	if err := c.SetKeys(newKey, oldKey); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, cb, map[string]int{"n": 2}, okAnswer); err != nil {
		t.Fatal(err)
	}
	if s := <-got; !s.verifiedOld || !s.verifiedNew {
		t.Fatalf("after the rotation: %+v", s)
	}
	ended := spans.Ended()
	if len(ended) != 2 || ended[0].Name() != "callout check" {
		t.Fatalf("spans %v", ended)
	}
	attrs := map[string]string{}
	for _, a := range ended[0].Attributes() {
		attrs[string(a.Key)] = a.Value.String()
	}
	if attrs["syncd.callout.outcome"] != "ok" || attrs["http.response.status_code"] != "200" {
		t.Fatalf("span attributes %v", attrs)
	}

	unsigned := newClient(t, srv.URL, nil)
	if err := unsigned.Call(context.Background(), cb, nil, okAnswer); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s.signed || s.traceparent != "" || s.requestID != "" {
		t.Fatalf("unsigned callout: %+v", s)
	}
}

func TestNewRefusesUnsafeBaseURLs(t *testing.T) {
	for _, u := range []string{"", "ftp://h", "http://", "http://user:pw@h", "http://h/?q=1", "http://h/#f", "h:80"} {
		if _, err := callout.New(callout.Options{BaseURL: u, Now: time.Now}); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}

// counter reads syncd_callouts_total{callback, outcome} from reg.
func counter(t *testing.T, reg *prometheus.Registry, name, callback, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["callback"] == callback && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
