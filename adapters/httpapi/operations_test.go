package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/syncd-dev/syncd/domain/operations"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// fakeOperations answers an error for a body "fail", else echoes the body.
type fakeOperations struct {
	mu    sync.Mutex
	calls int
	ident ports.Identity
}

func (f *fakeOperations) Handle(_ context.Context, id ports.Identity, body []byte) ([]byte, syncerr.Code) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.ident = id
	if string(body) == "fail" {
		return operations.EncodeError(syncerr.New(syncerr.OperationUnknown)), syncerr.OperationUnknown
	}
	return body, ""
}

type closedGate struct{ err error }

func (g *closedGate) ServeError() error { return g.err }

func operationsServer(t *testing.T, f *fakeOperations, gate *closedGate, observe ObserveFunc) *httptest.Server {
	t.Helper()
	tr, err := NewTransport(TransportOptions{MaxBodyBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Mount: "/api", Observe: observe,
		Handlers: map[Route]http.Handler{RouteOperations: tr.OperationsEndpoint(headerAuth{}, f, nil)}}
	if gate != nil {
		opts.Gate = gate
	}
	router, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(router)
	t.Cleanup(srv.Close)
	return srv
}

func TestOperationsEndpoint(t *testing.T) {
	auth := map[string]string{"Authorization": "Bearer x", "Content-Type": ContentTypeOperations}
	with := func(k, v string) map[string]string {
		h := map[string]string{}
		for a, b := range auth {
			h[a] = b
		}
		if v == "" {
			delete(h, k)
		} else {
			h[k] = v
		}
		return h
	}
	tests := []struct {
		name       string
		method     string
		header     map[string]string
		body       string
		wantStatus int
		wantCode   string // a §10.1 JSON error's code; "" for an encoded answer
		wantBody   string
		reaches    bool
	}{
		{name: "the encoded answer of the use case", header: auth, body: `{"t":"null"}`, wantStatus: 200, wantBody: `{"t":"null"}`, reaches: true},
		{name: "content type parameters are ignored", header: with("Content-Type", ContentTypeOperations+"; charset=utf-8"), body: "x",
			wantStatus: 200, wantBody: "x", reaches: true},
		{name: "an operation failure is an encoded response with 200", header: auth, body: "fail", wantStatus: 200,
			wantBody: string(operations.EncodeError(syncerr.New(syncerr.OperationUnknown))), reaches: true},
		{name: "authentication first", header: with("Authorization", ""), body: "x", wantStatus: 401, wantCode: "sync.auth_required"},
		{name: "authentication before the content type", header: map[string]string{"Content-Type": "application/json"}, body: "x",
			wantStatus: 401, wantCode: "sync.auth_required"},
		{name: "another content type is 415", header: with("Content-Type", "application/json"), body: "x",
			wantStatus: 415, wantCode: "operation.invalid_request"},
		{name: "the sync content type is 415", header: with("Content-Type", ContentTypeSync), body: "x",
			wantStatus: 415, wantCode: "operation.invalid_request"},
		{name: "no content type is 415", header: with("Content-Type", ""), body: "x", wantStatus: 415, wantCode: "operation.invalid_request"},
		{name: "a body past the limit is 413", header: auth, body: strings.Repeat("x", 65), wantStatus: 413, wantCode: "sync.invalid_request"},
		{name: "another method is 405", method: http.MethodGet, header: auth, wantStatus: 405, wantCode: "sync.invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeOperations{}
			var seen RequestStats
			srv := operationsServer(t, f, nil, func(st RequestStats) { seen = st })
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			resp, body := do(t, method, srv.URL+"/api/operations", strings.NewReader(tt.body), tt.header)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.wantStatus, body)
			}
			if (f.calls == 1) != tt.reaches {
				t.Fatalf("use case called %d times", f.calls)
			}
			if tt.wantCode != "" {
				var e struct{ Code string }
				if err := json.Unmarshal(body, &e); err != nil || e.Code != tt.wantCode {
					t.Fatalf("body %s, want code %s", body, tt.wantCode)
				}
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != ContentTypeOperations {
				t.Fatalf("content type %q", ct)
			}
			if string(body) != tt.wantBody {
				t.Fatalf("body %s, want %s", body, tt.wantBody)
			}
			if f.ident.ActorID != "a" || f.ident.Partition != "p" {
				t.Fatalf("identity %+v", f.ident)
			}
			if want := map[bool]syncerr.Code{true: syncerr.OperationUnknown}[tt.body == "fail"]; seen.Code != want || seen.Route != RouteOperations {
				t.Fatalf("observed %+v, want code %q", seen, want)
			}
		})
	}
}

