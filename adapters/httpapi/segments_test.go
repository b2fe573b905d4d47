package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/iotest"

	"github.com/klauspost/compress/zstd"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

type fakeSegments struct {
	bytes      []byte
	readErr    error // returned by the segment reader after failAt bytes
	failAt     int
	directErr  error
	signedErr  error
	gotScopes  string
	gotToken   string
	gotIdent   ports.Identity
	openCalled bool
}

func (f *fakeSegments) pub() ports.SegmentPublication {
	return ports.SegmentPublication{SegmentID: contentaddr.Of(f.bytes)}
}

func (f *fakeSegments) AuthorizeDirect(_ context.Context, id ports.Identity, _ string, scopesJSON []byte) (ports.SegmentPublication, error) {
	f.gotIdent, f.gotScopes = id, string(scopesJSON)
	return f.pub(), f.directErr
}

func (f *fakeSegments) AuthorizeSigned(_ context.Context, _ string, token string) (ports.SegmentPublication, error) {
	f.gotToken = token
	return f.pub(), f.signedErr
}

func (f *fakeSegments) Open(context.Context, ports.SegmentPublication) (io.ReadCloser, int64, error) {
	f.openCalled = true
	if f.readErr != nil {
		r := io.MultiReader(bytes.NewReader(f.bytes[:f.failAt]), iotest.ErrReader(f.readErr))
		return io.NopCloser(r), int64(len(f.bytes)), nil
	}
	return io.NopCloser(bytes.NewReader(f.bytes)), int64(len(f.bytes)), nil
}

type headerAuth struct{}

func (headerAuth) Authenticate(r *http.Request) (ports.Identity, error) {
	if r.Header.Get("Authorization") == "" {
		return ports.Identity{}, syncerr.New(syncerr.AuthRequired)
	}
	return ports.Identity{ActorID: "a", Partition: "p"}, nil
}

