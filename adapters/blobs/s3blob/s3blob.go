// Package s3blob keeps blobs (SPEC §5.9) in an S3-compatible object store
// (AWS S3, MinIO, R2, …) through aws-sdk-go-v2, and mints native
// presigned GET and PUT URLs (ports.BlobPresigner). Keys under the
// configured prefix:
//
//	<prefix><partition>/<64 hex>        a blob; ids list in key order
//	<prefix>.staging/<started ms>-<rnd> an upload being verified
//
// <partition> is blobio.PartitionKey of the name. A blob's media type,
// creation time (app clock) and partition ride as object metadata
// (x-amz-meta-media-type, -created-at-ms, -partition); the media type is
// also the object's Content-Type, so presigned downloads serve it.
//
// A Put streams the body to a staging key while hashing it (one streamed
// PutObject when the length is declared; a multipart upload of PartSize
// parts when it is not), and only once the content address matched is
// the object copied server-side to its final key and the staging object
// deleted: a refused body never appears under a blob key, whatever the
// object store checks itself (x-amz-checksum-sha256 would need the
// uploader to send the checksum header, which a presigned-URL client
// cannot be asked to do). Concurrent Puts of one blob each stage and copy
// identical bytes; the last copy wins and all report success. (A single
// copy is S3's way up to 5 GiB, far above any sane blob cap.) Staging
// objects and multipart uploads a crash left are removed once older than
// Options.StaleUploadAfter on the app clock (Put sweeps at most hourly);
// a bucket lifecycle rule on the staging prefix is a good second net.
//
// Objects uploaded through a presigned PUT carry no metadata (a plain
// client cannot send signed metadata headers): their media type reads as
// "" and their creation time as the object's Last-Modified.
package s3blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/syncd-dev/syncd/adapters/blobs/internal/blobio"
	"github.com/syncd-dev/syncd/adapters/clock"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

// Defaults and bounds of Options.
const (
	DefaultRegion           = "us-east-1"
	DefaultPartSize         = 8 << 20
	MinPartSize             = 5 << 20 // S3's smallest part but the last
	DefaultStaleUploadAfter = 24 * time.Hour
	// MaxPresignTTL is SigV4's longest presigned URL lifetime.
	MaxPresignTTL = 7 * 24 * time.Hour
)

const (
	stagingPrefix = ".staging/"
	metaMedia     = "media-type"
	metaCreated   = "created-at-ms"
	metaPartition = "partition"
	sweepEvery    = time.Hour
	listPage      = 1000
)

// Options configure a Store.
type Options struct {
	// Endpoint is the object store's base URL (http://127.0.0.1:9000 for
	// a local MinIO); empty means AWS S3 in Region.
	Endpoint string
	// Region is the signing region (default DefaultRegion).
	Region string
	// Bucket holds the blobs; it must exist. Required.
	Bucket string
	// Prefix starts every key the store writes (e.g. "syncd/blobs/");
	// several deployments can share a bucket under different prefixes.
	Prefix string
	// AccessKeyID, SecretAccessKey and SessionToken are static
	// credentials; Credentials, when set, is used instead (e.g. the AWS
	// SDK's default chain, an assumed role).
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	Credentials     aws.CredentialsProvider
	// UsePathStyle addresses the bucket in the path (endpoint/bucket/key),
	// as MinIO and most S3-compatible servers need, instead of in the
	// host name.
	UsePathStyle bool
	// HTTPClient overrides the SDK's HTTP client.
	HTTPClient *http.Client
	// PartSize is the part size of uploads of undeclared length (the
	// memory a Put of a chunked body holds; default DefaultPartSize, at
	// least MinPartSize).
	PartSize int64
	// StaleUploadAfter is the age past which a staging object or
	// multipart upload is swept (default DefaultStaleUploadAfter).
	StaleUploadAfter time.Duration
	// Clock signs presigned URLs (default the wall clock), so their expiry
	// agrees with the urlExpiresAtMs the host computes on the same clock.
	Clock ports.Clock
}

// Store is an S3 ports.BlobStore and ports.BlobPresigner.
type Store struct {
	c        *s3.Client
	presign  *s3.PresignClient
	bucket   string
	prefix   string
	partSize int64
	staleMs  int64
	sweep    blobio.SweepGate
}

var (
	_ ports.BlobStore     = (*Store)(nil)
	_ ports.BlobPresigner = (*Store)(nil)
	_ ports.BlobBuffers   = (*Store)(nil)
)

// streamBufferBytes bounds the buffers of one request the SDK streams a
// body through (its HTTP transport's copy and write buffers).
const streamBufferBytes = 64 << 10

