package s3blob

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/syncd-dev/syncd/adapters/clock"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
	"github.com/syncd-dev/syncd/test/fakes3"
)

func newStore(t *testing.T, o Options) *Store {
	t.Helper()
	s, _ := newStoreOn(t, o)
	return s
}

// newStoreOn is newStore with the fake server it stores to.
func newStoreOn(t *testing.T, o Options) (*Store, *fakes3.Server) {
	t.Helper()
	srv := fakes3.Start(t)
	o.Endpoint, o.Region, o.Bucket = srv.URL, fakes3.Region, srv.Bucket(t, "blobs")
	o.AccessKeyID, o.SecretAccessKey, o.UsePathStyle = fakes3.AccessKeyID, fakes3.SecretAccessKey, true
	if o.Prefix == "" {
		o.Prefix = "syncd/"
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s, srv
}

func upload(partition string, b []byte, media string, created int64) ports.BlobUpload {
	return ports.BlobUpload{Partition: partition, BlobID: contentaddr.Of(b), MediaType: media, ByteLength: int64(len(b)),
		MaxBytes: 1 << 30, CreatedAtMs: created}
}

// keys lists every object key in the bucket and every open multipart
// upload's key.
func keys(t *testing.T, s *Store) (objects, uploads []string) {
	t.Helper()
	ctx := context.Background()
	out, err := s.c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &s.bucket})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		objects = append(objects, aws.ToString(o.Key))
	}
	ups, err := s.c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &s.bucket})
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "NoSuchUpload" {
		// The fake server's answer for a bucket that never had one.
		return objects, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range ups.Uploads {
		uploads = append(uploads, aws.ToString(u.Key))
	}
	return objects, uploads
}

