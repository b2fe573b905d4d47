package testcontrolhttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/syncd-dev/syncd/adapters/testcontrolhttp"
)

// plane is a Plane that counts what reaches it.
type plane struct{ reached atomic.Int64 }

func (p *plane) Capabilities() testcontrolhttp.Capabilities {
	p.reached.Add(1)
	return testcontrolhttp.Capabilities{}
}

func (p *plane) Create(context.Context, []byte) (string, error) {
	p.reached.Add(1)
	return "t1", nil
}

func (p *plane) Call(context.Context, string, string, []json.RawMessage) (any, error) {
	p.reached.Add(1)
	return nil, nil
}

func (p *plane) Close(context.Context, string) error {
	p.reached.Add(1)
	return nil
}

func (p *plane) Instance(string) (http.Handler, bool) {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		p.reached.Add(1)
		w.WriteHeader(http.StatusOK)
	}), true
}

// route is one request of a harness: every route of the listener.
type route struct {
	name, method, path, contentType, body string
	header                                map[string]string
}

var routes = []route{
	{name: "capabilities", method: "GET", path: "/control/capabilities"},
	{name: "create", method: "POST", path: "/control/instances", contentType: "application/json", body: `{}`},
	{name: "call", method: "POST", path: "/control/instances/t1/call", contentType: "application/json", body: `{"method":"nowMs","args":[]}`},
	{name: "close", method: "DELETE", path: "/control/instances/t1"},
	{name: "sync", method: "POST", path: "/i/t1/sync", contentType: "application/vnd.syncular.sync.v2", body: "x",
		header: map[string]string{"x-actor": "alice"}},
	{name: "blob upload", method: "PUT", path: "/i/t1/blobs/b", contentType: "text/plain", body: "x"},
	{name: "realtime upgrade", method: "GET", path: "/i/t1/realtime?clientId=c&actor=alice",
		header: map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}},
}