// PutBufferBytes implements ports.BlobBuffers: a body of declared length
// streams through the SDK; one of unknown length is cut into parts of
// PartSize, one held at a time.
func (s *Store) PutBufferBytes(u ports.BlobUpload) int64 {
	if u.ByteLength >= 0 {
		return streamBufferBytes
	}
	return s.partSize + streamBufferBytes
}

// OpenBufferBytes implements ports.BlobBuffers: the object's body streams
// from the bucket.
func (s *Store) OpenBufferBytes(ports.BlobInfo, int64) int64 { return streamBufferBytes }

// New returns a store over o.Bucket; it makes no request.
func New(o Options) (*Store, error) {
	if o.Bucket == "" {
		return nil, errors.New("s3blob: Options.Bucket is required")
	}
	creds := o.Credentials
	if creds == nil {
		if o.AccessKeyID == "" || o.SecretAccessKey == "" {
			return nil, errors.New("s3blob: Options.AccessKeyID and SecretAccessKey (or Credentials) are required")
		}
		creds = credentials.NewStaticCredentialsProvider(o.AccessKeyID, o.SecretAccessKey, o.SessionToken)
	}
	if o.Endpoint != "" {
		if u, err := url.Parse(o.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("s3blob: Options.Endpoint %q is not an http(s) URL", o.Endpoint)
		}
	}
	if o.PartSize == 0 {
		o.PartSize = DefaultPartSize
	}
	if o.PartSize < MinPartSize {
		return nil, fmt.Errorf("s3blob: Options.PartSize %d is under S3's minimum %d", o.PartSize, MinPartSize)
	}
	if o.Region == "" {
		o.Region = DefaultRegion
	}
	if o.Clock == nil {
		o.Clock = clock.Wall{}
	}
	so := s3.Options{
		Region:       o.Region,
		Credentials:  aws.NewCredentialsCache(creds),
		UsePathStyle: o.UsePathStyle,
		// Checksums only where an operation requires one: a streamed body
		// of unknown content would otherwise need aws-chunked trailers,
		// which plain-HTTP endpoints and many compatible servers refuse.
		// The content address is verified by this store.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if o.Endpoint != "" {
		so.BaseEndpoint = aws.String(o.Endpoint)
	}
	if o.HTTPClient != nil {
		so.HTTPClient = o.HTTPClient
	}
	c := s3.New(so)
	s := &Store{c: c, bucket: o.Bucket, prefix: o.Prefix, partSize: o.PartSize, staleMs: o.StaleUploadAfter.Milliseconds()}
	if s.staleMs <= 0 {
		s.staleMs = DefaultStaleUploadAfter.Milliseconds()
	}
	s.presign = s3.NewPresignClient(c, func(po *s3.PresignOptions) {
		po.Presigner = clockSigner{clock: o.Clock, v4: v4.NewSigner(func(so *v4.SignerOptions) {
			so.DisableURIPathEscaping = true // S3 signs the path as sent
		})}
	})
	return s, nil
}

// clockSigner signs presigned URLs at the app clock's time.
type clockSigner struct {
	clock ports.Clock
	v4    *v4.Signer
}

func (c clockSigner) PresignHTTP(ctx context.Context, creds aws.Credentials, r *http.Request, payloadHash, service, region string,
	_ time.Time, optFns ...func(*v4.SignerOptions)) (string, http.Header, error) {
	return c.v4.PresignHTTP(ctx, creds, r, payloadHash, service, region, c.clock.Now().UTC(), optFns...)
}

func internal(op string, err error) error { return blobio.Internal("s3blob", op, err) }

// partitionPrefix is the key prefix of a partition's blobs.
func (s *Store) partitionPrefix(partition string) string {
	return s.prefix + blobio.PartitionKey(partition) + "/"
}

// key is the object key of a blob; ok is false for a malformed id.
func (s *Store) key(partition, blobID string) (string, bool) {
	if !contentaddr.Valid(blobID) {
		return "", false
	}
	return s.partitionPrefix(partition) + blobio.IDHex(blobID), true
}

// isNotFound reports a missing object (HEAD answers a bare 404).
func isNotFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	var re *smithyhttp.ResponseError
	return errors.As(err, &nsk) || errors.As(err, &nf) || (errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound)
}

// metadata is the object metadata of an upload.
func metadata(u ports.BlobUpload) map[string]string {
	m := map[string]string{
		metaCreated:   strconv.FormatInt(u.CreatedAtMs, 10),
		metaPartition: url.QueryEscape(u.Partition),
	}
	if u.MediaType != "" {
		// Escaped: metadata travels as HTTP header values.
		m[metaMedia] = url.QueryEscape(u.MediaType)
	}
	return m
}

