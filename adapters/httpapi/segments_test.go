package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
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

// decodeBody undoes a response's Content-Encoding.
func decodeBody(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	var r io.Reader = resp.Body
	switch resp.Header.Get("Content-Encoding") {
	case "gzip":
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	case "zstd":
		zr, err := zstd.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A compressed segment body is kept by content address and encoding: the
// next authorized download of the segment is answered from it without
// opening the store, with the same bytes; identity and signed-URL
// downloads, and bodies past a quarter of the bound, are never kept.
func TestSegmentBodiesCached(t *testing.T) {
	f := &fakeSegments{bytes: bytes.Repeat([]byte("image bytes "), 2000)}
	tr, err := NewTransport(TransportOptions{SegmentCacheBytes: 4 * int64(len(f.bytes))})
	if err != nil {
		t.Fatal(err)
	}
	router, err := New(Options{Handlers: map[Route]http.Handler{RouteSegment: tr.SegmentEndpoint(headerAuth{}, f, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(router)
	defer srv.Close()
	url := srv.URL + "/segments/" + contentaddr.Of(f.bytes)
	download := func(enc string, signed bool) (*http.Response, bool) {
		f.openCalled = false
		u := url
		hdr := map[string]string{"Authorization": "x", "Accept-Encoding": enc}
		if signed {
			u += "?st=tok"
		}
		resp := get(t, u, hdr)
		if resp.StatusCode != 200 || !bytes.Equal(decodeBody(t, resp), f.bytes) {
			t.Fatalf("%s signed=%v: status %d or other bytes", enc, signed, resp.StatusCode)
		}
		return resp, f.openCalled
	}
	for _, enc := range []string{"zstd", "gzip"} {
		first, opened := download(enc, false)
		if !opened || first.Header.Get("Content-Encoding") != enc {
			t.Fatalf("%s: first download opened %v, encoding %q", enc, opened, first.Header.Get("Content-Encoding"))
		}
		again, opened := download(enc, false)
		if opened || again.Header.Get("Content-Encoding") != enc || again.Header.Get("ETag") != first.Header.Get("ETag") ||
			again.Header.Get("Vary") != segmentVary || again.ContentLength <= 0 {
			t.Fatalf("%s: second download opened %v, headers %v", enc, opened, again.Header)
		}
	}
	for _, signed := range []bool{false, true} {
		enc := "identity"
		if signed {
			enc = "zstd"
		}
		for range 2 {
			resp, opened := download(enc, signed)
			if !opened || resp.Header.Get("Content-Encoding") != "" {
				t.Fatalf("%s signed=%v: opened %v, encoding %q", enc, signed, opened, resp.Header.Get("Content-Encoding"))
			}
		}
	}
	// Authorization still runs first: a refused request never reads it.
	f.directErr = syncerr.New(syncerr.Forbidden)
	if resp := get(t, url, map[string]string{"Authorization": "x", "Accept-Encoding": "zstd"}); resp.StatusCode != 403 {
		t.Fatalf("refused download: %d", resp.StatusCode)
	}
	f.directErr = nil
	// A body past a quarter of the bound is not kept: opened every time.
	big := &fakeSegments{bytes: randomBytes(t, 2*len(f.bytes))}
	router2, _ := New(Options{Handlers: map[Route]http.Handler{RouteSegment: tr.SegmentEndpoint(headerAuth{}, big, nil)}})
	srv2 := httptest.NewServer(router2)
	defer srv2.Close()
	for range 2 {
		big.openCalled = false
		resp := get(t, srv2.URL+"/segments/"+contentaddr.Of(big.bytes), map[string]string{"Authorization": "x", "Accept-Encoding": "zstd"})
		if resp.StatusCode != 200 || !big.openCalled || !bytes.Equal(decodeBody(t, resp), big.bytes) {
			t.Fatalf("large segment: status %d opened %v", resp.StatusCode, big.openCalled)
		}
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}
