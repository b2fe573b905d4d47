package httpapi_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/adapters/httpapi"
)

func FuzzNegotiateEncoding(f *testing.F) {
	for _, s := range []string{"", "gzip", "zstd;q=0.5, gzip;q=0.5", "*;q=0", "identity;q=1, gzip;q=0.5", "gzip;q=abc", ";;,,;q="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		switch httpapi.NegotiateEncoding(header) {
		case httpapi.EncodingZstd, httpapi.EncodingGzip, httpapi.EncodingIdentity:
		default:
			t.Fatalf("unknown encoding for %q", header)
		}
	})
}

// FuzzReadBody feeds arbitrary bytes as gzip and zstd bodies: decoding
// must never panic and never return more than the decoded limit.
func FuzzReadBody(f *testing.F) {
	const maxDecoded = 4 << 10
	tr, err := httpapi.NewTransport(httpapi.TransportOptions{MaxBodyBytes: 1 << 10, MaxDecodedBodyBytes: maxDecoded})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, true)
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0}, false)
	f.Fuzz(func(t *testing.T, body []byte, useGzip bool) {
		r := httptest.NewRequest(http.MethodPost, "/sync", bytes.NewReader(body))
		r.Header.Set("Content-Type", httpapi.ContentTypeSync)
		if useGzip {
			r.Header.Set("Content-Encoding", "gzip")
		} else {
			r.Header.Set("Content-Encoding", "zstd")
		}
		type result struct {
			b   []byte
			err error
		}
		done := make(chan result, 1)
		go func() {
			b, err := tr.ReadSyncRequest(r)
			done <- result{b, err}
		}()
		var got []byte
		var err error
		select {
		case res := <-done:
			got, err = res.b, res.err
		case <-time.After(2 * time.Second):
			t.Fatalf("decoding hangs on %x (gzip %v)", body, useGzip)
		}
		if err == nil && len(got) > maxDecoded {
			t.Fatalf("decoded %d bytes past the %d limit", len(got), maxDecoded)
		}
		if err != nil {
			rec := httptest.NewRecorder()
			httpapi.WriteTransportError(rec, err)
			if rec.Code != 400 && rec.Code != 413 {
				t.Fatalf("status %d for %v", rec.Code, err)
			}
		}
	})
}
