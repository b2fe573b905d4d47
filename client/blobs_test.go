package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/test/ssptest"
)

func TestBlobRefJSON(t *testing.T) {
	for _, r := range []BlobRef{
		{BlobID: contentaddr.Of(nil), ByteLength: 0},
		{BlobID: contentaddr.Of([]byte("x")), ByteLength: 1, MediaType: "text/html", Name: "a <b> & c.txt"},
		{BlobID: contentaddr.Of([]byte("y")), ByteLength: 9007199254740991, Name: "only a name"},
	} {
		doc, err := rowcodec.ParseBlobRef([]byte(r.JSON()))
		if err != nil {
			t.Fatalf("%s: %v", r.JSON(), err)
		}
		if doc.BlobID != r.BlobID || doc.ByteLength != r.ByteLength || doc.MediaType != r.MediaType || doc.Name != r.Name || doc.HasMedia != (r.MediaType != "") {
			t.Fatalf("%s parsed as %+v", r.JSON(), doc)
		}
	}
}

// TestDownloadBlobAnswers: a JSON answer is a presigned URL unless its
// bytes are the blob's own; a URL is fetched without host authentication
// and never past its expiry.
func TestDownloadBlobAnswers(t *testing.T) {
	jsonBlob := []byte(`{"url":"http://elsewhere.invalid/x"}`)
	plain := []byte("plain bytes")
	var urlAuth []string
	var expiresAt int64
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mux.HandleFunc("GET /blobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			w.WriteHeader(401)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.PathValue("id") {
		case contentaddr.Of(jsonBlob):
			_, _ = w.Write(jsonBlob)
		default:
			_ = json.NewEncoder(w).Encode(map[string]any{"url": srv.URL + "/cdn/" + r.PathValue("id"), "urlExpiresAtMs": expiresAt})
		}
	})
	mux.HandleFunc("GET /cdn/{id}", func(w http.ResponseWriter, r *http.Request) {
		urlAuth = append(urlAuth, r.Header.Get("Authorization"))
		if r.PathValue("id") == contentaddr.Of(plain) {
			_, _ = w.Write(plain)
			return
		}
		_, _ = w.Write([]byte("not the blob"))
	})
	c, err := New(Options{BaseURL: srv.URL, Schema: ssptest.Schema(t), BearerToken: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if b, err := c.DownloadBlob(ctx, contentaddr.Of(jsonBlob)); err != nil || string(b) != string(jsonBlob) {
		t.Fatalf("JSON blob = %q %v", b, err)
	}
	expiresAt = time.Now().Add(time.Minute).UnixMilli()
	if b, err := c.DownloadBlob(ctx, contentaddr.Of(plain)); err != nil || string(b) != string(plain) {
		t.Fatalf("presigned = %q %v", b, err)
	}
	if len(urlAuth) != 1 || urlAuth[0] != "" {
		t.Fatalf("presigned fetches carried %q", urlAuth)
	}
	if _, err := c.DownloadBlob(ctx, contentaddr.Of([]byte("other"))); !errors.Is(err, ErrBlobMismatch) {
		t.Fatalf("wrong bytes at the URL: %v", err)
	}
	expiresAt = time.Now().Add(-time.Second).UnixMilli()
	fetches := len(urlAuth)
	if _, err := c.DownloadBlob(ctx, contentaddr.Of(plain)); CodeOf(err) != "blob.forbidden" || len(urlAuth) != fetches {
		t.Fatalf("expired URL: %v after %d fetches", err, len(urlAuth)-fetches)
	}
	if s := c.Stats(); s.BlobDownloads != 4 || s.BlobURLFetches != 2 {
		t.Fatalf("stats %+v", s)
	}
	if !strings.HasPrefix(c.blobURL("x"), srv.URL+"/blobs/") {
		t.Fatal(c.blobURL("x"))
	}
}
