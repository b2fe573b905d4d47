package httpapi

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// fakeBlobs records what the endpoints hand the use case and answers what
// the test sets.
type fakeBlobs struct {
	data     []byte
	media    string
	err      error // every method's refusal
	grant    ports.BlobGrant
	presign  bool
	upload   ports.BlobUploadRequest
	received []byte
	grantReq ports.BlobGrantRequest
	ident    ports.Identity
	query    url.Values
	length   int64
	opened   [2]int64
	// upBuf and downBuf are the buffer bytes the fake says a transfer
	// holds; hold, when set, is called inside Upload, PutSigned and Open
	// (a test reads the limiter there).
	upBuf, downBuf int64
	hold           func()
}

func (f *fakeBlobs) UploadBufferBytes(u ports.BlobUploadRequest) int64 { return f.upBuf }

func (f *fakeBlobs) DownloadBufferBytes(ports.BlobInfo, int64) int64 { return f.downBuf }

func (f *fakeBlobs) held() {
	if f.hold != nil {
		f.hold()
	}
}

func (f *fakeBlobs) info() ports.BlobInfo {
	return ports.BlobInfo{Partition: "p", BlobID: contentaddr.Of(f.data), ByteLength: int64(len(f.data)), MediaType: f.media}
}

func (f *fakeBlobs) Upload(_ context.Context, id ports.Identity, u ports.BlobUploadRequest, body io.Reader) error {
	f.ident, f.upload = id, u
	f.held()
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	f.received = b
	return f.err
}

func (f *fakeBlobs) UploadGrant(_ context.Context, id ports.Identity, _ string, g ports.BlobGrantRequest) (ports.BlobGrant, error) {
	f.ident, f.grantReq = id, g
	return f.grant, f.err
}

func (f *fakeBlobs) Download(_ context.Context, id ports.Identity, _ string) (ports.BlobDownload, error) {
	f.ident = id
	if f.err != nil {
		return ports.BlobDownload{}, f.err
	}
	if f.presign {
		return ports.BlobDownload{Info: f.info(), URL: "https://cdn.example/x?sig=1", ExpiresAtMs: 42_000}, nil
	}
	return ports.BlobDownload{Info: f.info()}, nil
}

func (f *fakeBlobs) Open(_ context.Context, _ ports.BlobInfo, offset, length int64) (io.ReadCloser, error) {
	f.opened = [2]int64{offset, length}
	f.held()
	return io.NopCloser(bytes.NewReader(f.data[offset : offset+length])), nil
}

func (f *fakeBlobs) GetSigned(_ context.Context, _ string, q url.Values) (ports.BlobInfo, error) {
	f.query = q
	return f.info(), f.err
}

func (f *fakeBlobs) PutSigned(_ context.Context, _ string, q url.Values, n int64, body io.Reader) error {
	f.query, f.length = q, n
	f.held()
	b, err := io.ReadAll(body)
	f.received = b
	if err != nil {
		return err
	}
	return f.err
}

func blobServer(t *testing.T, f *fakeBlobs) *httptest.Server {
	t.Helper()
	return blobServerWith(t, f, TransportOptions{}, nil)
}

