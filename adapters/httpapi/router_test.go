package httpapi_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

type gate struct{ err error }

func (g gate) ServeError() error { return g.err }

type body struct {
	Code              string          `json:"code"`
	Message           string          `json:"message"`
	Category          string          `json:"category"`
	Retryable         bool            `json:"retryable"`
	RecommendedAction string          `json:"recommendedAction"`
	Details           json.RawMessage `json:"details"`
}

func do(t *testing.T, h http.Handler, method, path string) (int, body) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader("")))
	var b body
	if ct := rec.Header().Get("Content-Type"); ct == httpapi.ContentTypeJSON {
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
			t.Fatalf("bad JSON %q: %v", rec.Body.String(), err)
		}
	}
	return rec.Code, b
}

func TestRoutesWithoutFeatureAnswerNotFound(t *testing.T) {
	for _, mount := range []string{"", "/api/sync"} {
		r, err := httpapi.New(httpapi.Options{Mount: mount})
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct{ method, path string }{
			{"POST", "/sync"},
			{"GET", "/segments/abc"},
			{"PUT", "/blobs/b1"},
			{"GET", "/blobs/b1"},
			{"POST", "/blobs/b1/upload-grant"},
			{"GET", "/realtime?clientId=c1"},
		}
		for _, tt := range tests {
			t.Run(mount+" "+tt.method+" "+tt.path, func(t *testing.T) {
				code, b := do(t, r, tt.method, mount+tt.path)
				if code != http.StatusNotFound || b.Code != "sync.not_found" || b.Category != "not-found" ||
					b.RecommendedAction != "forceResync" || len(b.Details) == 0 {
					t.Fatalf("got %d %+v", code, b)
				}
			})
		}
	}
}

func TestUnknownPathsAndMethods(t *testing.T) {
	r, err := httpapi.New(httpapi.Options{Mount: "/m"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/m/sync", http.StatusMethodNotAllowed, "sync.invalid_request", "POST"},
		{"DELETE", "/m/blobs/x", http.StatusMethodNotAllowed, "sync.invalid_request", "PUT, GET"},
		{"POST", "/sync", http.StatusNotFound, "sync.not_found", ""},  // outside the mount
		{"GET", "/m/nope", http.StatusNotFound, "sync.not_found", ""}, // unknown route
		{"GET", "/", http.StatusNotFound, "sync.not_found", ""},       // root
	}
	for _, tt := range tests {
		req := httptest.NewRequest(tt.method, tt.path, nil)
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		var b struct{ Code string }
		_ = json.Unmarshal(rec.Body.Bytes(), &b)
		if rec.Code != tt.status || b.Code != tt.code || rec.Header().Get("Allow") != tt.allow {
			t.Errorf("%s %s: got %d %s Allow=%q", tt.method, tt.path, rec.Code, rec.Body.String(), rec.Header().Get("Allow"))
		}
	}
}

func TestGate(t *testing.T) {
	notReady := syncerr.New(syncerr.SchemaNotReady).WithDetails(map[string]string{"phase": "storage_migration"})
	var mu sync.Mutex
	var seen []int
	var codes []string
	inflight := 0
	r, err := httpapi.New(httpapi.Options{
		Gate: gate{notReady},
		Handlers: map[httpapi.Route]http.Handler{
			httpapi.RouteSync: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }),
		},
		Observe: func(st httpapi.RequestStats) {
			mu.Lock()
			seen = append(seen, st.Status)
			codes = append(codes, string(st.Code))
			mu.Unlock()
		},
		InFlight: func(d int) {
			mu.Lock()
			inflight += d
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	code, b := do(t, r, "POST", "/sync")
	if code != http.StatusServiceUnavailable || b.Code != "sync.schema_not_ready" || !b.Retryable || b.RecommendedAction != "retryLater" {
		t.Fatalf("got %d %+v", code, b)
	}
	if len(seen) != 1 || seen[0] != 503 || codes[0] != "sync.schema_not_ready" || inflight != 0 {
		t.Fatalf("observed %v %v, in flight %d", seen, codes, inflight)
	}
}

func TestHandlersPanicsAndPathValues(t *testing.T) {
	r, err := httpapi.New(httpapi.Options{
		Gate: gate{nil},
		Handlers: map[httpapi.Route]http.Handler{
			httpapi.RouteSync: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }),
			httpapi.RouteSegment: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				_, _ = io.WriteString(w, req.PathValue(httpapi.PathSegmentID))
			}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	code, b := do(t, r, "POST", "/sync")
	if code != 500 || b.Code != "sync.internal_error" || strings.Contains(b.Message, "boom") {
		t.Fatalf("panic answered %d %+v", code, b)
	}
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest("GET", "/segments/seg-1", nil))
	if rec.Code != 200 || rec.Body.String() != "seg-1" {
		t.Fatalf("segment: %d %q", rec.Code, rec.Body.String())
	}
}

func TestNewValidates(t *testing.T) {
	for _, m := range []string{"api", "/api/", "/a b", "/{x}"} {
		if _, err := httpapi.New(httpapi.Options{Mount: m}); err == nil {
			t.Errorf("mount %q accepted", m)
		}
	}
	if _, err := httpapi.New(httpapi.Options{Handlers: map[httpapi.Route]http.Handler{"GET /x": http.NotFoundHandler()}}); err == nil {
		t.Error("unknown route accepted")
	}
}

func TestWriteError(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"catalog error", syncerr.New(syncerr.AuthRequired), 401, "sync.auth_required"},
		{"wrapped", errors.Join(errors.New("ctx"), syncerr.New(syncerr.BlobTooLarge)), 413, "blob.too_large"},
		{"plain error", errors.New("password=hunter2"), 500, "sync.internal_error"},
		{"host code", syncerr.New(syncerr.StorageInvalidLimit), 500, "sync.internal_error"},
		{"nil", nil, 500, "sync.internal_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			got := httpapi.WriteError(rec, tt.err)
			if rec.Code != tt.status || string(got.Code) != tt.code {
				t.Fatalf("got %d %s", rec.Code, got.Code)
			}
			if strings.Contains(rec.Body.String(), "hunter2") {
				t.Fatal("leaked")
			}
			var b body
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b.Code != tt.code || b.Category == "" {
				t.Fatalf("body %q", rec.Body.String())
			}
		})
	}
}
