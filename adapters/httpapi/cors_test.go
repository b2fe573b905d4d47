package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/domain/limits"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// A browser app on another origin: its preflights are answered before the
// gate and the routes, its requests carry the CORS headers, and an origin
// not on the list gets none.
func TestCORS(t *testing.T) {
	called := 0
	r, err := httpapi.New(httpapi.Options{
		Mount: "/api",
		Gate:  gate{err: syncerr.New(syncerr.SchemaNotReady)}, // the preflight must not reach it
		Handlers: map[httpapi.Route]http.Handler{httpapi.RouteSync: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			called++
		})},
		CORS: httpapi.CORSOptions{Origins: []string{"https://app.example.com"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, origin, reqMethod, reqHeaders string
		wantStatus                                  int
		wantOrigin                                  string
		wantHeaders                                 []string // in Access-Control-Allow-Headers
	}{
		{"preflight of a sync round", http.MethodOptions, "https://app.example.com", "POST", "authorization,content-type,x-request-id",
			http.StatusNoContent, "https://app.example.com", []string{"authorization", "content-type", "x-request-id"}},
		// Browsers send the requested headers lowercase and sorted.
		{"preflight of a segment fetch", http.MethodOptions, "https://app.example.com", "GET", "if-none-match,x-syncular-scopes",
			http.StatusNoContent, "https://app.example.com", []string{"x-syncular-scopes", "if-none-match"}},
		{"preflight with the dev identity", http.MethodOptions, "https://app.example.com", "POST", "x-syncd-actor,x-syncd-partition",
			http.StatusNoContent, "https://app.example.com", []string{"x-syncd-actor", "x-syncd-partition"}},
		{"preflight of a header not allowed", http.MethodOptions, "https://app.example.com", "POST", "x-secret",
			http.StatusNoContent, "", nil},
		{"preflight of a method not allowed", http.MethodOptions, "https://app.example.com", "DELETE", "",
			http.StatusNoContent, "", nil},
		{"preflight from another origin", http.MethodOptions, "https://evil.example.com", "POST", "authorization",
			http.StatusNoContent, "", nil},
		{"a request from the origin", http.MethodPost, "https://app.example.com", "", "",
			http.StatusServiceUnavailable, "https://app.example.com", nil},
		{"a request from another origin", http.MethodPost, "https://evil.example.com", "", "",
			http.StatusServiceUnavailable, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "/api/sync", nil)
			req.Header.Set("Origin", tt.origin)
			if tt.reqMethod != "" {
				req.Header.Set("Access-Control-Request-Method", tt.reqMethod)
			}
			if tt.reqHeaders != "" {
				req.Header.Set("Access-Control-Request-Headers", tt.reqHeaders)
			}
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d", rec.Code, tt.wantStatus)
			}
			if got := rec.Header().Get("Access-Control-Allow-Origin"); got != tt.wantOrigin {
				t.Fatalf("Access-Control-Allow-Origin %q, want %q", got, tt.wantOrigin)
			}
			allowed := strings.ToLower(rec.Header().Get("Access-Control-Allow-Headers"))
			for _, h := range tt.wantHeaders {
				if !strings.Contains(allowed, h) {
					t.Fatalf("Access-Control-Allow-Headers %q lacks %q", allowed, h)
				}
			}
			if tt.method != http.MethodOptions && tt.wantOrigin != "" {
				if exp := rec.Header().Get("Access-Control-Expose-Headers"); !strings.Contains(exp, "X-Request-Id") || !strings.Contains(exp, "Etag") && !strings.Contains(exp, "ETag") {
					t.Fatalf("Access-Control-Expose-Headers %q", exp)
				}
			}
		})
	}
	if called != 0 {
		t.Fatalf("the gate let %d requests through", called)
	}
	// Without origins, OPTIONS is an ordinary request: 405 with Allow.
	plain, _ := httpapi.New(httpapi.Options{})
	req := httptest.NewRequest(http.MethodOptions, "/sync", nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", "POST")
	rec := httptest.NewRecorder()
	plain.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("CORS off: %d %v", rec.Code, rec.Header())
	}
}