func segmentServer(t *testing.T, f *fakeSegments) *httptest.Server {
	t.Helper()
	tr, err := NewTransport(TransportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	router, err := New(Options{Mount: "/api", Handlers: map[Route]http.Handler{RouteSegment: tr.SegmentEndpoint(headerAuth{}, f, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(router)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	tr := &http.Transport{DisableCompression: true}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func errCode(t *testing.T, resp *http.Response) string {
	t.Helper()
	var b struct {
		Code string `json:"code"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		t.Fatal(err)
	}
	return b.Code
}

func TestSegmentEndpointDirect(t *testing.T) {
	f := &fakeSegments{bytes: bytes.Repeat([]byte("segment-bytes "), 500)}
	srv := segmentServer(t, f)
	id := contentaddr.Of(f.bytes)
	url := srv.URL + "/api/segments/" + id
	auth := map[string]string{"Authorization": "Bearer x", HeaderScopes: `{"k":["v"]}`}

	for _, enc := range []string{"", "gzip", "zstd", "gzip, zstd"} {
		h := map[string]string{"Accept-Encoding": enc}
		for k, v := range auth {
			h[k] = v
		}
		resp := get(t, url, h)
		if resp.StatusCode != 200 {
			t.Fatalf("%q: status %d", enc, resp.StatusCode)
		}
		for k, want := range map[string]string{
			"Content-Type": "application/octet-stream", "ETag": `"` + id + `"`,
			"Cache-Control": "private, max-age=0", "Vary": "Authorization, X-Syncular-Scopes, Accept-Encoding",
		} {
			if got := resp.Header.Values(k); len(got) != 1 || got[0] != want {
				t.Errorf("%q: %s = %q, want %q", enc, k, got, want)
			}
		}
		var body io.Reader = resp.Body
		switch ce := resp.Header.Get("Content-Encoding"); ce {
		case "gzip":
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			body = zr
		case "zstd":
			zr, err := zstd.NewReader(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			defer zr.Close()
			body = zr
		case "":
		default:
			t.Fatalf("Content-Encoding %q", ce)
		}
		if want := map[string]string{"": "", "gzip": "gzip", "zstd": "zstd", "gzip, zstd": "zstd"}[enc]; resp.Header.Get("Content-Encoding") != want {
			t.Errorf("%q: Content-Encoding %q, want %q", enc, resp.Header.Get("Content-Encoding"), want)
		}
		got, err := io.ReadAll(body)
		if err != nil || !bytes.Equal(got, f.bytes) {
			t.Fatalf("%q: body differs (%v)", enc, err)
		}
	}
	if f.gotScopes != `{"k":["v"]}` || f.gotIdent.Partition != "p" {
		t.Fatalf("service saw scopes %q identity %+v", f.gotScopes, f.gotIdent)
	}

	// If-None-Match.
	h := map[string]string{"If-None-Match": `W/"other", "` + id + `"`}
	for k, v := range auth {
		h[k] = v
	}
	f.openCalled = false
	resp := get(t, url, h)
	if resp.StatusCode != http.StatusNotModified || resp.Header.Get("ETag") != `"`+id+`"` || f.openCalled {
		t.Fatalf("If-None-Match: status %d etag %q opened %v", resp.StatusCode, resp.Header.Get("ETag"), f.openCalled)
	}

	// Authentication comes first.
	resp = get(t, url, map[string]string{HeaderScopes: `{}`})
	if resp.StatusCode != 401 || errCode(t, resp) != "sync.auth_required" {
		t.Fatalf("no credentials: %d", resp.StatusCode)
	}

	// Refusals keep their catalog status.
	for code, status := range map[syncerr.Code]int{
		syncerr.Forbidden: 403, syncerr.NotFound: 404, syncerr.SegmentExpired: 404, syncerr.InvalidSubscription: 400,
	} {
		f.directErr = syncerr.New(code)
		resp := get(t, url, auth)
		if resp.StatusCode != status || errCode(t, resp) != string(code) || resp.Header.Get("ETag") != "" {
			t.Errorf("%s: status %d etag %q", code, resp.StatusCode, resp.Header.Get("ETag"))
		}
	}
}

func TestSegmentEndpointSigned(t *testing.T) {
	f := &fakeSegments{bytes: bytes.Repeat([]byte("signed "), 400)}
	srv := segmentServer(t, f)
	url := srv.URL + "/api/segments/" + contentaddr.Of(f.bytes) + "?st=tok.en"
	resp := get(t, url, map[string]string{"Accept-Encoding": "gzip, zstd"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("signed: status %d encoding %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
	}
	got, _ := io.ReadAll(resp.Body)
	if !bytes.Equal(got, f.bytes) || f.gotToken != "tok.en" {
		t.Fatalf("signed body differs or token %q", f.gotToken)
	}
	f.signedErr = syncerr.New(syncerr.Forbidden)
	resp = get(t, url, nil)
	if resp.StatusCode != 403 || errCode(t, resp) != "sync.forbidden" {
		t.Fatalf("refused token: %d", resp.StatusCode)
	}
}

// TestSegmentEndpointStreams checks that identity bodies carry the stored
// length (above CompressMinBytes too), that a read failing before the
// first byte is answered as JSON on every path, and that one failing later
// cuts the body short.
func TestSegmentEndpointStreams(t *testing.T) {
	f := &fakeSegments{bytes: bytes.Repeat([]byte("0123456789abcdef"), 64<<10)}
	srv := segmentServer(t, f)
	id := contentaddr.Of(f.bytes)
	url := srv.URL + "/api/segments/" + id
	auth := map[string]string{"Authorization": "Bearer x", HeaderScopes: `{}`, "Accept-Encoding": "identity"}
	resp := get(t, url, auth)
	got, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(f.bytes)) || err != nil || !bytes.Equal(got, f.bytes) {
		t.Fatalf("identity: status %d length %d, %d bytes back, %v", resp.StatusCode, resp.ContentLength, len(got), err)
	}
	f.readErr = errors.New("disk gone")
	for _, enc := range []string{"identity", "gzip", "zstd"} {
		auth["Accept-Encoding"] = enc
		for _, signed := range []bool{false, true} {
			u := url
			if signed {
				u += "?st=tok"
			}
			resp := get(t, u, auth)
			if resp.StatusCode != 500 || resp.Header.Get("ETag") != "" || resp.Header.Get("Content-Type") != ContentTypeJSON ||
				errCode(t, resp) != string(syncerr.InternalError) {
				t.Errorf("%s signed=%v: a read failing before the first byte: status %d etag %q type %q",
					enc, signed, resp.StatusCode, resp.Header.Get("ETag"), resp.Header.Get("Content-Type"))
			}
		}
	}
	f.failAt = 100 << 10
	auth["Accept-Encoding"] = "identity"
	resp = get(t, url, auth)
	got, err = io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || err == nil || len(got) >= len(f.bytes) {
		t.Fatalf("a read failing mid-body: status %d, %d bytes, %v; want a cut body", resp.StatusCode, len(got), err)
	}
}