func serve(h http.Handler, rt route, host string, extra map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(rt.method, "http://x"+rt.path, strings.NewReader(rt.body))
	req.Host = host
	if rt.contentType != "" {
		req.Header.Set("Content-Type", rt.contentType)
	}
	for k, v := range rt.header {
		req.Header.Set(k, v)
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// A web page can reach a loopback listener: through a DNS name rebound to
// 127.0.0.1 (its Host is that name), or cross-site from another origin
// (its Origin, and Sec-Fetch-Site, say so). Every route refuses both with
// 403 before the plane sees the request.
func TestRequestsAWebPageCouldSendAreRefused(t *testing.T) {
	refusals := []struct {
		name   string
		host   string
		header map[string]string
	}{
		{name: "rebound DNS name", host: "attacker.example:47100"},
		{name: "rebound DNS name without a port", host: "attacker.example"},
		{name: "a name under localhost's", host: "localhost.attacker.example:47100"},
		{name: "another loopback address", host: "127.0.0.2:47100"},
		{name: "no Host", host: ""},
		{name: "foreign Origin", host: "127.0.0.1:47100", header: map[string]string{"Origin": "https://attacker.example"}},
		{name: "foreign Origin on a loopback port", host: "127.0.0.1:47100", header: map[string]string{"Origin": "http://attacker.example:47100"}},
		{name: "null Origin (sandboxed page)", host: "127.0.0.1:47100", header: map[string]string{"Origin": "null"}},
		{name: "Origin of another scheme", host: "127.0.0.1:47100", header: map[string]string{"Origin": "file://127.0.0.1"}},
		{name: "Origin with a loopback user part", host: "127.0.0.1:47100", header: map[string]string{"Origin": "http://127.0.0.1@attacker.example"}},
		{name: "cross-site fetch", host: "127.0.0.1:47100", header: map[string]string{"Sec-Fetch-Site": "cross-site"}},
	}
	for _, rt := range routes {
		for _, tt := range refusals {
			t.Run(rt.name+"/"+tt.name, func(t *testing.T) {
				p := &plane{}
				rec := serve(testcontrolhttp.New(p, nil), rt, tt.host, tt.header)
				var body struct{ Code, Error, Message string }
				if rec.Code != http.StatusForbidden || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Code != "sync.forbidden" ||
					!strings.Contains(body.Error+body.Message, "test-control plane serves") {
					t.Fatalf("got %d %s, want 403 sync.forbidden with a reason", rec.Code, rec.Body)
				}
				if n := p.reached.Load(); n != 0 {
					t.Fatalf("the plane was reached %d times", n)
				}
			})
		}
	}
}

// What a local harness sends is served: a loopback Host, no Origin or a
// loopback one, a same-origin or unmarked fetch.
func TestLocalHarnessRequestsAreServed(t *testing.T) {
	accepted := []struct {
		name   string
		host   string
		header map[string]string
	}{
		{name: "127.0.0.1", host: "127.0.0.1:47100"},
		{name: "localhost", host: "localhost:47100"},
		{name: "LOCALHOST", host: "LOCALHOST:47100"},
		{name: "[::1]", host: "[::1]:47100"},
		{name: "no port", host: "127.0.0.1"},
		{name: "loopback Origin", host: "127.0.0.1:47100", header: map[string]string{"Origin": "http://127.0.0.1:47100"}},
		{name: "loopback Origin of another port", host: "127.0.0.1:47100", header: map[string]string{"Origin": "http://localhost:5173"}},
		{name: "IPv6 loopback Origin", host: "[::1]:47100", header: map[string]string{"Origin": "https://[::1]"}},
		{name: "same-origin fetch", host: "127.0.0.1:47100", header: map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}},
		{name: "user-initiated fetch", host: "localhost:47100", header: map[string]string{"Sec-Fetch-Site": "none"}},
	}
	for _, rt := range routes {
		for _, tt := range accepted {
			t.Run(rt.name+"/"+tt.name, func(t *testing.T) {
				p := &plane{}
				rec := serve(testcontrolhttp.New(p, nil), rt, tt.host, tt.header)
				if rec.Code != http.StatusOK || p.reached.Load() != 1 {
					t.Fatalf("got %d %s, plane reached %d times; want it served", rec.Code, rec.Body, p.reached.Load())
				}
			})
		}
	}
}

// The control POSTs take only a JSON body declared as such: a form or a
// text/plain body (what a cross-site page may send without a preflight)
// is refused with 415 before the plane sees it.
func TestControlPostsTakeOnlyJSON(t *testing.T) {
	types := []struct {
		contentType string
		status      int
	}{
		{"application/json", http.StatusOK},
		{"application/json; charset=utf-8", http.StatusOK},
		{"Application/JSON", http.StatusOK},
		{"text/plain", http.StatusUnsupportedMediaType},
		{"text/plain; charset=utf-8", http.StatusUnsupportedMediaType},
		{"application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
		{"multipart/form-data; boundary=x", http.StatusUnsupportedMediaType},
		{"", http.StatusUnsupportedMediaType},
		{"application/json-seq", http.StatusUnsupportedMediaType},
	}
	for _, rt := range routes[1:3] {
		for _, tt := range types {
			t.Run(rt.name+"/"+tt.contentType, func(t *testing.T) {
				p := &plane{}
				rt.contentType = tt.contentType
				rec := serve(testcontrolhttp.New(p, nil), rt, "127.0.0.1:47100", nil)
				if rec.Code != tt.status {
					t.Fatalf("got %d %s, want %d", rec.Code, rec.Body, tt.status)
				}
				if tt.status != http.StatusOK {
					var body struct{ Code, Error string }
					if json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Code != "sync.invalid_request" || !strings.Contains(body.Error, "application/json") {
						t.Fatalf("refusal body %s", rec.Body)
					}
					if n := p.reached.Load(); n != 0 {
						t.Fatalf("the plane was reached %d times", n)
					}
				}
			})
		}
	}
}