// A preflight gets its own access log line, since the CORS handler
// answers it before any route: the origin, what it asked for and whether
// it was allowed, so a refusal the browser reports is visible here too.
func TestCORSPreflightAccessLog(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	r, err := httpapi.New(httpapi.Options{
		CORS:      httpapi.CORSOptions{Origins: []string{"http://localhost:5173"}},
		AccessLog: zap.New(core),
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, origin, reqMethod, reqHeaders string
		wantRoute                                   string
		wantAllowed                                 bool
	}{
		{"an allowed preflight", http.MethodOptions, "http://localhost:5173", "POST", "content-type", httpapi.RoutePreflight, true},
		{"a preflight from an origin not listed", http.MethodOptions, "http://localhost:3000", "POST", "content-type", httpapi.RoutePreflight, false},
		{"a preflight asking for a header not allowed", http.MethodOptions, "http://localhost:5173", "POST", "x-tenant", httpapi.RoutePreflight, false},
		{"an OPTIONS request that is no preflight", http.MethodOptions, "", "", "", "", false},
		{"a request from the origin", http.MethodPost, "http://localhost:5173", "", "", string(httpapi.RouteSync), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs.TakeAll()
			req := httptest.NewRequest(tt.method, "/sync", nil)
			for k, v := range map[string]string{"Origin": tt.origin, "Access-Control-Request-Method": tt.reqMethod, "Access-Control-Request-Headers": tt.reqHeaders} {
				if v != "" {
					req.Header.Set(k, v)
				}
			}
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, req)
			entries := logs.TakeAll()
			if len(entries) != 1 {
				t.Fatalf("%d access log lines", len(entries))
			}
			f := entries[0].ContextMap()
			if f["route"] != tt.wantRoute || f["status"] != int64(rec.Code) || f["request_id"] != rec.Header().Get(httpapi.RequestIDHeader) {
				t.Fatalf("access log fields %v (status %d)", f, rec.Code)
			}
			if tt.wantRoute != httpapi.RoutePreflight {
				if _, ok := f["cors_allowed"]; ok {
					t.Fatalf("not a preflight, logged as one: %v", f)
				}
				return
			}
			if f["cors_allowed"] != tt.wantAllowed || f["origin"] != tt.origin || f["request_method"] != tt.reqMethod || f["request_headers"] != tt.reqHeaders {
				t.Fatalf("preflight fields %v", f)
			}
		})
	}
}

func TestCORSOptions(t *testing.T) {
	o := httpapi.CORSOptions{Origins: []string{"https://a.example.com", "http://localhost:5173"}}
	if o.AnyOrigin() || len(o.OriginPatterns()) != 2 {
		t.Fatalf("patterns %v", o.OriginPatterns())
	}
	if any := (httpapi.CORSOptions{Origins: []string{"*"}}); !any.AnyOrigin() || any.OriginPatterns() != nil {
		t.Fatal("* is any origin, with no upgrade origin check")
	}
}

// Every request gets one access log line with its request id (taken from
// the request when plausible, generated otherwise, echoed), route, status,
// catalog code, sizes and identity; never a credential.
func TestAccessLogAndRequestIDs(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	var seenID string
	r, err := httpapi.New(httpapi.Options{
		Handlers: map[httpapi.Route]http.Handler{httpapi.RouteSync: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			seenID = ports.RequestID(req.Context())
			_, _ = req.Body.Read(make([]byte, 64))
			_, _, err := httpapi.Authenticate(req, devAuth{}, limits.Default())
			if err != nil {
				httpapi.WriteError(w, err)
				return
			}
			httpapi.WriteError(w, syncerr.New(syncerr.Forbidden))
		})},
		AccessLog: zap.New(core),
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, sentID string
		keepID       bool
		auth         bool
		wantCode     string
	}{
		{"a client's request id is kept", "req-1234.abc", true, true, "sync.forbidden"},
		{"an implausible id is replaced", "has space", false, true, "sync.forbidden"},
		{"a long id is replaced", strings.Repeat("x", 200), false, true, "sync.forbidden"},
		{"no id: one is generated", "", false, false, "sync.auth_required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs.TakeAll()
			req := httptest.NewRequest(http.MethodPost, "/sync?token=secret-token", strings.NewReader("0123456789"))
			if tt.sentID != "" {
				req.Header.Set(httpapi.RequestIDHeader, tt.sentID)
			}
			if tt.auth {
				req.Header.Set("Authorization", "Bearer secret-token")
			}
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, req)
			id := rec.Header().Get(httpapi.RequestIDHeader)
			if id == "" || id != seenID || (tt.keepID && id != tt.sentID) || (!tt.keepID && id == tt.sentID) {
				t.Fatalf("request id %q (handler saw %q, sent %q)", id, seenID, tt.sentID)
			}
			entries := logs.TakeAll()
			if len(entries) != 1 {
				t.Fatalf("%d access log lines", len(entries))
			}
			f := entries[0].ContextMap()
			if f["request_id"] != id || f["route"] != string(httpapi.RouteSync) || f["status"] != int64(rec.Code) ||
				f["code"] != tt.wantCode || f["bytes_in"] != int64(10) || f["bytes_out"] != int64(rec.Body.Len()) {
				t.Fatalf("access log fields %v", f)
			}
			if tt.auth && (f["actor"] != "alice" || f["partition"] != "p1") {
				t.Fatalf("identity not logged: %v", f)
			}
			for k, v := range f {
				if s, ok := v.(string); ok && strings.Contains(s, "secret-token") {
					t.Fatalf("a credential was logged in %s", k)
				}
			}
		})
	}
}

// devAuth admits a bearer token as alice of p1.
type devAuth struct{}

func (devAuth) Authenticate(r *http.Request) (ports.Identity, error) {
	if r.Header.Get("Authorization") == "" {
		return ports.Identity{}, syncerr.New(syncerr.AuthRequired)
	}
	return ports.Identity{ActorID: "alice", Partition: "p1"}, nil
}