// blobServerWith serves svc's blob routes under /api through a transport
// of opts; listen, when set, wraps the server's listener.
func blobServerWith(t *testing.T, f ports.BlobService, opts TransportOptions, listen func(net.Listener) net.Listener) *httptest.Server {
	t.Helper()
	tr, err := NewTransport(opts)
	if err != nil {
		t.Fatal(err)
	}
	router, err := New(Options{Mount: "/api", Handlers: map[Route]http.Handler{
		RouteBlobPut:         tr.BlobUploadEndpoint(headerAuth{}, f, nil),
		RouteBlobUploadGrant: tr.BlobUploadGrantEndpoint(headerAuth{}, f, nil),
		RouteBlobGet:         tr.BlobDownloadEndpoint(headerAuth{}, f, nil),
		RouteBlobObjectGet:   tr.BlobObjectGetEndpoint(f, nil),
		RouteBlobObjectPut:   tr.BlobObjectPutEndpoint(f, nil),
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(router)
	if listen != nil {
		srv.Listener = listen(srv.Listener)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, method, url string, body io.Reader, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func bodyCode(t *testing.T, b []byte) string {
	t.Helper()
	var e struct{ Code string }
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("not a §10.1 body: %s", b)
	}
	return e.Code
}

func TestBlobUploadEndpoint(t *testing.T) {
	data := []byte("attached bytes")
	id := contentaddr.Of(data)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(data)
	_ = zw.Close()
	for _, tc := range []struct {
		name       string
		body       []byte
		header     map[string]string
		err        error
		wantStatus int
		wantCode   string
		wantLen    int64
		wantMedia  string
	}{
		{name: "stored", body: data, header: map[string]string{"Authorization": "x", "Content-Type": "text/plain"}, wantStatus: 200, wantLen: int64(len(data)), wantMedia: "text/plain"},
		{name: "gzip body is decoded, length unknown", body: gz.Bytes(), header: map[string]string{"Authorization": "x", "Content-Encoding": "gzip"}, wantStatus: 200, wantLen: -1},
		{name: "no authentication", body: data, header: nil, wantStatus: 401, wantCode: "sync.auth_required"},
		{name: "unknown encoding", body: data, header: map[string]string{"Authorization": "x", "Content-Encoding": "br"}, wantStatus: 415, wantCode: "sync.invalid_request"},
		{name: "corrupt gzip", body: []byte("not gzip"), header: map[string]string{"Authorization": "x", "Content-Encoding": "gzip"}, wantStatus: 400, wantCode: "sync.invalid_request"},
		{name: "too large", body: data, header: map[string]string{"Authorization": "x"}, err: syncerr.New(syncerr.BlobTooLarge), wantStatus: 413, wantCode: "blob.too_large"},
		{name: "hash mismatch", body: data, header: map[string]string{"Authorization": "x"}, err: syncerr.New(syncerr.BlobHashMismatch), wantStatus: 400, wantCode: "blob.hash_mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBlobs{err: tc.err}
			srv := blobServer(t, f)
			resp, b := do(t, http.MethodPut, srv.URL+"/api/blobs/"+id, bytes.NewReader(tc.body), tc.header)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, b, tc.wantStatus)
			}
			if tc.wantCode != "" {
				if c := bodyCode(t, b); c != tc.wantCode {
					t.Fatalf("code %s, want %s", c, tc.wantCode)
				}
				return
			}
			if len(b) != 0 {
				t.Fatalf("success body %q, want empty", b)
			}
			if f.upload.BlobID != id || f.upload.ByteLength != tc.wantLen || f.upload.MediaType != tc.wantMedia || !bytes.Equal(f.received, data) || f.ident.ActorID != "a" {
				t.Fatalf("use case got %+v %q as %+v", f.upload, f.received, f.ident)
			}
		})
	}
}

func TestBlobUploadGrantEndpoint(t *testing.T) {
	auth := map[string]string{"Authorization": "x", "Content-Type": "application/json"}
	for _, tc := range []struct {
		name       string
		body       string
		grant      ports.BlobGrant
		wantStatus int
		want       string // answer body, or the error code
		wantReq    ports.BlobGrantRequest
	}{
		{name: "no presigned uploads", body: `{"byteLength":3}`, wantStatus: 200, want: `{}`, wantReq: ports.BlobGrantRequest{ByteLength: 3}},
		{name: "present", body: `{"byteLength":3,"mediaType":"image/png"}`, grant: ports.BlobGrant{Present: true}, wantStatus: 200, want: `{"present":true}`, wantReq: ports.BlobGrantRequest{ByteLength: 3, MediaType: "image/png"}},
		{name: "url", body: `{"byteLength":3}`, grant: ports.BlobGrant{URL: "https://store/x", ExpiresAtMs: 9}, wantStatus: 200, want: `{"url":"https://store/x","urlExpiresAtMs":9}`, wantReq: ports.BlobGrantRequest{ByteLength: 3}},
		{name: "integral exponent", body: `{"byteLength":1e3}`, wantStatus: 200, want: `{}`, wantReq: ports.BlobGrantRequest{ByteLength: 1000}},
		{name: "negative is over the cap", body: `{"byteLength":-1}`, wantStatus: 200, want: `{}`, wantReq: ports.BlobGrantRequest{ByteLength: math.MaxInt64}},
		{name: "fraction is over the cap", body: `{"byteLength":1.5}`, wantStatus: 200, want: `{}`, wantReq: ports.BlobGrantRequest{ByteLength: math.MaxInt64}},
		{name: "no byteLength", body: `{}`, wantStatus: 400, want: "sync.invalid_request"},
		{name: "string byteLength", body: `{"byteLength":"3"}`, wantStatus: 400, want: "sync.invalid_request"},
		{name: "not json", body: `byteLength=3`, wantStatus: 400, want: "sync.invalid_request"},
		{name: "trailing data", body: `{"byteLength":3} {}`, wantStatus: 400, want: "sync.invalid_request"},
		{name: "body too large", body: `{"byteLength":3,"mediaType":"` + strings.Repeat("x", 20<<10) + `"}`, wantStatus: 413, want: "sync.invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBlobs{grant: tc.grant}
			srv := blobServer(t, f)
			resp, b := do(t, http.MethodPost, srv.URL+"/api/blobs/"+contentaddr.Of(nil)+"/upload-grant", strings.NewReader(tc.body), auth)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, b, tc.wantStatus)
			}
			if tc.wantStatus != 200 {
				if c := bodyCode(t, b); c != tc.want {
					t.Fatalf("code %s, want %s", c, tc.want)
				}
				return
			}
			if got := strings.TrimSpace(string(b)); got != tc.want || resp.Header.Get("Content-Type") != ContentTypeJSON {
				t.Fatalf("answer %s (%s), want %s", got, resp.Header.Get("Content-Type"), tc.want)
			}
			if f.grantReq != tc.wantReq {
				t.Fatalf("use case got %+v, want %+v", f.grantReq, tc.wantReq)
			}
		})
	}
	f := &fakeBlobs{}
	srv := blobServer(t, f)
	if resp, b := do(t, http.MethodPost, srv.URL+"/api/blobs/x/upload-grant", strings.NewReader(`{"byteLength":3}`), nil); resp.StatusCode != 401 {
		t.Fatalf("unauthenticated grant: %d %s", resp.StatusCode, b)
	}
}

