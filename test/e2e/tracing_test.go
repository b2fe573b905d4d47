package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/protobuf/proto"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/app"
	"github.com/syncd-dev/syncd/app/platform"
	"github.com/syncd-dev/syncd/app/wiring"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/test/pgtest"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// otlpReceiver is an in-process OTLP/HTTP traces endpoint.
type otlpReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	// spans, each with the service name of its resource.
	spans   []*tracepb.Span
	service []string
	headers []http.Header
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, err := io.ReadAll(req.Body)
		var in coltrace.ExportTraceServiceRequest
		if err != nil || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(b, &in) != nil {
			t.Errorf("OTLP receiver: %s %s %s: %v", req.Method, req.URL.Path, req.Header.Get("Content-Type"), err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.headers = append(r.headers, req.Header.Clone())
		for _, rs := range in.ResourceSpans {
			svc := attr(rs.GetResource().GetAttributes(), "service.name")
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					r.spans = append(r.spans, sp)
					r.service = append(r.service, svc)
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func attr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			if s, ok := kv.Value.Value.(*commonpb.AnyValue_StringValue); ok {
				return s.StringValue
			}
			if i, ok := kv.Value.Value.(*commonpb.AnyValue_IntValue); ok {
				return strconv.FormatInt(i.IntValue, 10)
			}
		}
	}
	return ""
}

// tracedServer is "syncd serve" (storage through wiring.StorageModule) with
// the given environment.
type tracedServer struct {
	*server
	app     *fx.App
	tp      trace.TracerProvider
	logs    *observer.ObservedLogs
	stopped bool
}