// contentType is the Content-Type stored for a media type: the media type
// itself when it is a plain header value.
func contentType(media string) *string {
	if media == "" {
		return nil
	}
	for i := 0; i < len(media); i++ {
		if c := media[i]; c < 0x20 || c > 0x7e {
			return nil
		}
	}
	return aws.String(media)
}

// info reads a blob's info from an object's metadata.
func info(partition, blobID string, size int64, meta map[string]string, lastModified *time.Time) (ports.BlobInfo, bool) {
	in := ports.BlobInfo{Partition: partition, BlobID: blobID, ByteLength: size}
	if p, ok := meta[metaPartition]; ok {
		if got, err := url.QueryUnescape(p); err != nil || got != partition {
			return ports.BlobInfo{}, false // a hashed partition name collided
		}
	}
	if m, ok := meta[metaMedia]; ok {
		in.MediaType, _ = url.QueryUnescape(m)
	}
	if c, err := strconv.ParseInt(meta[metaCreated], 10, 64); err == nil {
		in.CreatedAtMs = c
	} else if lastModified != nil {
		in.CreatedAtMs = lastModified.UnixMilli()
	}
	return in, true
}

// Stat implements ports.BlobStore.
func (s *Store) Stat(ctx context.Context, partition, blobID string) (ports.BlobInfo, bool, error) {
	key, valid := s.key(partition, blobID)
	if !valid {
		return ports.BlobInfo{}, false, nil
	}
	out, err := s.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if isNotFound(err) {
		return ports.BlobInfo{}, false, nil
	}
	if err != nil {
		return ports.BlobInfo{}, false, internal("stat", err)
	}
	in, ok := info(partition, blobID, aws.ToInt64(out.ContentLength), out.Metadata, out.LastModified)
	return in, ok, nil
}

// Put implements ports.BlobStore.
func (s *Store) Put(ctx context.Context, u ports.BlobUpload, r io.Reader) (ports.BlobInfo, bool, error) {
	if err := blobio.Check(u); err != nil {
		return ports.BlobInfo{}, false, err
	}
	if in, ok, err := s.Stat(ctx, u.Partition, u.BlobID); err != nil || ok {
		return in, false, err
	}
	s.sweepStale(ctx, u.CreatedAtMs)
	name, err := blobio.StagingName(u.CreatedAtMs)
	if err != nil {
		return ports.BlobInfo{}, false, internal("put", err)
	}
	staging := s.prefix + stagingPrefix + name
	v := blobio.NewVerifier(ctx, r, u)
	err = s.stage(ctx, staging, u, v)
	if err == nil {
		err = v.Finish()
	}
	if err == nil {
		err = s.publish(ctx, staging, u)
	}
	// The staging object goes whatever happened (absent after a failed
	// upload: deleting it is then a no-op). A failure to delete it does
	// not fail a published blob: the stale sweep removes it later.
	_, _ = s.c.DeleteObject(context.WithoutCancel(ctx), &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &staging})
	if err != nil {
		return ports.BlobInfo{}, false, err
	}
	return ports.BlobInfo{Partition: u.Partition, BlobID: u.BlobID, ByteLength: v.Count(), MediaType: u.MediaType, CreatedAtMs: u.CreatedAtMs}, true, nil
}

// bodyErr prefers the verifier's own refusal (a blob.* error, or the
// body's read failure) over the SDK error that carried it; a body that
// ended early (the SDK refuses to send less than the declared length) is
// judged as a whole.
func bodyErr(v *blobio.Verifier, op string, err error) error {
	verr := v.Err()
	if verr == nil && v.Ended() {
		verr = v.Finish()
	}
	if verr != nil {
		if syncerr.CodeOf(verr) != "" {
			return verr
		}
		return internal("read body", verr)
	}
	return internal(op, err)
}

// noRetry: a streamed body cannot be replayed.
func noRetry(o *s3.Options) { o.RetryMaxAttempts = 1 }

