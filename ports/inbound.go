package ports

import (
	"context"
	"io"
	"net/url"
	"time"

	"github.com/syncd-dev/syncd/domain/syncerr"
)

// The inbound ports: what the transports (adapters/httpapi, the
// test-control plane's instances) call, implemented by the use cases in
// app/. A transport decodes its request into these types and writes their
// answers; the use cases never see the transport.

// SyncResponse is a whole sync response, built before the first byte is
// written: Encode writes the message (envelope, frames, END), Release
// frees what it buffered.
type SyncResponse interface {
	Encode(w io.Writer) error
	Release()
}

// SyncService answers one authenticated sync request body (POST /sync,
// SPEC §4). A non-nil error is a request-level failure, answered before
// any response byte.
type SyncService interface {
	Sync(ctx context.Context, id Identity, body []byte) (SyncResponse, error)
}

// BlobUploadRequest is one authenticated upload (PUT <mount>/blobs/{blobId}).
type BlobUploadRequest struct {
	BlobID    string
	MediaType string
	// ByteLength is the declared length of the decoded body, -1 when not
	// known (no Content-Length, or a Content-Encoding).
	ByteLength int64
}

// BlobGrantRequest asks for an upload grant (the body of POST
// <mount>/blobs/{blobId}/upload-grant).
type BlobGrantRequest struct {
	ByteLength int64
	MediaType  string
}

// BlobGrant answers an upload-grant request: a presigned PUT URL, the
// present marker, or neither (no presigned uploads here: the client PUTs
// through the server).
type BlobGrant struct {
	Present     bool
	URL         string
	ExpiresAtMs int64
}

// BlobDownload is an authorized download: a presigned URL when presign is
// configured (the bytes are not streamed), else the blob to stream.
type BlobDownload struct {
	Info        BlobInfo
	URL         string
	ExpiresAtMs int64
}

// BlobService decides and serves the blob routes (the blob use case
// implements it).
type BlobService interface {
	// Upload stores an authenticated upload, verifying its content address
	// while reading body.
	Upload(ctx context.Context, id Identity, u BlobUploadRequest, body io.Reader) error
	// UploadGrant answers an authenticated upload-grant request.
	UploadGrant(ctx context.Context, id Identity, blobID string, g BlobGrantRequest) (BlobGrant, error)
	// Download authorizes an authenticated download against the rows that
	// reference the blob.
	Download(ctx context.Context, id Identity, blobID string) (BlobDownload, error)
	// Open reads an authorized blob: length bytes from offset (-1: to the end).
	Open(ctx context.Context, info BlobInfo, offset, length int64) (io.ReadCloser, error)
	// GetSigned authorizes a native presigned download URL's query.
	GetSigned(ctx context.Context, blobID string, q url.Values) (BlobInfo, error)
	// PutSigned stores the body of a native presigned upload URL.
	PutSigned(ctx context.Context, blobID string, q url.Values, contentLength int64, body io.Reader) error
	// UploadBufferBytes bounds the memory the store holds while an upload
	// of u streams (u.ByteLength -1: unknown length), reserved on the
	// in-flight body budget for the upload's duration.
	UploadBufferBytes(u BlobUploadRequest) int64
	// DownloadBufferBytes bounds the memory the store holds while length
	// bytes of info stream out, reserved likewise.
	DownloadBufferBytes(info BlobInfo, length int64) int64
}

// SegmentService decides and serves segment downloads (the segment use
// case implements it).
type SegmentService interface {
	// AuthorizeDirect re-authorizes an authenticated actor for segmentID
	// with its X-Syncular-Scopes header value.
	AuthorizeDirect(ctx context.Context, id Identity, segmentID string, scopesJSON []byte) (SegmentPublication, error)
	// AuthorizeSigned checks a signed-URL token for segmentID.
	AuthorizeSigned(ctx context.Context, segmentID, token string) (SegmentPublication, error)
	// Open returns the bytes of an authorized publication's segment.
	Open(ctx context.Context, p SegmentPublication) (io.ReadCloser, int64, error)
}

// SegmentDownload is one authorized download as the transport answered it.
type SegmentDownload struct {
	Publication SegmentPublication
	// Identity is the authenticated caller (zero for a signed URL).
	Identity    Identity
	Signed      bool
	NotModified bool
	// Status is the answer's HTTP status (a read failure before the first
	// byte is a 500); Encoding the body's content coding ("zstd", "gzip",
	// "identity"); Bytes the body's length as written (compressed when
	// encoded).
	Status   int
	Encoding string
	Bytes    int64
	Elapsed  time.Duration
}

// SegmentDownloadObserver is implemented by a SegmentService that wants
// to hear of every authorized download once it was answered.
type SegmentDownloadObserver interface {
	SegmentDownloaded(ctx context.Context, d SegmentDownload)
	// ObservingDownloads reports whether anything listens; when not, the
	// transport keeps no record of its downloads.
	ObservingDownloads() bool
}

// RealtimeAdmission is a realtime connection (a §8 socket, a watch
// socket) admitted before its upgrade: its registrations are loaded and
// its slot is taken. Run serves the accepted socket until it ends; Abort
// gives the slot back when the upgrade fails.
type RealtimeAdmission interface {
	Run(ctx context.Context, c RealtimeConn)
	Abort()
}

// OperationsService answers one authenticated remote operations body
// (POST /operations) with an encoded response (success or kind "error")
// and the catalog code of an error response ("" for a success).
type OperationsService interface {
	Handle(ctx context.Context, id Identity, body []byte) ([]byte, syncerr.Code)
}