func TestOperationsRouteBehindTheGateAndAbsent(t *testing.T) {
	auth := map[string]string{"Authorization": "Bearer x", "Content-Type": ContentTypeOperations}
	f := &fakeOperations{}
	srv := operationsServer(t, f, &closedGate{err: syncerr.New(syncerr.SchemaNotReady)}, nil)
	resp, body := do(t, http.MethodPost, srv.URL+"/api/operations", strings.NewReader("x"), auth)
	if resp.StatusCode != 503 || f.calls != 0 || !strings.Contains(string(body), "sync.schema_not_ready") {
		t.Fatalf("closed gate: %d %s (calls %d)", resp.StatusCode, body, f.calls)
	}
	router, err := New(Options{Mount: "/api"})
	if err != nil {
		t.Fatal(err)
	}
	none := httptest.NewServer(router)
	defer none.Close()
	resp, body = do(t, http.MethodPost, none.URL+"/api/operations", strings.NewReader("x"), auth)
	if resp.StatusCode != 404 || !strings.Contains(string(body), "sync.not_found") {
		t.Fatalf("no operations registered: %d %s", resp.StatusCode, body)
	}
}

// watchAdmission is an admission that reports the identity it serves and
// closes the socket.
type watchAdmission struct {
	id     ports.Identity
	served chan ports.Identity
}

func (a *watchAdmission) Abort() {}

func (a *watchAdmission) Run(_ context.Context, c ports.RealtimeConn) {
	a.served <- a.id
	_ = c.Close(ports.CloseNormal, "")
}

// TestOperationsRealtimeEndpoint: authentication, the upgrade header and
// admission are answered before the upgrade as §10.1 JSON (a refused
// admission with its catalog status, as the realtime route answers its
// socket caps); an admitted socket is served with the caller's identity.
func TestOperationsRealtimeEndpoint(t *testing.T) {
	served := make(chan ports.Identity, 1)
	var refuse atomic.Bool
	refuse.Store(true)
	var admitted atomic.Int32
	h := OperationsRealtimeEndpoint(headerAuth{}, RealtimeOptions{}, func(_ context.Context, id ports.Identity) (ports.RealtimeAdmission, error) {
		if refuse.Load() {
			return nil, syncerr.Newf(syncerr.WebsocketLimit, "this actor holds its maximum of 1 sockets")
		}
		admitted.Add(1)
		return &watchAdmission{id: id, served: served}, nil
	})
	router, err := New(Options{Handlers: map[Route]http.Handler{RouteOperationsRealtime: h}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(router)
	defer srv.Close()
	resp, body := do(t, http.MethodGet, srv.URL+"/operations/realtime", nil, nil)
	if resp.StatusCode != 401 || !strings.Contains(string(body), "sync.auth_required") {
		t.Fatalf("unauthenticated: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, http.MethodGet, srv.URL+"/operations/realtime", nil, map[string]string{"Authorization": "Bearer x"})
	if resp.StatusCode != http.StatusUpgradeRequired || len(served) != 0 {
		t.Fatalf("no upgrade: %d %s", resp.StatusCode, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/operations/realtime"
	opts := &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer x"}}}
	_, resp, err = websocket.Dial(ctx, url, opts)
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a refused admission: %v %+v", err, resp)
	}
	if b, _ := io.ReadAll(resp.Body); !strings.Contains(string(b), "sync.websocket_connection_limit") {
		t.Fatalf("a refused admission answered %s", b)
	}
	refuse.Store(false)
	c, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	select {
	case id := <-served:
		if id.ActorID != "a" || id.Partition != "p" || admitted.Load() != 1 {
			t.Fatalf("identity %+v, %d admissions", id, admitted.Load())
		}
	case <-ctx.Done():
		t.Fatal("not served")
	}
}