func startTraced(t *testing.T, database string, env map[string]string) *tracedServer {
	t.Helper()
	res := serveConfig(t, database)
	var ready *platform.Readiness
	var listeners *platform.Listeners
	var sch *schema.Schema
	var tp trace.TracerProvider
	obs, logs := observer.New(zap.DebugLevel)
	a := fx.New(app.Options(res.Config, platform.BuildInfo{Version: "e2e"}, zap.New(obs),
		wiring.StorageModule, app.WithBanner(io.Discard),
		fx.Supply(platform.Environ(func(k string) string { return env[k] })),
		fx.Populate(&ready, &listeners, &sch, &tp)))
	if err := a.Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ts := &tracedServer{app: a, tp: tp, logs: logs}
	t.Cleanup(func() {
		if !ts.stopped {
			_ = a.Stop(context.Background())
		}
	})
	for !ready.Ready() {
		if ctx.Err() != nil {
			t.Fatalf("not ready: %+v", ready.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	s := &server{t: t, url: "http://" + listeners.Addr(platform.ServerSync).String() + "/sync",
		admin: "http://" + listeners.Addr(platform.ServerAdmin).String(), sch: sch}
	ts.server = s
	return ts
}

// stop stops the server, which flushes its spans.
func (s *tracedServer) stop() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.stopped = true
	if err := s.app.Stop(ctx); err != nil {
		s.t.Fatalf("stop: %v", err)
	}
}

const (
	e2eCallerTrace = "0af7651916cd43dd8448eb211c80319c"
	e2eCallerSpan  = "b7ad6b7169203331"
	secretName     = "a-row-name-no-span-carries"
	secretToken    = "otlp-token-never-logged"
)

// postTraced posts req as alice with a caller's traceparent.
func (s *tracedServer) postTraced(partition string, body []byte) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", httpapi.ContentTypeSync)
	req.Header.Set("X-Syncd-Actor", "alice")
	req.Header.Set("X-Syncd-Partition", partition)
	req.Header.Set("X-Syncd-Scopes", `{"owner":["alice"],"project_id":["*"]}`)
	req.Header.Set("traceparent", "00-"+e2eCallerTrace+"-"+e2eCallerSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("POST /sync: %d", resp.StatusCode)
	}
}

// With an OTLP endpoint in the environment, a POST /sync carrying a
// caller's traceparent is a server span in the caller's trace with the
// storage transaction below it, a socket round is a span of its own with
// its storage work below it, and everything reaches the collector when
// the server stops.
func TestTracesReachTheCollector(t *testing.T) {
	for _, tc := range []struct {
		name, system string
		database     func(t *testing.T) string
	}{
		{"sqlite", "sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "syncd.db") }},
		{"postgres", "postgresql", func(t *testing.T) string { return pgtest.DSN(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rcv := newOTLPReceiver(t)
			s := startTraced(t, tc.database(t), map[string]string{
				"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.srv.URL,
				"OTEL_EXPORTER_OTLP_HEADERS":  "authorization=Bearer%20" + secretToken,
				"OTEL_SERVICE_NAME":           "syncd-e2e",
			})
			if _, off := s.tp.(noop.TracerProvider); off {
				t.Fatal("a no-op tracer with an endpoint set")
			}
			c := alice("tr")
			ep := s.epoch(c)
			s.postTraced("tr", ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Commits: []*ssp2.PushCommit{
				ssptest.Commit("k1", ssptest.Upsert("projects", "p-1", project(t, s.sch, "p-1", "alice", secretName), -1)),
			}}.Encode(t))

			k := dial(t, s.server, c, "c2")
			k.event() // hello
			k.round(ssptest.Req{ClientID: "c2", SchemaVersion: s.sch.Version, Epoch: ep, Pull: true}.Encode(t), 64)
			_ = k.c.CloseNow()
			s.stop()

			rcv.mu.Lock()
			defer rcv.mu.Unlock()
			byID := map[string]*tracepb.Span{}
			for i, sp := range rcv.spans {
				byID[hex.EncodeToString(sp.SpanId)] = sp
				if rcv.service[i] != "syncd-e2e" {
					t.Fatalf("span %q from service %q", sp.Name, rcv.service[i])
				}
			}
			// below reports whether sp descends from the span with id.
			below := func(sp *tracepb.Span, id []byte) bool {
				for p := sp; p != nil && len(p.ParentSpanId) > 0; p = byID[hex.EncodeToString(p.ParentSpanId)] {
					if bytes.Equal(p.ParentSpanId, id) {
						return true
					}
				}
				return false
			}
			var server, round *tracepb.Span
			for _, sp := range rcv.spans {
				switch {
				case sp.Name == "POST /sync" && hex.EncodeToString(sp.TraceId) == e2eCallerTrace:
					server = sp
				case sp.Name == "socket round":
					round = sp
				}
			}
			if server == nil || round == nil {
				t.Fatalf("no traced POST /sync or socket round among %d spans", len(rcv.spans))
			}
			if hex.EncodeToString(server.ParentSpanId) != e2eCallerSpan || server.Kind != tracepb.Span_SPAN_KIND_SERVER {
				t.Fatalf("POST /sync: parent %x kind %v", server.ParentSpanId, server.Kind)
			}
			for key, want := range map[string]string{
				"http.route": "/sync", "http.response.status_code": "200",
				"syncd.actor_id": "alice", "syncd.partition": "tr",
			} {
				if got := attr(server.Attributes, key); got != want {
					t.Errorf("POST /sync %s = %q, want %q", key, got, want)
				}
			}
			if attr(server.Attributes, "syncd.request_id") == "" {
				t.Error("POST /sync without its request id")
			}
			if attr(round.Attributes, "syncd.actor_id") != "alice" || attr(round.Attributes, "syncd.partition") != "tr" {
				t.Errorf("socket round attributes %v", round.Attributes)
			}
			var pushTx, roundStorage bool
			for _, sp := range rcv.spans {
				if attr(sp.Attributes, "db.system.name") == "" {
					continue
				}
				if attr(sp.Attributes, "db.system.name") != tc.system {
					t.Errorf("span %q: db.system.name %q", sp.Name, attr(sp.Attributes, "db.system.name"))
				}
				pushTx = pushTx || (sp.Name == "push transaction" && below(sp, server.SpanId))
				roundStorage = roundStorage || below(sp, round.SpanId)
			}
			if !pushTx {
				t.Error("no push transaction span below POST /sync")
			}
			if !roundStorage {
				t.Error("no storage span below the socket round")
			}
			for _, sp := range rcv.spans {
				for _, a := range sp.Attributes {
					if v := a.Value.String(); strings.Contains(v, secretName) || strings.Contains(v, secretToken) {
						t.Errorf("span %q attribute %s carries a value it must not", sp.Name, a.Key)
					}
				}
			}
			if len(rcv.headers) == 0 || rcv.headers[0].Get("Authorization") != "Bearer "+secretToken {
				t.Error("the export did not carry OTEL_EXPORTER_OTLP_HEADERS")
			}
			on := s.logs.FilterMessage("traces on: exporting OTLP over HTTP").All()
			if len(on) != 1 || on[0].ContextMap()["endpoint"] != rcv.srv.URL+"/v1/traces" {
				t.Errorf("start log %+v", on)
			}
			for _, e := range s.logs.All() {
				if strings.Contains(e.Message, secretToken) || strings.Contains(strings.Join(mapValues(e.ContextMap()), " "), secretToken) {
					t.Errorf("log line %q carries the exporter's header", e.Message)
				}
			}
		})
	}
}

func mapValues(m map[string]any) []string {
	var out []string
	for _, v := range m {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Without an endpoint the graph's tracer is the no-op one; with the
// exporter turned off (OTEL_TRACES_EXPORTER=none) nothing reaches even a
// configured collector.
func TestTracesOff(t *testing.T) {
	rcv := newOTLPReceiver(t)
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"no endpoint", map[string]string{"OTEL_SERVICE_NAME": "syncd-e2e"}},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.srv.URL, "OTEL_TRACES_EXPORTER": "none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startTraced(t, filepath.Join(t.TempDir(), "syncd.db"), tc.env)
			if _, off := s.tp.(noop.TracerProvider); !off {
				t.Fatalf("tracer provider %T", s.tp)
			}
			ep := s.epoch(alice("off"))
			s.postTraced("off", ssptest.Req{ClientID: "c1", SchemaVersion: s.sch.Version, Epoch: ep, Pull: true}.Encode(t))
			s.stop()
			if n := s.logs.FilterMessage("traces off").Len(); n != 1 {
				t.Errorf("%d 'traces off' lines", n)
			}
		})
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.headers) != 0 {
		t.Fatalf("%d exports with tracing off", len(rcv.headers))
	}
}