// stage uploads the verified body to the staging key.
func (s *Store) stage(ctx context.Context, key string, u ports.BlobUpload, v *blobio.Verifier) error {
	if u.ByteLength >= 0 {
		// One streamed PUT of the declared length. The payload is not
		// hashed for the signature (that would need a second pass); the
		// content address is checked here, the transport by TLS.
		_, err := s.c.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &s.bucket, Key: &key, Body: struct{ io.Reader }{v}, ContentLength: aws.Int64(u.ByteLength),
			ContentType: contentType(u.MediaType), Metadata: metadata(u),
		}, noRetry, s3.WithAPIOptions(v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware))
		if err != nil {
			return bodyErr(v, "upload", err)
		}
		return nil
	}
	buf := make([]byte, s.partSize)
	n, err := io.ReadFull(v, buf)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		// The whole body fits one part: a plain PUT of the buffer.
		_, err := s.c.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n)),
			ContentType: contentType(u.MediaType), Metadata: metadata(u),
		})
		if err != nil {
			return internal("upload", err)
		}
		return nil
	}
	if err != nil {
		return bodyErr(v, "upload", err)
	}
	return s.multipart(ctx, key, u, v, buf)
}

// multipart uploads a body of unknown length in parts, the first already
// in buf; a failure aborts the upload.
func (s *Store) multipart(ctx context.Context, key string, u ports.BlobUpload, v *blobio.Verifier, buf []byte) error {
	mu, err := s.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: &s.bucket, Key: &key, ContentType: contentType(u.MediaType), Metadata: metadata(u),
	})
	if err != nil {
		return internal("upload", err)
	}
	var parts []types.CompletedPart
	err = func() error {
		n := len(buf)
		for num := int32(1); n > 0; num++ {
			out, err := s.c.UploadPart(ctx, &s3.UploadPartInput{
				Bucket: &s.bucket, Key: &key, UploadId: mu.UploadId, PartNumber: aws.Int32(num),
				Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n)),
			})
			if err != nil {
				return internal("upload part", err)
			}
			parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
			var rerr error
			n, rerr = io.ReadFull(v, buf)
			if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
				return bodyErr(v, "upload", rerr)
			}
		}
		_, err := s.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: &s.bucket, Key: &key, UploadId: mu.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
		})
		if err != nil {
			return internal("complete upload", err)
		}
		return nil
	}()
	if err != nil {
		_, _ = s.c.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &key, UploadId: mu.UploadId})
	}
	return err
}

// publish copies the verified staging object to the blob's key, with its
// metadata.
func (s *Store) publish(ctx context.Context, staging string, u ports.BlobUpload) error {
	key, _ := s.key(u.Partition, u.BlobID)
	_, err := s.c.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket: &s.bucket, Key: &key, CopySource: aws.String(s.bucket + "/" + staging),
		MetadataDirective: types.MetadataDirectiveCopy,
	})
	if err != nil {
		return internal("publish", err)
	}
	return nil
}

// sweepStale removes staging objects and multipart uploads started more
// than StaleUploadAfter before nowMs, at most once per sweepEvery; a
// failure waits for the next turn.
func (s *Store) sweepStale(ctx context.Context, nowMs int64) {
	if !s.sweep.Due(nowMs, sweepEvery.Milliseconds()) {
		return
	}
	prefix := s.prefix + stagingPrefix
	stale := func(key string) bool {
		started, ok := blobio.StagingStarted(strings.TrimPrefix(key, prefix))
		return ok && started < nowMs-s.staleMs
	}
	p := s3.NewListObjectsV2Paginator(s.c, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			break
		}
		for _, o := range page.Contents {
			if k := aws.ToString(o.Key); stale(k) {
				_, _ = s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &k})
			}
		}
	}
	ups, err := s.c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &s.bucket, Prefix: &prefix})
	if err != nil {
		return
	}
	for _, up := range ups.Uploads {
		if stale(aws.ToString(up.Key)) {
			_, _ = s.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: up.Key, UploadId: up.UploadId})
		}
	}
}

// emptyBody reads nothing.
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }

// Open implements ports.BlobStore with a ranged GET (a zero-length range
// is a HEAD: HTTP ranges cannot name no bytes).
func (s *Store) Open(ctx context.Context, partition, blobID string, offset, length int64) (io.ReadCloser, ports.BlobInfo, error) {
	key, valid := s.key(partition, blobID)
	if !valid {
		return nil, ports.BlobInfo{}, blobio.NotFound()
	}
	if length == 0 || offset < 0 {
		in, ok, err := s.Stat(ctx, partition, blobID)
		if err != nil {
			return nil, ports.BlobInfo{}, err
		}
		if !ok {
			return nil, ports.BlobInfo{}, blobio.NotFound()
		}
		if _, _, err := blobio.Range(in.ByteLength, offset, length); err != nil {
			return nil, ports.BlobInfo{}, err
		}
		return emptyBody{}, in, nil
	}
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &key}
	if offset > 0 || length > 0 {
		rng := fmt.Sprintf("bytes=%d-", offset)
		if length > 0 {
			rng += strconv.FormatInt(offset+length-1, 10)
		}
		in.Range = &rng
	}
	out, err := s.c.GetObject(ctx, in)
	if isNotFound(err) {
		return nil, ports.BlobInfo{}, blobio.NotFound()
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable {
		// At or past the end: the caller's range is empty or its bug.
		return s.Open(ctx, partition, blobID, offset, 0)
	}
	if err != nil {
		return nil, ports.BlobInfo{}, internal("open", err)
	}
	size := aws.ToInt64(out.ContentLength)
	if cr := aws.ToString(out.ContentRange); cr != "" {
		// "bytes a-b/size"
		if i := strings.LastIndexByte(cr, '/'); i >= 0 {
			if n, err := strconv.ParseInt(cr[i+1:], 10, 64); err == nil {
				size = n
			}
		}
	}
	info, ok := info(partition, blobID, size, out.Metadata, out.LastModified)
	if !ok {
		_ = out.Body.Close()
		return nil, ports.BlobInfo{}, blobio.NotFound()
	}
	return out.Body, info, nil
}

// ListCreatedBefore implements ports.BlobStore: keys list in blob id
// order; each candidate's creation time is its metadata (one HEAD each).
func (s *Store) ListCreatedBefore(ctx context.Context, partition string, beforeMs int64, after string, limit int) ([]ports.BlobInfo, error) {
	if limit <= 0 {
		return nil, nil
	}
	prefix := s.partitionPrefix(partition)
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix, MaxKeys: aws.Int32(listPage)}
	if after != "" {
		// Ids share their prefix, so key order is id order from after on.
		start := prefix + blobio.IDHex(after)
		if !strings.HasPrefix(after, contentaddr.Prefix) {
			start = prefix
			if after > contentaddr.Prefix {
				return nil, nil
			}
		}
		in.StartAfter = &start
	}
	var out []ports.BlobInfo
	p := s3.NewListObjectsV2Paginator(s.c, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, internal("list", err)
		}
		for _, o := range page.Contents {
			id := contentaddr.Prefix + strings.TrimPrefix(aws.ToString(o.Key), prefix)
			if !contentaddr.Valid(id) || id <= after {
				continue
			}
			in, ok, err := s.Stat(ctx, partition, id)
			if err != nil {
				return nil, err
			}
			if !ok || in.CreatedAtMs >= beforeMs {
				continue
			}
			out = append(out, in)
			if len(out) == limit {
				return out, nil
			}
		}
	}
	return out, nil
}

// Delete implements ports.BlobStore (S3 deletes of absent keys succeed).
func (s *Store) Delete(ctx context.Context, partition, blobID string) error {
	key, valid := s.key(partition, blobID)
	if !valid {
		return nil
	}
	if _, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key}); err != nil && !isNotFound(err) {
		return internal("delete", err)
	}
	return nil
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 || ttl > MaxPresignTTL {
		return syncerr.Newf(syncerr.InternalError, "presign ttl %s outside (0, %s]", ttl, MaxPresignTTL)
	}
	return nil
}

// PresignGet implements ports.BlobPresigner.
func (s *Store) PresignGet(ctx context.Context, partition, blobID string, ttl time.Duration) (string, error) {
	key, valid := s.key(partition, blobID)
	if !valid {
		return "", blobio.NotFound()
	}
	if err := checkTTL(ttl); err != nil {
		return "", err
	}
	req, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key}, s3.WithPresignExpires(ttl))
	if err != nil {
		return "", internal("presign get", err)
	}
	return req.URL, nil
}

// PresignPut implements ports.BlobPresigner: a PUT to the blob's key whose
// signature covers Content-Length, so the object store refuses a body of
// any other length (SPEC §5.9.3). The declared length must be known and
// within the cap.
func (s *Store) PresignPut(ctx context.Context, u ports.BlobUpload, ttl time.Duration) (string, error) {
	if err := blobio.Check(u); err != nil {
		return "", err
	}
	if u.ByteLength < 0 {
		return "", syncerr.Newf(syncerr.InvalidRequest, "a presigned upload needs the declared byte length")
	}
	if err := checkTTL(ttl); err != nil {
		return "", err
	}
	key, _ := s.key(u.Partition, u.BlobID)
	req, err := s.presign.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: &key, ContentLength: aws.Int64(u.ByteLength)},
		s3.WithPresignExpires(ttl))
	if err != nil {
		return "", internal("presign put", err)
	}
	return req.URL, nil
}