func TestBlobDownloadEndpoint(t *testing.T) {
	data := []byte("0123456789")
	id := contentaddr.Of(data)
	for _, tc := range []struct {
		name       string
		header     map[string]string
		media      string
		wantStatus int
		wantBody   string
		wantRange  string // Content-Range
		wantType   string
	}{
		{name: "whole blob", wantStatus: 200, wantBody: "0123456789", wantType: ContentTypeBlob},
		{name: "stored media type", media: "text/plain", wantStatus: 200, wantBody: "0123456789", wantType: "text/plain"},
		{name: "range", header: map[string]string{"Range": "bytes=2-5"}, wantStatus: 206, wantBody: "2345", wantRange: "bytes 2-5/10"},
		{name: "open range", header: map[string]string{"Range": "bytes=7-"}, wantStatus: 206, wantBody: "789", wantRange: "bytes 7-9/10"},
		{name: "suffix range", header: map[string]string{"Range": "bytes=-3"}, wantStatus: 206, wantBody: "789", wantRange: "bytes 7-9/10"},
		{name: "range past the end is clipped", header: map[string]string{"Range": "bytes=8-99"}, wantStatus: 206, wantBody: "89", wantRange: "bytes 8-9/10"},
		{name: "range beyond the blob", header: map[string]string{"Range": "bytes=10-"}, wantStatus: 416, wantRange: "bytes */10"},
		{name: "several ranges serve the whole", header: map[string]string{"Range": "bytes=0-1,4-5"}, wantStatus: 200, wantBody: "0123456789"},
		{name: "other unit serves the whole", header: map[string]string{"Range": "items=0-1"}, wantStatus: 200, wantBody: "0123456789"},
		{name: "if-range of another version serves the whole", header: map[string]string{"Range": "bytes=0-1", "If-Range": `"sha256:other"`}, wantStatus: 200, wantBody: "0123456789"},
		{name: "if-range of this blob", header: map[string]string{"Range": "bytes=0-1", "If-Range": `"` + id + `"`}, wantStatus: 206, wantBody: "01", wantRange: "bytes 0-1/10"},
		{name: "not modified", header: map[string]string{"If-None-Match": `"` + id + `"`}, wantStatus: 304},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBlobs{data: data, media: tc.media}
			srv := blobServer(t, f)
			h := map[string]string{"Authorization": "x"}
			for k, v := range tc.header {
				h[k] = v
			}
			resp, b := do(t, http.MethodGet, srv.URL+"/api/blobs/"+id, nil, h)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, b, tc.wantStatus)
			}
			if got := resp.Header.Get("Content-Range"); got != tc.wantRange {
				t.Fatalf("Content-Range %q, want %q", got, tc.wantRange)
			}
			if tc.wantStatus == 416 {
				if c := bodyCode(t, b); c != "sync.invalid_request" {
					t.Fatalf("416 code %s", c)
				}
				return
			}
			if string(b) != tc.wantBody {
				t.Fatalf("body %q, want %q", b, tc.wantBody)
			}
			if resp.Header.Get("ETag") != `"`+id+`"` || resp.Header.Get("Cache-Control") != "private, max-age=0" || resp.Header.Get("Vary") != "Authorization, Accept-Encoding" {
				t.Fatalf("headers %v", resp.Header)
			}
			if tc.wantType != "" && resp.Header.Get("Content-Type") != tc.wantType {
				t.Fatalf("Content-Type %q, want %q", resp.Header.Get("Content-Type"), tc.wantType)
			}
		})
	}
}

