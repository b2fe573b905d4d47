package httpapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/syncd-dev/syncd/adapters/httpapi"
	"github.com/syncd-dev/syncd/domain/limits"
	"github.com/syncd-dev/syncd/domain/scopes"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zs(t *testing.T, b []byte) []byte {
	t.Helper()
	w, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	return w.EncodeAll(b, nil)
}

// zsStream encodes without a declared content size, so only the output
// cap can catch a bomb.
func zsStream(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(b); off += 4096 {
		if _, err := w.Write(b[off:min(off+4096, len(b))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type errorBody struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Details json.RawMessage `json:"details"`
}

func TestReadSyncRequest(t *testing.T) {
	const maxBody, maxDecoded = 1 << 10, 4 << 10
	tr, err := httpapi.NewTransport(httpapi.TransportOptions{MaxBodyBytes: maxBody, MaxDecodedBodyBytes: maxDecoded})
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("SSP2\x03\x00\x01\x00 a small request body")
	bomb := bytes.Repeat([]byte{0}, maxDecoded+1)
	atDecodedLimit := bytes.Repeat([]byte{'a'}, maxDecoded)
	garbage := bytes.Repeat([]byte{0x5a}, 64)

	tests := []struct {
		name        string
		contentType string
		encoding    []string
		body        []byte
		declaredLen int64 // overrides Content-Length when non-zero
		want        []byte
		status      int
		message     string
	}{
		{name: "identity", contentType: httpapi.ContentTypeSync, body: msg, want: msg},
		{name: "content type parameters are ignored", contentType: httpapi.ContentTypeSync + "; charset=binary", body: msg, want: msg},
		{name: "explicit identity", contentType: httpapi.ContentTypeSync, encoding: []string{"identity"}, body: msg, want: msg},
		{name: "gzip", contentType: httpapi.ContentTypeSync, encoding: []string{"gzip"}, body: gz(t, msg), want: msg},
		{name: "x-gzip alias, any case", contentType: httpapi.ContentTypeSync, encoding: []string{"X-GZIP"}, body: gz(t, msg), want: msg},
		{name: "zstd", contentType: httpapi.ContentTypeSync, encoding: []string{"zstd"}, body: zs(t, msg), want: msg},
		{name: "gzip decoding to exactly the limit", contentType: httpapi.ContentTypeSync, encoding: []string{"gzip"},
			body: gz(t, atDecodedLimit), want: atDecodedLimit},
		{name: "empty body", contentType: httpapi.ContentTypeSync, body: nil, want: []byte{}},

		{name: "no content type", body: msg, status: 415, message: "unsupported content type"},
		{name: "wrong content type", contentType: "application/octet-stream", body: msg, status: 415, message: "unsupported content type"},
		{name: "json content type", contentType: "application/json", body: []byte("{}"), status: 415, message: "unsupported content type"},
		{name: "malformed content type", contentType: "application/", body: msg, status: 415, message: "unsupported content type"},
		{name: "unsupported encoding", contentType: httpapi.ContentTypeSync, encoding: []string{"br"}, body: msg, status: 415,
			message: "unsupported content encoding"},
		{name: "stacked encodings", contentType: httpapi.ContentTypeSync, encoding: []string{"gzip", "zstd"}, body: msg, status: 415,
			message: "unsupported content encoding"},
		{name: "body past the wire limit", contentType: httpapi.ContentTypeSync, body: make([]byte, maxBody+1), declaredLen: -1,
			status: 413, message: "request body too large"},
		{name: "declared length past the limit", contentType: httpapi.ContentTypeSync, body: msg, declaredLen: maxBody + 1,
			status: 413, message: "request body too large"},
		{name: "gzip bomb past the decoded limit", contentType: httpapi.ContentTypeSync, encoding: []string{"gzip"}, body: gz(t, bomb),
			status: 413, message: "request body too large"},
		{name: "zstd bomb with declared size", contentType: httpapi.ContentTypeSync, encoding: []string{"zstd"}, body: zs(t, bomb),
			status: 413, message: "request body too large"},
		{name: "zstd bomb streamed", contentType: httpapi.ContentTypeSync, encoding: []string{"zstd"}, body: zsStream(t, bomb),
			status: 413, message: "request body too large"},
		{name: "compressed body past the wire limit", contentType: httpapi.ContentTypeSync, encoding: []string{"gzip"},
			body: gz(t, randomish(maxBody*2)), declaredLen: -1, status: 413, message: "request body too large"},
		{name: "corrupt gzip", contentType: httpapi.ContentTypeSync, encoding: []string{"gzip"}, body: garbage, status: 400,
			message: "malformed request body encoding"},
		{name: "truncated gzip", contentType: httpapi.ContentTypeSync, encoding: []string{"gzip"}, body: gz(t, msg)[:20], status: 400,
			message: "malformed request body encoding"},
		{name: "corrupt zstd", contentType: httpapi.ContentTypeSync, encoding: []string{"zstd"}, body: garbage, status: 400,
			message: "malformed request body encoding"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/sync", bytes.NewReader(tc.body))
			if tc.contentType != "" {
				r.Header.Set("Content-Type", tc.contentType)
			}
			for _, e := range tc.encoding {
				r.Header.Add("Content-Encoding", e)
			}
			if tc.declaredLen != 0 {
				r.ContentLength = tc.declaredLen
			}
			got, err := tr.ReadSyncRequest(r)
			if tc.status == 0 {
				if err != nil {
					t.Fatalf("ReadSyncRequest: %v", err)
				}
				if !bytes.Equal(got, tc.want) {
					t.Fatalf("body = %q, want %q", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("want status %d, got a %d-byte body", tc.status, len(got))
			}
			rec := httptest.NewRecorder()
			pub := httpapi.WriteTransportError(rec, err)
			if rec.Code != tc.status {
				t.Fatalf("status = %d, want %d (err %v)", rec.Code, tc.status, err)
			}
			if pub.Code != syncerr.InvalidRequest {
				t.Fatalf("code = %q, want sync.invalid_request", pub.Code)
			}
			var b errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
				t.Fatalf("body %q: %v", rec.Body.String(), err)
			}
			if b.Code != string(syncerr.InvalidRequest) || !strings.HasPrefix(b.Message, tc.message) {
				t.Fatalf("body = %+v, want message %q", b, tc.message)
			}
			if ct := rec.Header().Get("Content-Type"); ct != httpapi.ContentTypeJSON {
				t.Fatalf("content type %q", ct)
			}
		})
	}
}

// randomish returns incompressible-enough bytes without a random source.
func randomish(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func TestTooLargeCarriesLimit(t *testing.T) {
	tr, _ := httpapi.NewTransport(httpapi.TransportOptions{MaxBodyBytes: 10})
	r := httptest.NewRequest(http.MethodPost, "/sync", bytes.NewReader(make([]byte, 11)))
	r.Header.Set("Content-Type", httpapi.ContentTypeSync)
	_, err := tr.ReadSyncRequest(r)
	rec := httptest.NewRecorder()
	httpapi.WriteTransportError(rec, err)
	var b errorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &b)
	if rec.Code != 413 || string(b.Details) != `{"maxBytes":10}` {
		t.Fatalf("status %d details %s", rec.Code, b.Details)
	}
}

func TestWriteTransportErrorPassesCatalogErrors(t *testing.T) {
	rec := httptest.NewRecorder()
	httpapi.WriteTransportError(rec, syncerr.New(syncerr.AuthRequired))
	if rec.Code != 401 {
		t.Fatalf("status = %d, want 401", rec.Code)
	}
}

func TestNegotiateEncoding(t *testing.T) {
	tests := []struct {
		header string
		want   httpapi.Encoding
	}{
		{"", httpapi.EncodingIdentity},
		{"gzip", httpapi.EncodingGzip},
		{"zstd", httpapi.EncodingZstd},
		{"zstd, gzip", httpapi.EncodingZstd},
		{"gzip, zstd", httpapi.EncodingZstd},
		{"GZIP", httpapi.EncodingGzip},
		{"x-gzip", httpapi.EncodingGzip},
		{"br", httpapi.EncodingIdentity},
		{"gzip, deflate, br", httpapi.EncodingGzip},
		{"gzip;q=1, zstd;q=0.5", httpapi.EncodingGzip},
		{"zstd;q=0.5, gzip;q=0.5", httpapi.EncodingZstd},
		{"zstd;q=0, gzip", httpapi.EncodingGzip},
		{"zstd; q=0 , gzip ; q=0.001", httpapi.EncodingGzip},
		{"gzip;q=0, zstd;q=0", httpapi.EncodingIdentity},
		{"*", httpapi.EncodingZstd},
		{"*;q=0", httpapi.EncodingIdentity},
		{"gzip;q=0, *", httpapi.EncodingZstd},
		{"zstd;q=0, *;q=0.5", httpapi.EncodingGzip},
		{"identity", httpapi.EncodingIdentity},
		{"identity;q=1, gzip;q=0.5", httpapi.EncodingIdentity},
		{"identity;q=0.5, gzip", httpapi.EncodingGzip},
		{"gzip;q=abc, zstd;q=0.1", httpapi.EncodingZstd},
		{"gzip;q=2", httpapi.EncodingIdentity},
		{"gzip;level=9", httpapi.EncodingGzip},
	}
	for _, tc := range tests {
		if got := httpapi.NegotiateEncoding(tc.header); got != tc.want {
			t.Errorf("NegotiateEncoding(%q) = %q, want %q", tc.header, got, tc.want)
		}
	}
}

func decode(t *testing.T, enc string, b []byte) []byte {
	t.Helper()
	switch enc {
	case "":
		return b
	case "gzip":
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		return out
	case "zstd":
		d, err := zstd.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		out, err := io.ReadAll(d)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	t.Fatalf("unexpected encoding %q", enc)
	return nil
}

func TestRespond(t *testing.T) {
	tr, err := httpapi.NewTransport(httpapi.TransportOptions{CompressMinBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	small := []byte("tiny")
	large := bytes.Repeat([]byte("SSP2 frame bytes "), 200)
	tests := []struct {
		name   string
		accept string
		body   []byte
		chunks int
		wantCE string
	}{
		{"zstd preferred", "gzip, zstd", large, 1, "zstd"},
		{"gzip", "gzip", large, 1, "gzip"},
		{"gzip streamed in chunks", "gzip", large, 17, "gzip"},
		{"zstd streamed in chunks", "zstd", large, 17, "zstd"},
		{"no Accept-Encoding", "", large, 1, ""},
		{"everything refused", "zstd;q=0, gzip;q=0", large, 1, ""},
		{"small body stays identity", "zstd, gzip", small, 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/sync", nil)
			if tc.accept != "" {
				r.Header.Set("Accept-Encoding", tc.accept)
			}
			rec := httptest.NewRecorder()
			resp := tr.Respond(rec, r, http.StatusOK, httpapi.ContentTypeSync)
			step := (len(tc.body) + tc.chunks - 1) / tc.chunks
			for off := 0; off < len(tc.body); off += step {
				if _, err := resp.Write(tc.body[off:min(off+step, len(tc.body))]); err != nil {
					t.Fatal(err)
				}
			}
			if err := resp.Close(); err != nil {
				t.Fatal(err)
			}
			h := rec.Header()
			if got := h.Get("Content-Encoding"); got != tc.wantCE {
				t.Fatalf("Content-Encoding = %q, want %q", got, tc.wantCE)
			}
			if h.Get("Vary") != "Accept-Encoding" || h.Get("Content-Type") != httpapi.ContentTypeSync {
				t.Fatalf("headers %v", h)
			}
			if len(tc.body) < 100 && h.Get("Content-Length") != "4" {
				t.Fatal("small identity body without its Content-Length")
			}
			if tc.wantCE != "" && h.Get("Content-Length") != "" {
				t.Fatal("encoded body with Content-Length")
			}
			if got := decode(t, tc.wantCE, rec.Body.Bytes()); !bytes.Equal(got, tc.body) {
				t.Fatalf("round trip mismatch: %d bytes, want %d", len(got), len(tc.body))
			}
		})
	}
}

func TestRespondReusesPooledEncoders(t *testing.T) {
	tr, _ := httpapi.NewTransport(httpapi.TransportOptions{CompressMinBytes: -1})
	for i := range 3 {
		for _, enc := range []string{"zstd", "gzip"} {
			r := httptest.NewRequest(http.MethodPost, "/sync", nil)
			r.Header.Set("Accept-Encoding", enc)
			rec := httptest.NewRecorder()
			body := []byte(strings.Repeat("x", i+1))
			if err := tr.WriteEncoded(rec, r, 200, httpapi.ContentTypeSync, body); err != nil {
				t.Fatal(err)
			}
			if got := decode(t, enc, rec.Body.Bytes()); !bytes.Equal(got, body) {
				t.Fatalf("%s round %d: %q", enc, i, got)
			}
		}
	}
}

// TestDiscardBeforeCommit: an error found before the first byte is still
// answered as JSON with its status (SPEC §1.1).
func TestDiscardBeforeCommit(t *testing.T) {
	tr, _ := httpapi.NewTransport(httpapi.TransportOptions{CompressMinBytes: 1024})
	r := httptest.NewRequest(http.MethodPost, "/sync", nil)
	r.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	resp := tr.Respond(rec, r, http.StatusOK, httpapi.ContentTypeSync)
	_, _ = resp.Write([]byte("SSP2 partial"))
	if resp.Committed() || !resp.Discard() {
		t.Fatal("response committed before the threshold")
	}
	httpapi.WriteTransportError(rec, syncerr.New(syncerr.SchemaNotReady))
	_ = resp.Close()
	if rec.Code != 503 || rec.Header().Get("Content-Type") != httpapi.ContentTypeJSON {
		t.Fatalf("status %d type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if _, err := resp.Write([]byte("x")); err == nil {
		t.Fatal("write after discard accepted")
	}
}

func TestFlushCommits(t *testing.T) {
	tr, _ := httpapi.NewTransport(httpapi.TransportOptions{})
	r := httptest.NewRequest(http.MethodPost, "/sync", nil)
	r.Header.Set("Accept-Encoding", "zstd")
	rec := httptest.NewRecorder()
	resp := tr.Respond(rec, r, http.StatusOK, httpapi.ContentTypeSync)
	_, _ = resp.Write([]byte("first frame"))
	if err := resp.Flush(); err != nil {
		t.Fatal(err)
	}
	if !resp.Committed() || resp.Discard() || !rec.Flushed {
		t.Fatal("Flush did not commit and flush")
	}
	_, _ = resp.Write([]byte(" second frame"))
	_ = resp.Close()
	if got := decode(t, "zstd", rec.Body.Bytes()); string(got) != "first frame second frame" {
		t.Fatalf("got %q", got)
	}
}

func TestNewTransportValidates(t *testing.T) {
	for _, o := range []httpapi.TransportOptions{
		{MaxBodyBytes: -1},
		{MaxDecodedBodyBytes: -5},
		{GzipLevel: 42},
		{ZstdLevel: 99},
	} {
		if _, err := httpapi.NewTransport(o); err == nil {
			t.Errorf("NewTransport(%+v) accepted", o)
		}
	}
}

type authFunc func(*http.Request) (ports.Identity, error)

func (f authFunc) Authenticate(r *http.Request) (ports.Identity, error) { return f(r) }

func TestAuthenticate(t *testing.T) {
	alice := ports.Identity{ActorID: "alice", Partition: "p"}
	tests := []struct {
		name string
		auth authFunc
		want syncerr.Code
	}{
		{"identity stored on the context", func(*http.Request) (ports.Identity, error) { return alice, nil }, ""},
		{"plain error becomes auth_required", func(*http.Request) (ports.Identity, error) {
			return ports.Identity{}, errors.New("token store down: dial tcp 10.0.0.1")
		}, syncerr.AuthRequired},
		{"catalog error passes through", func(*http.Request) (ports.Identity, error) {
			return ports.Identity{}, syncerr.New(syncerr.RateLimited)
		}, syncerr.RateLimited},
		{"empty partition is refused", func(*http.Request) (ports.Identity, error) {
			return ports.Identity{ActorID: "a"}, nil
		}, syncerr.AuthRequired},
		// The identity is checked whatever authenticator produced it: the
		// actor is stored with commits and echoed in COMMIT frames.
		{"actor that is not UTF-8 is refused", func(*http.Request) (ports.Identity, error) {
			return ports.Identity{ActorID: "al\xffce", Partition: "p"}, nil
		}, syncerr.AuthRequired},
		{"actor with a control character is refused", func(*http.Request) (ports.Identity, error) {
			return ports.Identity{ActorID: "al\x1bce", Partition: "p"}, nil
		}, syncerr.AuthRequired},
		{"actor longer than the id limit is refused", func(*http.Request) (ports.Identity, error) {
			return ports.Identity{ActorID: strings.Repeat("a", 17), Partition: "p"}, nil
		}, syncerr.AuthRequired},
		{"partition that is not UTF-8 is refused", func(*http.Request) (ports.Identity, error) {
			return ports.Identity{ActorID: "alice", Partition: "\xc3("}, nil
		}, syncerr.AuthRequired},
		{"credential scope value that is not UTF-8 is refused", func(*http.Request) (ports.Identity, error) {
			return ports.Identity{ActorID: "alice", Partition: "p", Scopes: scopes.Allowed{"owner": {"\xff"}}}, nil
		}, syncerr.AuthRequired},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/sync", nil)
			r2, id, err := httpapi.Authenticate(r, tc.auth, limits.Limits{MaxIDBytes: 16})
			if syncerr.CodeOf(err) != tc.want {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if tc.want != "" {
				rec := httptest.NewRecorder()
				pub := httpapi.WriteTransportError(rec, err)
				if strings.Contains(rec.Body.String(), "10.0.0.1") || pub.Code != tc.want {
					t.Fatalf("leaky or wrong body %s", rec.Body.String())
				}
				return
			}
			got, ok := ports.IdentityFrom(r2.Context())
			if !ok || !reflect.DeepEqual(got, id) || !reflect.DeepEqual(id, alice) {
				t.Fatalf("identity %+v on context %+v", id, got)
			}
		})
	}
}

func TestSyncEndpoint(t *testing.T) {
	tr, _ := httpapi.NewTransport(httpapi.TransportOptions{MaxBodyBytes: 64})
	auth := authFunc(func(r *http.Request) (ports.Identity, error) {
		if r.Header.Get("Authorization") != "Bearer ok" {
			return ports.Identity{}, syncerr.New(syncerr.AuthRequired)
		}
		return ports.Identity{ActorID: "alice", Partition: "p"}, nil
	})
	h := tr.SyncEndpoint(auth, func(w http.ResponseWriter, r *http.Request, id ports.Identity, body []byte) {
		if got, _ := ports.IdentityFrom(r.Context()); got.ActorID != id.ActorID {
			t.Errorf("identity not on the context")
		}
		_ = tr.WriteEncoded(w, r, http.StatusOK, httpapi.ContentTypeSync, append([]byte(id.ActorID+":"), body...))
	})
	tests := []struct {
		name, auth, contentType string
		body                    []byte
		status                  int
		want                    string
	}{
		{"served", "Bearer ok", httpapi.ContentTypeSync, []byte("SSP2"), 200, "alice:SSP2"},
		{"authentication comes first", "", "text/plain", []byte("x"), 401, ""},
		{"then the content type", "Bearer ok", "text/plain", []byte("x"), 415, ""},
		{"then the body limit", "Bearer ok", httpapi.ContentTypeSync, make([]byte, 65), 413, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/sync", bytes.NewReader(tc.body))
			r.Header.Set("Content-Type", tc.contentType)
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tc.status {
				t.Fatalf("status = %d, want %d: %s", rec.Code, tc.status, rec.Body.String())
			}
			if tc.want != "" && rec.Body.String() != tc.want {
				t.Fatalf("body = %q", rec.Body.String())
			}
		})
	}
}

type brokenReader struct{}

func (brokenReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

func TestBodyReadFailure(t *testing.T) {
	tr, _ := httpapi.NewTransport(httpapi.TransportOptions{})
	for _, enc := range []string{"", "gzip"} {
		r := httptest.NewRequest(http.MethodPost, "/sync", io.MultiReader(bytes.NewReader([]byte("x")), brokenReader{}))
		r.Header.Set("Content-Type", httpapi.ContentTypeSync)
		if enc != "" {
			r.Header.Set("Content-Encoding", enc)
		}
		_, err := tr.ReadSyncRequest(r)
		rec := httptest.NewRecorder()
		httpapi.WriteTransportError(rec, err)
		if rec.Code != 400 || strings.Contains(rec.Body.String(), "reset by peer") {
			t.Fatalf("%q: status %d body %s", enc, rec.Code, rec.Body.String())
		}
	}
}