// TestPresignedURLsWorkWithPlainHTTP: a presigned PUT accepts the
// declared bytes from a client that knows nothing of S3 and the blob is
// then stored; a presigned GET serves it with its media type. The URLs
// are signed at the app clock's time, for the ttl, and the PUT's
// signature covers Content-Length.
func TestPresignedURLsWorkWithPlainHTTP(t *testing.T) {
	signedAt := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	s := newStore(t, Options{Clock: clock.NewVirtual(signedAt.UnixMilli())})
	ctx := context.Background()
	b := bytes.Repeat([]byte("direct to the object store "), 1000)
	u := upload("tenant/1", b, "", 5)

	put, err := s.PresignPut(ctx, u, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	q := mustQuery(t, put)
	if got := q.Get("X-Amz-Date"); got != signedAt.Format("20060102T150405Z") {
		t.Fatalf("PUT URL signed at %s, want the clock's %s", got, signedAt.Format("20060102T150405Z"))
	}
	if q.Get("X-Amz-Expires") != "600" {
		t.Fatalf("PUT URL expires after %ss, want 600", q.Get("X-Amz-Expires"))
	}
	if signed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";"); !contains(signed, "content-length") {
		t.Fatalf("PUT URL signs %v, want content-length among them", signed)
	}
	if !strings.Contains(put, blobKeyHex(u.BlobID)) {
		t.Fatalf("PUT URL %s does not name the blob's key", put)
	}
	req, err := http.NewRequest(http.MethodPut, put, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("presigned PUT: %s", res.Status)
	}
	info, ok, err := s.Stat(ctx, "tenant/1", u.BlobID)
	if err != nil || !ok || info.ByteLength != int64(len(b)) || info.MediaType != "" || info.CreatedAtMs <= 0 {
		t.Fatalf("Stat after a presigned PUT = %+v %v %v", info, ok, err)
	}

	// A blob stored through the store downloads with its media type.
	c := []byte("<svg/>")
	if _, _, err := s.Put(ctx, upload("tenant/1", c, "image/svg+xml", 6), bytes.NewReader(c)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id, media string
		want      []byte
	}{{u.BlobID, "", b}, {contentaddr.Of(c), "image/svg+xml", c}} {
		get, err := s.PresignGet(ctx, "tenant/1", tc.id, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if mustQuery(t, get).Get("X-Amz-Date") != signedAt.Format("20060102T150405Z") {
			t.Fatal("GET URL not signed at the clock's time")
		}
		res, err := http.Get(get)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK || !bytes.Equal(got, tc.want) {
			t.Fatalf("presigned GET: %s, %d bytes (%s), %v", res.Status, len(got), got, err)
		}
		if tc.media != "" && res.Header.Get("Content-Type") != tc.media {
			t.Fatalf("presigned GET Content-Type %q, want %q", res.Header.Get("Content-Type"), tc.media)
		}
	}
}

// do sends one plain HTTP request and returns its status and body.
func do(t *testing.T, method, u string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	return res.StatusCode, string(b)
}

// TestPresignedURLsAreSignedForWhatTheyAllow: the object store checks a
// presigned URL's SigV4 signature (the fake server recomputes it with
// the AWS SDK's signer, as S3 does), so a URL allows exactly what the
// grant signed: the PUT of the declared length to the blob's key, before
// its expiry, signed with the store's credentials. Each refusal stores
// nothing.
func TestPresignedURLsAreSignedForWhatTheyAllow(t *testing.T) {
	signedAt := time.Now().UTC().Truncate(time.Second)
	s, srv := newStoreOn(t, Options{Clock: clock.NewVirtual(signedAt.UnixMilli())})
	ctx := context.Background()
	b := bytes.Repeat([]byte("declared bytes "), 100)
	u := upload("tenant/1", b, "", 5)
	put, err := s.PresignPut(ctx, u, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	other := []byte("another blob")
	otherPut, err := s.PresignPut(ctx, upload("tenant/1", other, "", 5), 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wrongKey, err := New(Options{Endpoint: srv.URL, Region: fakes3.Region, Bucket: "blobs", Prefix: "syncd/", UsePathStyle: true,
		AccessKeyID: fakes3.AccessKeyID, SecretAccessKey: "not-the-secret", Clock: clock.NewVirtual(signedAt.UnixMilli())})
	if err != nil {
		t.Fatal(err)
	}
	forged, err := wrongKey.PresignPut(ctx, u, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	swapped := mustQuery(t, otherPut).Get("X-Amz-Signature")
	uu, _ := url.Parse(put)
	q := uu.Query()
	q.Set("X-Amz-Signature", swapped)
	uu.RawQuery = q.Encode()

	for _, tc := range []struct {
		name string
		url  string
		body []byte
		at   time.Time
		want string // the S3 error code
	}{
		{"a byte short of the signed length", put, b[1:], signedAt, "SignatureDoesNotMatch"},
		{"a byte past the signed length", put, append(bytes.Clone(b), '!'), signedAt, "SignatureDoesNotMatch"},
		{"another blob's signature", uu.String(), b, signedAt, "SignatureDoesNotMatch"},
		{"signed with another secret", forged, b, signedAt, "SignatureDoesNotMatch"},
		{"past its expiry", put, b, signedAt.Add(10*time.Minute + time.Second), "AccessDenied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.SetClock(func() time.Time { return tc.at })
			status, body := do(t, http.MethodPut, tc.url, tc.body)
			if status != http.StatusForbidden || !strings.Contains(body, "<Code>"+tc.want+"</Code>") {
				t.Fatalf("PUT: %d %s, want 403 %s", status, body, tc.want)
			}
			if _, ok, err := s.Stat(ctx, "tenant/1", u.BlobID); err != nil || ok {
				t.Fatalf("a refused PUT stored the blob (%v, %v)", ok, err)
			}
		})
	}
	// The URL as signed, within its lifetime, stores the blob.
	srv.SetClock(func() time.Time { return signedAt.Add(10 * time.Minute) })
	if status, body := do(t, http.MethodPut, put, b); status != http.StatusOK {
		t.Fatalf("the signed PUT: %d %s", status, body)
	}
	if _, ok, err := s.Stat(ctx, "tenant/1", u.BlobID); err != nil || !ok {
		t.Fatalf("Stat after the signed PUT: %v, %v", ok, err)
	}
}

func TestPresignRefusals(t *testing.T) {
	s := newStore(t, Options{})
	ctx := context.Background()
	b := []byte("x")
	tests := []struct {
		name string
		do   func() error
		want syncerr.Code
	}{
		{"put: malformed id", func() error {
			u := upload("p", b, "", 1)
			u.BlobID = "sha256:nope"
			_, err := s.PresignPut(ctx, u, time.Minute)
			return err
		}, syncerr.BlobHashMismatch},
		{"put: over the cap", func() error {
			u := upload("p", b, "", 1)
			u.ByteLength, u.MaxBytes = 11, 10
			_, err := s.PresignPut(ctx, u, time.Minute)
			return err
		}, syncerr.BlobTooLarge},
		{"put: unknown length", func() error {
			u := upload("p", b, "", 1)
			u.ByteLength = -1
			_, err := s.PresignPut(ctx, u, time.Minute)
			return err
		}, syncerr.InvalidRequest},
		{"put: ttl past SigV4's week", func() error {
			_, err := s.PresignPut(ctx, upload("p", b, "", 1), 8*24*time.Hour)
			return err
		}, syncerr.InternalError},
		{"get: malformed id", func() error {
			_, err := s.PresignGet(ctx, "p", "../x", time.Minute)
			return err
		}, syncerr.BlobNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := syncerr.CodeOf(tc.do()); got != tc.want {
				t.Fatalf("code %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRefusedUploadsLeaveNoObject: after refused bodies of both upload
// paths (one streamed PUT, a multipart upload) the bucket holds no
// staging object and no open multipart upload; a stored blob is one
// object.
func TestRefusedUploadsLeaveNoObject(t *testing.T) {
	s := newStore(t, Options{PartSize: MinPartSize})
	ctx := context.Background()
	b := bytes.Repeat([]byte{1, 2, 3}, 4<<20) // 12 MiB: three parts
	bad := bytes.Clone(b)
	bad[len(bad)-1] = 9
	for _, declared := range []int64{int64(len(b)), -1} {
		u := upload("p", b, "", 1)
		u.ByteLength = declared
		if _, _, err := s.Put(ctx, u, bytes.NewReader(bad)); syncerr.CodeOf(err) != syncerr.BlobHashMismatch {
			t.Fatalf("Put of other bytes (declared %d): %v", declared, err)
		}
		u.MaxBytes = int64(len(b)) - 1
		u.ByteLength = -1
		if _, _, err := s.Put(ctx, u, bytes.NewReader(b)); syncerr.CodeOf(err) != syncerr.BlobTooLarge {
			t.Fatalf("Put over the cap: %v", err)
		}
	}
	if objects, uploads := keys(t, s); len(objects) != 0 || len(uploads) != 0 {
		t.Fatalf("refused uploads left objects %v and multipart uploads %v", objects, uploads)
	}
	u := upload("p", b, "", 1)
	u.ByteLength = -1
	if _, created, err := s.Put(ctx, u, bytes.NewReader(b)); err != nil || !created {
		t.Fatalf("multipart Put: created %v, %v", created, err)
	}
	if objects, uploads := keys(t, s); len(objects) != 1 || len(uploads) != 0 || !strings.HasSuffix(objects[0], blobKeyHex(u.BlobID)) {
		t.Fatalf("after one Put: objects %v, multipart uploads %v", objects, uploads)
	}
}

// TestStaleStagingIsSwept: staging objects older than StaleUploadAfter on
// the app clock go at the next Put; younger ones stay.
func TestStaleStagingIsSwept(t *testing.T) {
	s := newStore(t, Options{StaleUploadAfter: time.Hour})
	ctx := context.Background()
	const now = int64(10 * time.Hour / time.Millisecond)
	old := s.prefix + stagingPrefix + strconv.FormatInt(now-2*3600_000, 10) + "-dead"
	young := s.prefix + stagingPrefix + strconv.FormatInt(now-1000, 10) + "-busy"
	for _, k := range []string{old, young} {
		if _, err := s.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: aws.String(k), Body: strings.NewReader("partial")}); err != nil {
			t.Fatal(err)
		}
	}
	b := []byte("later")
	if _, _, err := s.Put(ctx, upload("p", b, "", now), bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	objects, _ := keys(t, s)
	if contains(objects, old) || !contains(objects, young) {
		t.Fatalf("objects after the sweep: %v; want %s gone and %s kept", objects, old, young)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	base := Options{Bucket: "b", AccessKeyID: "k", SecretAccessKey: "s"}
	tests := []struct {
		name string
		edit func(o *Options)
	}{
		{"no bucket", func(o *Options) { o.Bucket = "" }},
		{"no credentials", func(o *Options) { o.AccessKeyID, o.SecretAccessKey = "", "" }},
		{"endpoint not a URL", func(o *Options) { o.Endpoint = "127.0.0.1:9000" }},
		{"part size under S3's minimum", func(o *Options) { o.PartSize = 1 << 20 }},
	}
	for _, tc := range tests {
		o := base
		tc.edit(&o)
		if _, err := New(o); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if _, err := New(base); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
}

func blobKeyHex(id string) string { return strings.TrimPrefix(id, contentaddr.Prefix) }

func mustQuery(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