func TestBlobDownloadRefusalsAndURLs(t *testing.T) {
	data := []byte("bytes")
	id := contentaddr.Of(data)
	for _, tc := range []struct {
		err    error
		status int
	}{
		{syncerr.New(syncerr.BlobNotFound), 404},
		{syncerr.New(syncerr.BlobForbidden), 403},
	} {
		srv := blobServer(t, &fakeBlobs{data: data, err: tc.err})
		resp, b := do(t, http.MethodGet, srv.URL+"/api/blobs/"+id, nil, map[string]string{"Authorization": "x"})
		if resp.StatusCode != tc.status || bodyCode(t, b) != string(syncerr.CodeOf(tc.err)) {
			t.Fatalf("refusal %v answered %d %s", tc.err, resp.StatusCode, b)
		}
	}
	// Presign configured: the answer is the URL, never the bytes.
	f := &fakeBlobs{data: data, presign: true}
	srv := blobServer(t, f)
	resp, b := do(t, http.MethodGet, srv.URL+"/api/blobs/"+id, nil, map[string]string{"Authorization": "x"})
	if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != `{"url":"https://cdn.example/x?sig=1","urlExpiresAtMs":42000}` ||
		resp.Header.Get("ETag") != `"`+id+`"` || resp.Header.Get("Vary") != "Authorization, Accept-Encoding" {
		t.Fatalf("presigned answer %d %s %v", resp.StatusCode, b, resp.Header)
	}
	if f.opened != [2]int64{} {
		t.Fatal("presigned download opened the blob")
	}
}

func TestBlobObjectEndpoints(t *testing.T) {
	data := []byte("object bytes")
	id := contentaddr.Of(data)
	f := &fakeBlobs{data: data, media: "text/plain"}
	srv := blobServer(t, f)
	// No host authentication: the query is the grant.
	resp, b := do(t, http.MethodGet, srv.URL+"/api/blob-objects/"+id+"?op=get&sig=s", nil, nil)
	if resp.StatusCode != 200 || string(b) != string(data) || f.query.Get("sig") != "s" || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("GET object: %d %q %v", resp.StatusCode, b, f.query)
	}
	resp, b = do(t, http.MethodPut, srv.URL+"/api/blob-objects/"+id+"?op=put&len=12", bytes.NewReader(data), nil)
	if resp.StatusCode != 200 || len(b) != 0 || f.length != 12 || f.query.Get("op") != "put" || !bytes.Equal(f.received, data) {
		t.Fatalf("PUT object: %d %q length %d %v", resp.StatusCode, b, f.length, f.query)
	}
	f.err = syncerr.New(syncerr.BlobForbidden)
	if resp, b := do(t, http.MethodGet, srv.URL+"/api/blob-objects/"+id+"?op=get", nil, nil); resp.StatusCode != 403 || bodyCode(t, b) != "blob.forbidden" {
		t.Fatalf("refused GET object: %d %s", resp.StatusCode, b)
	}
}
